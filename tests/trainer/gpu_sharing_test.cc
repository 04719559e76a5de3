// Which ranks share a GPU (trainer/gpu_sharing.h): from the GPUs' UUIDs that every rank reports, so a
// job whose ranks each see one GPU as device 0 (bound per rank) shares none, and ranks that see the
// same GPU do, whatever its number in CUDA_VISIBLE_DEVICES.
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/backend.h"
#include "parallel/host_channel.h"
#include "trainer/gpu_sharing.h"

namespace lattice {
namespace {

using Uuid = std::array<uint8_t, 16>;

Uuid gpu(uint8_t n) {
  Uuid u{};
  u.fill(0xab);
  u[15] = n;
  return u;
}

// One rank of a job whose other ranks' values are given: an all-gather returns them around this
// rank's own.
class JobChannel : public HostChannel {
 public:
  JobChannel(int rank, std::vector<Uuid> others) : rank_(rank), others_(std::move(others)) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(others_.size()) + 1; }

 protected:
  void all_gather_bytes(const void* in, size_t bytes, void* out, std::string_view) override {
    REQUIRE(bytes == sizeof(Uuid));
    auto* blocks = static_cast<uint8_t*>(out);
    for (int r = 0, other = 0; r < size(); ++r) {
      std::memcpy(blocks + r * bytes, r == rank_ ? in : others_[static_cast<size_t>(other++)].data(), bytes);
    }
  }
  void broadcast_bytes(void*, size_t, int, std::string_view) override { FAIL("not a broadcast"); }
  void gather_bytes(const void*, size_t, const std::vector<size_t>&, void*, int, std::string_view) override {
    FAIL("not a gather");
  }

 private:
  int rank_;
  std::vector<Uuid> others_;
};

Uuid g_mine;
Backend backend_on(Uuid mine) {
  g_mine = mine;
  Backend b{};
  b.device_uuid = [] { return g_mine; };
  return b;
}

TEST_CASE("ranks share a GPU exactly when they report its UUID") {
  SECTION("each rank bound to its own GPU: none shared") {
    JobChannel job(1, {gpu(0), gpu(2), gpu(3)});
    const GpuSharing s = gpu_sharing(backend_on(gpu(1)), job);
    CHECK(s.mine == 1);
    CHECK(s.most == 1);
  }
  SECTION("this rank's GPU shared by three, another GPU by one") {
    JobChannel job(2, {gpu(5), gpu(7), gpu(5)});
    const GpuSharing s = gpu_sharing(backend_on(gpu(5)), job);
    CHECK(s.mine == 3);
    CHECK(s.most == 3);
  }
  SECTION("this rank alone on its GPU while two others share one: the job's most is 2") {
    JobChannel job(0, {gpu(4), gpu(4), gpu(6)});
    const GpuSharing s = gpu_sharing(backend_on(gpu(1)), job);
    CHECK(s.mine == 1);
    CHECK(s.most == 2);
  }
}

}  // namespace
}  // namespace lattice
