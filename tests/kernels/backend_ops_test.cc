// The backend-vs-CPU harness run with the CPU backend itself (it must agree bit for bit), with the
// CPU kernels posing as another device's backend, and with deliberately broken tables, which it
// must report; plus dispatch errors: a backend not built, tensors on two devices.
#include <bit>
#include <set>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;
using lattice::test::compare_backend_ops;
using lattice::test::cuda_stand_in;
using lattice::test::OpMismatch;
using lattice::test::ScopedBackend;

namespace {

std::string listing(const std::vector<OpMismatch>& m) {
  std::string s;
  for (const OpMismatch& x : m) s += x.op + ": " + x.detail + "\n";
  return s;
}

// Whether `name` ("op" or "op (variant)") is among the mismatches.
bool reports(const std::vector<OpMismatch>& m, const std::string& name) {
  for (const OpMismatch& x : m)
    if (x.op == name) return true;
  return false;
}

void wrong_gelu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0f;  // ReLU, not GELU
}

// Rounds toward zero instead of to nearest even: each bf16 result at most one bf16 ulp off.
void truncating_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(src[i]) >> 16);
}

[[noreturn]] void refusing_check_indices(const char* op, const char*, const int32_t*, int64_t, int64_t) {
  throw Error(fmt::format("{}: every id refused", op));
}

}  // namespace

TEST_CASE("the CPU backend agrees with the CPU oracle bit for bit") {
  const auto mismatches = compare_backend_ops(Device::kCpu, /*exact=*/true);
  INFO(listing(mismatches));
  REQUIRE(mismatches.empty());
}

TEST_CASE("the harness covers every op of kernels/ops.h") {
  const std::set<std::string> declared = test::declared_op_names();
  REQUIRE(declared.size() > 30);
  const auto names = test::harness_op_names();
  const std::set<std::string> covered(names.begin(), names.end());
  for (const std::string& op : declared) {
    INFO(op);
    CHECK(covered.count(op) == 1);
  }
}

TEST_CASE("a backend on another device is compared through explicit copies") {
  const Backend stand_in = cuda_stand_in();
  ScopedBackend registered(Device::kCuda, &stand_in);
  const auto mismatches = compare_backend_ops(Device::kCuda, /*exact=*/true, 7);
  INFO(listing(mismatches));
  REQUIRE(mismatches.empty());
}

TEST_CASE("the harness reports a wrong kernel") {
  Backend broken = cuda_stand_in();
  broken.gelu_forward = &wrong_gelu;
  ScopedBackend registered(Device::kCuda, &broken);
  for (bool exact : {true, false}) {
    const auto mismatches = compare_backend_ops(Device::kCuda, exact);
    INFO(listing(mismatches));
    // gelu_forward's f32 run and bf16 one, the five runs of matmul_bias_gelu, whose GELU it is, then
    // gelu_forward's on views at odd offsets.
    REQUIRE(mismatches.size() == 9);
    REQUIRE(mismatches[0].op == "gelu_forward");
    REQUIRE_THAT(mismatches[0].detail, Catch::Contains("tensor argument 1 (f32[6, 20] cpu)"));
    REQUIRE(mismatches[1].op == "gelu_forward (bf16 0,1)");
    REQUIRE_THAT(mismatches[1].detail, Catch::Contains("tensor argument 1 (bf16[6, 20] cpu)"));
    for (size_t i = 2; i < 7; ++i) REQUIRE(mismatches[i].op.rfind("matmul_bias_gelu", 0) == 0);
    REQUIRE(mismatches[7].op == "gelu_forward (operands at odd offsets)");
    REQUIRE(mismatches[8].op == "gelu_forward (operands at odd offsets, bf16 0,1)");
  }
}

TEST_CASE("bf16 results one rounding apart are within tolerance; the cast itself is compared bit for bit") {
  Backend truncating = cuda_stand_in();
  truncating.f32_to_bf16 = &truncating_f32_to_bf16;
  ScopedBackend registered(Device::kCuda, &truncating);
  const auto mismatches = compare_backend_ops(Device::kCuda, /*exact=*/false);
  INFO(listing(mismatches));
  REQUIRE(!mismatches.empty());
  REQUIRE(mismatches[0].op == "cast (f32 -> bf16)");
  // Besides the cast, only the GEMMs with more: on the CPU they round a bf16 result twice (after
  // the product, then after the bias or the GELU), so truncating is two roundings off there
  // (matmul_group's products with biases are such GEMMs).
  for (size_t i = 1; i < mismatches.size(); ++i) {
    const std::string& op = mismatches[i].op;
    REQUIRE((op.rfind("matmul_bias (", 0) == 0 || op.rfind("matmul_bias_gelu (", 0) == 0 ||
             op.rfind("matmul_gelu_backward (", 0) == 0 || op.rfind("matmul_group (q, k, v with biases", 0) == 0));
  }
  REQUIRE(compare_backend_ops(Device::kCuda, /*exact=*/true).size() > 10);  // every op that writes bf16
}

TEST_CASE("the harness reports an error thrown on one side only") {
  Backend broken = cuda_stand_in();
  broken.check_indices = &refusing_check_indices;
  ScopedBackend registered(Device::kCuda, &broken);
  const auto mismatches = compare_backend_ops(Device::kCuda, false);
  INFO(listing(mismatches));
  REQUIRE(reports(mismatches, "embedding_forward"));
  REQUIRE(reports(mismatches, "cross_entropy_shard_backward"));
  REQUIRE_FALSE(reports(mismatches, "embedding_forward (id out of range)"));  // the CPU throws there too
  for (const OpMismatch& m : mismatches) REQUIRE_THAT(m.detail, Catch::Contains("throws on one side only"));
}

TEST_CASE("dispatch errors name the op and the devices") {
  REQUIRE_THROWS_WITH(DeviceContext(Device::kCuda),
                      Catch::Contains("DeviceContext") && Catch::Contains("no cuda backend"));
  const Backend stand_in = cuda_stand_in();
  Tensor on_cuda, other_cuda;
  {
    ScopedBackend registered(Device::kCuda, &stand_in);
    DeviceContext cuda(Device::kCuda);
    on_cuda = cuda.zeros({4});
    other_cuda = cuda.zeros({4});
    Tensor host = Tensor::zeros({4});
    REQUIRE_THROWS_WITH(ops::add(host, on_cuda, host),
                        Catch::Contains("add: tensors on two devices") && Catch::Contains("f32[4] cpu") &&
                            Catch::Contains("f32[4] cuda"));
    // copy is the one op that crosses devices: host <-> device through the device's copies.
    host.f32()[2] = 5.0f;
    ops::copy(host, on_cuda);
    Tensor back = Tensor::zeros({4});
    ops::copy(on_cuda, back);
    REQUIRE(back.f32()[2] == 5.0f);
    ops::gelu_forward(on_cuda, other_cuda);  // dispatches to the registered table
  }
  REQUIRE_THROWS_WITH(ops::gelu_forward(on_cuda, other_cuda), Catch::Contains("gelu_forward: no cuda backend"));
  ops::AdamWParams p{.lr = 1, .beta1 = 0.9f, .beta2 = 0.9f, .eps = 1, .weight_decay = 0, .step = 1, .grad_scale = 1};
  REQUIRE_THROWS_WITH(ops::adamw_update(on_cuda, on_cuda, other_cuda, other_cuda, p),
                      Catch::Contains("adamw_update: no cuda backend"));
  REQUIRE_THROWS_WITH(ops::fill_normal(on_cuda, {4}, {0}, 1, 2, 1.0f), Catch::Contains("fill_normal: no cuda backend"));
}
