// The bf16 MPI reduction ops. MPI calls them on host buffers (device tensors are staged through
// host memory first), so, like MPI's own reductions, they loop over the elements here.
#include "parallel/mpi_bf16_ops.h"

#include <algorithm>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/error.h"
#include "parallel/mpi_runtime.h"

namespace lattice {
namespace {

// Indexed by ReduceOp. Process-wide, like the MPI handles they are.
MPI_Op g_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

// MPI's contract: inout[i] = in[i] op inout[i].
template <float (*combine)(float, float)>
void reduce_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bfloat16(combine(bfloat16_to_float(a[i]), bfloat16_to_float(b[i])));
}

float add(float a, float b) { return a + b; }
float maximum(float a, float b) { return std::max(a, b); }
float minimum(float a, float b) { return std::min(a, b); }

}  // namespace

bool create_bf16_reduce_ops() {
  if (g_ops[0] != MPI_OP_NULL) return false;
  // Commutative: a + b and b + a round alike, so MPI may combine in any order.
  MPI_CHECK(MPI_Op_create(&reduce_bf16<add>, 1, &g_ops[static_cast<int>(ReduceOp::kSum)]));
  MPI_CHECK(MPI_Op_create(&reduce_bf16<maximum>, 1, &g_ops[static_cast<int>(ReduceOp::kMax)]));
  MPI_CHECK(MPI_Op_create(&reduce_bf16<minimum>, 1, &g_ops[static_cast<int>(ReduceOp::kMin)]));
  return true;
}

void free_bf16_reduce_ops() {
  for (MPI_Op& op : g_ops) {
    if (op != MPI_OP_NULL) MPI_Op_free(&op);  // sets op to MPI_OP_NULL
  }
}

MPI_Op bf16_reduce_op(ReduceOp op) {
  const MPI_Op result = g_ops[static_cast<int>(op)];
  LATTICE_CHECK(result != MPI_OP_NULL,
                "bf16 {} reduction on MPI: the ops are created by MpiRuntime, which is not running",
                reduce_op_name(op));
  return result;
}

}  // namespace lattice
