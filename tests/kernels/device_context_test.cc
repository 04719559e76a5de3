// DeviceContext: tensors allocated on its device, zeros, and the checked host <-> device copies.
#include <catch2/catch.hpp>

#include "kernels/device_context.h"
#include "kernels/error.h"
#include "tests/kernels/backend_harness.h"

using namespace lattice;

TEST_CASE("a CPU context allocates host tensors and copies with memcpy") {
  const DeviceContext ctx;
  REQUIRE(ctx.device() == Device::kCpu);
  REQUIRE(ctx.stream().device() == Device::kCpu);
  Tensor z = ctx.zeros({3, 5}, DType::kBF16);
  REQUIRE(z.device() == Device::kCpu);
  REQUIRE(z.bytes() == 30);
  for (int64_t i = 0; i < z.numel(); ++i) REQUIRE(z.bf16()[i] == 0);
  Tensor e = ctx.empty({0});
  REQUIRE(e.numel() == 0);
  REQUIRE_THROWS_WITH(ctx.empty({2, -1}), Catch::Contains("negative dimension"));

  Tensor host = Tensor::empty({4}, DType::kI32);
  for (int i = 0; i < 4; ++i) host.i32()[i] = 10 * i - 7;
  Tensor dev = ctx.to_device(host);
  REQUIRE(dev.raw() != host.raw());
  host.i32()[0] = 99;  // a copy, not a view
  Tensor back = ctx.to_host(dev);
  REQUIRE(back.i32()[0] == -7);
  REQUIRE(back.i32()[3] == 23);
}

TEST_CASE("copies check dtype, size and device") {
  const Backend stand_in = test::cuda_stand_in();
  test::ScopedBackend registered(Device::kCuda, &stand_in);
  const DeviceContext cuda(Device::kCuda);
  REQUIRE(cuda.stream().device() == Device::kCuda);
  Tensor dev = cuda.zeros({4});
  REQUIRE(dev.device() == Device::kCuda);
  REQUIRE(dev.describe() == "f32[4] cuda");
  Tensor host = Tensor::zeros({4});
  host.f32()[2] = 1.5f;
  cuda.copy_from_host(host, dev);
  REQUIRE(cuda.to_host(dev).f32()[2] == 1.5f);

  Tensor wrong_size = Tensor::zeros({5});
  Tensor wrong_dtype = Tensor::zeros({4}, DType::kI32);
  REQUIRE_THROWS_WITH(cuda.copy_from_host(wrong_size, dev), Catch::Contains("copy_from_host") &&
                                                                 Catch::Contains("differ in dtype or element count"));
  REQUIRE_THROWS_WITH(cuda.copy_to_host(dev, wrong_dtype), Catch::Contains("copy_to_host"));
  REQUIRE_THROWS_WITH(cuda.copy_to_host(host, wrong_size), Catch::Contains("is not on this context's device"));
  REQUIRE_THROWS_WITH(cuda.copy_from_host(dev, dev), Catch::Contains("is not a host tensor"));
}

TEST_CASE("Tensor::empty makes host tensors only") {
  REQUIRE(Tensor::empty({2}).device() == Device::kCpu);
  REQUIRE(dtype_size(DType::kBF16) == 2);
  REQUIRE(Tensor::empty({3}, DType::kBF16).describe() == "bf16[3] cpu");
  REQUIRE_THROWS_WITH(Tensor::empty({3}, DType::kBF16).f32(), Catch::Contains("expected f32, got bf16[3] cpu"));
}
