// OpProfile: the device time of each op of kernels/ops.h over a stretch of a run (`lattice bench
// --profile-ops`), by op and operand shapes — what nsys gives, on machines without it. Each op call
// is bracketed by two events on the compute stream, so a row is the time the device spent from the
// op's first kernel to its last, not the host's launch time; the events are read when the profile
// stops, so timing adds no host wait to the run (it adds two event records per op to the host's work).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/nvtx_range.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"

namespace lattice {

struct OpTime {
  std::string op;        // the ops.h function
  std::string operands;  // its tensors' dtypes and shapes, e.g. "bf16[8192,768] bf16[768,768] bf16[8192,768]"
  int64_t calls = 0;
  double seconds = 0;  // device time summed over the calls
  // Per call: the bytes of its operands, each counted once per product — a floor on what it moves
  // (an operand read and written moves twice; ops that know better say: OpWork::bytes) — and the
  // FLOPs of its matrix products (0: not a GEMM or attention op).
  double bytes = 0;
  double flops = 0;
};

struct OpProfileRow;  // the calls and events of one (op, operands)

class OpProfile {
 public:
  // Times the ops this thread calls on `device` from now on (ops other threads call — a prefetch
  // thread's copies — are not timed). An op called inside another op counts as part of it.
  static void start(Device device);
  static bool running();
  // Ends the profile: its rows, the most time first (waits for events still in flight).
  static std::vector<OpTime> stop();
};

// What an op call does besides the bytes of its operands, for OpTime.
struct OpWork {
  int64_t products = 1;  // > 1: that many products of the listed shapes (matmul_group)
  double flops = 0;      // multiply-adds times 2, all products together; 0 for ops that are not products
  double bytes = -1;     // >= 0: what it moves instead of its operands' bytes (a gather: the rows it reads)
};

// Times one op call while a profile runs on this thread (one atomic load otherwise), and opens an
// NVTX range named after the op (kernels/nvtx_range.h). Every public op opens one with the tensors
// that define its work.
class OpScope {
 public:
  OpScope(const char* op, std::initializer_list<const Tensor*> tensors, OpWork work = {});
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  NvtxRange range_;
  OpProfileRow* row_ = nullptr;  // set when this call is timed
  bool counted_ = false;         // this call is in op_depth (a profile runs on this thread)
  int uncaught_ = 0;  // exceptions in flight when the op began: an op that throws is not timed
  Event start_;
};

}  // namespace lattice
