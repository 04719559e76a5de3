// F32Staging: runs an f32 kernel on bf16 operands. Each bf16 operand is widened into f32 scratch on its
// device before the kernel and rounded back (nearest even) after it: the loads and stores of a fused
// kernel that reads bf16, computes in f32 and writes bf16, without a bf16 kernel per backend.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace lattice {

// One per op call (kernels/ops.cc), after the op's checks: take the kernel's pointers through in / out /
// in_out, run the kernel, then finish(). An f32 operand gives its own pointer and costs nothing; an
// undefined one gives null (optional operands: beta, dbeta). One tensor passed twice (an output that
// aliases an input, as add and cross_entropy_backward allow) is staged once, so the kernel sees the
// aliasing it would in f32; operands that overlap without being the same tensor are not supported.
// Scratch comes from a per-thread pool per device whose buffers grow to the largest request and are
// then reused, so steady steps allocate nothing; on CUDA the reuse is stream-ordered (all work runs on
// the one compute stream). Ops do not nest: one staging is live per thread at a time.
class F32Staging {
 public:
  explicit F32Staging(const Backend& backend) : backend_(backend) {}
  F32Staging(const F32Staging&) = delete;
  F32Staging& operator=(const F32Staging&) = delete;

  // Read only: widened before the kernel.
  const float* in(const Tensor& t) { return t.dtype() == DType::kBF16 ? stage(t, true, false) : f32_of(t); }
  // Written only (overwritten): not widened, rounded back by finish().
  float* out(const Tensor& t) { return t.dtype() == DType::kBF16 ? stage(t, false, true) : f32_of(t); }
  // Read and written (in place, accumulate): widened, and rounded back by finish().
  float* in_out(const Tensor& t) { return t.dtype() == DType::kBF16 ? stage(t, true, true) : f32_of(t); }

  // Rounds every written bf16 operand back into its tensor (enqueued after the kernel); an op that
  // only reads need not call it. Explicit, not in a destructor, because it launches work that may
  // throw; an op that throws before it leaves its bf16 outputs unwritten.
  void finish();

  // The most bf16 operands one op stages (attention_backward: dout, q, k, v, out, dq, dk, dv).
  static constexpr int kMaxStaged = 8;

 private:
  struct Staged {
    uint16_t* bf16;  // the tensor's elements (with numel, the key that finds an alias)
    int64_t numel;
    float* f32;    // its scratch
    bool widened;  // scratch holds the tensor's values
    bool written;  // round back in finish()
  };

  static float* f32_of(const Tensor& t) { return t.defined() ? t.f32() : nullptr; }
  float* stage(const Tensor& t, bool read, bool write);
  float* scratch(int64_t numel);

  const Backend& backend_;
  std::array<Staged, kMaxStaged> staged_;
  int count_ = 0;
  uint32_t taken_ = 0;  // pool buffers this op holds (bit i: buffer i)
};

}  // namespace lattice
