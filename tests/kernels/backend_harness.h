// The backend-vs-CPU op harness (after ggml's test-backend-ops): every op of kernels/ops.h runs on
// random inputs on a backend under test and on the CPU oracle, and outputs are compared per op.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace lattice::test {

// Draws the inputs of one case on the host.
class Inputs {
 public:
  explicit Inputs(uint64_t seed) : gen_(seed) {}
  Tensor uniform(const Shape& shape, float lo = -1.0f, float hi = 1.0f);
  Tensor ids(const Shape& shape, int32_t lo, int32_t hi);  // uniform in [lo, hi)
  Tensor bf16(const Shape& shape);  // any bit pattern: NaNs, Infs and subnormals included

 private:
  std::mt19937_64 gen_;
};

using Tensors = std::vector<Tensor>;

// One call of one op: `make` draws every tensor the op touches (outputs too, so accumulating ops
// start from non-zero values); `run` calls the op on them, on whatever device they are, and
// returns any host scalars the op produces.
struct OpCase {
  std::string op;    // the ops.h name
  std::string what;  // the variant
  double tolerance;
  std::function<Tensors(Inputs&)> make;
  std::function<std::vector<double>(Tensors&)> run;
  // bf16 runs of the case besides the f32 one: each lists the tensor arguments that are bf16 there
  // (make's f32 draw rounded); the others keep make's dtype, so a list can mix dtypes.
  std::vector<std::vector<int>> bf16 = {};
  // The op's contract is two ops in a row, each rounding its bf16 output (a norm backward, then the
  // residual gradient added to the stored dx): compare_bf16_contract's single rounding does not apply.
  bool rounds_twice = false;
};

// Every case of the harness, each ops.h function at least once.
std::vector<OpCase> op_cases();

// The name of a case's run: "op", "op (what)" or, with bf16 arguments, "op (what, bf16 0,2)".
std::string case_name(const OpCase& c, const std::vector<int>& bf16_args = {});

// Host copies of `t` with the arguments listed rounded to bf16 (ops::cast), the others cloned.
Tensors with_bf16(const Tensors& t, const std::vector<int>& bf16_args);
// Host copies of `t` with every bf16 tensor widened to f32 (exact), the others cloned.
Tensors widened(const Tensors& t);

// Element i of a host f32, bf16 (widened) or f64 tensor.
double element(const Tensor& t, int64_t i);

// One op whose candidate result differs from the CPU's: which op (and case), and how.
struct OpMismatch {
  std::string op;
  std::string detail;
};

// Runs every case with the backend registered for `device` against the CPU backend. Each case
// draws its inputs from `seed`; every tensor the op sees (inputs and outputs) is compared after the
// call, and the two must agree on whether the call throws. Each case runs in f32 and in each of its
// bf16 variants. exact: bitwise equality; otherwise each op's tolerance, |got - want| <= tol *
// max(1, |want|), plus one bf16 ulp (2^-7 relative) on bf16 outputs, which two f32 results that close
// may round apart (i32 is always exact).
std::vector<OpMismatch> compare_backend_ops(Device device, bool exact, uint64_t seed = 1);

// The dispatch tests' check of a fused entry: every case on `stand_in`, registered as the CUDA
// backend for the call, against the CPU bit for bit (compare_backend_ops, seed 3); each mismatch
// fails the calling test case.
void check_stand_in_matches_cpu(const Backend& stand_in);

// The staging contract on `device` alone: every bf16 run of every case gives bit for bit what the
// same case gives on `device` with its bf16 arguments widened to f32, each argument that is bf16 in
// the run then rounded to nearest even (scalars equal). F32Staging computes exactly that, and a
// device's typed kernels (kernels/typed_kernels.h), which load bf16 and round once, must too.
// The ops named in `left_out`, and the cases that round twice (OpCase::rounds_twice), are not checked.
std::vector<OpMismatch> compare_bf16_contract(Device device, const std::vector<std::string>& left_out,
                                              uint64_t seed = 1);
// What a GPU leaves out of the contract: its bf16 GEMMs and attention (tensor cores, cuDNN)
// accumulate in their own order, and compare_backend_ops holds them to the oracle's tolerance.
inline const std::vector<std::string> kOwnBf16Kernels = {
    "matmul", "matmul_bias", "matmul_bias_gelu", "matmul_gelu_backward", "matmul_group", "matmul_residual",
    "linear_weight_grad", "attention_forward", "attention_backward"};

// The names of the ops the harness covers (each ops.h function name once).
std::vector<std::string> harness_op_names();
// The functions kernels/ops.h declares returning void or double (every op but copy_to_host_async),
// read from the file: a test calling it has //kernels:ops.h as data.
std::set<std::string> declared_op_names();

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
