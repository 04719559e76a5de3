// The backend-vs-CPU op harness (after ggml's test-backend-ops): every op of kernels/ops.h runs on
// random inputs on a backend under test and on the CPU oracle, and outputs are compared per op.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace lattice::test {

// One op whose candidate result differs from the CPU's: which op (and case), and how.
struct OpMismatch {
  std::string op;
  std::string detail;
};

// Runs every case with the backend registered for `device` against the CPU backend. Each case
// draws its inputs from `seed`; every tensor the op sees (inputs and outputs) is compared after the
// call, and the two must agree on whether the call throws. exact: bitwise equality; otherwise each
// op's tolerance, |got - want| <= tol * max(1, |want|) (bf16 and i32 are always exact).
std::vector<OpMismatch> compare_backend_ops(Device device, bool exact, uint64_t seed = 1);

// The names of the ops the harness covers (each ops.h function name once).
std::vector<std::string> harness_op_names();

// The CPU kernels posing as the CUDA backend over host memory (tensors say "cuda"): lets the
// harness and the cross-device checks run in a CPU-only build. Tests edit entries to break it.
Backend cuda_stand_in();

// Registers a table for a device for the lifetime of this object, then restores the previous one.
class ScopedBackend {
 public:
  ScopedBackend(Device device, const Backend* backend) : device_(device), previous_(set_backend(device, backend)) {}
  ~ScopedBackend() { set_backend(device_, previous_); }
  ScopedBackend(const ScopedBackend&) = delete;
  ScopedBackend& operator=(const ScopedBackend&) = delete;

 private:
  Device device_;
  const Backend* previous_;
};

}  // namespace lattice::test
