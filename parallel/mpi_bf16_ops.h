// bf16 reductions on MPI, which has no bf16 type: user-defined ops (sum, max, min) on the 16-bit
// patterns (MPI_UINT16_T) that widen each pair to f32, combine and round back to bf16 (nearest
// even), so every combine rounds, as NCCL's bf16 reductions do. MpiRuntime creates them once per
// process after MPI_Init and frees them before MPI_Finalize.
#pragma once

#include <mpi.h>

#include "parallel/communicator.h"

namespace lattice {

// Creates the ops; returns false (and does nothing) when they already exist.
bool create_bf16_reduce_ops();
void free_bf16_reduce_ops();

// The op that reduces bf16 data sent as MPI_UINT16_T; throws when the ops do not exist.
MPI_Op bf16_reduce_op(ReduceOp op);

}  // namespace lattice
