// The checkpoint benchmark's directory: it runs in a new or empty directory and leaves it as it found
// it; a directory that holds anything (someone's checkpoints) is refused with nothing deleted.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "checkpoint/checkpoint_bench.h"
#include "kernels/error.h"
#include "tests/checkpoint/python_helper.h"
#include "tests/tiny_models.h"

using namespace lattice;
using namespace lattice::testing;
namespace fs = std::filesystem;

TEST_CASE("bench_checkpoint creates a new directory and removes it with what it wrote") {
  const fs::path dir = fs::path(test_tmpdir()) / "bench_new" / "ckpt";
  fs::remove_all(dir.parent_path());
  const CheckpointBenchResult r = bench_checkpoint(tiny_gpt2(), dir.string(), 2, 0.001);
  CHECK(r.bytes > 0);
  CHECK(r.load_s > 0);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("bench_checkpoint runs in an empty directory and leaves it empty") {
  const fs::path dir = fs::path(test_tmpdir()) / "bench_empty";
  fs::remove_all(dir);
  fs::create_directories(dir);
  bench_checkpoint(tiny_gpt2(), dir.string(), 2, 0.001);
  CHECK(fs::is_directory(dir));
  CHECK(fs::is_empty(dir));
}

TEST_CASE("bench_checkpoint refuses a directory that holds anything and deletes nothing") {
  const fs::path dir = fs::path(test_tmpdir()) / "bench_user_checkpoints";
  fs::remove_all(dir);
  fs::create_directories(dir / "iter_0000100");
  std::ofstream(dir / "latest") << "iter_0000100\n";
  std::ofstream(dir / "iter_0000100" / "metadata.json") << "{}";
  try {
    bench_checkpoint(tiny_gpt2(), dir.string(), 2, 0.001);
    FAIL("a non-empty directory was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains(dir.string()) && Catch::Contains("not an empty directory"));
  }
  CHECK(fs::exists(dir / "latest"));
  CHECK(fs::exists(dir / "iter_0000100" / "metadata.json"));
  // A file is no directory to benchmark in either.
  CHECK_THROWS_AS(bench_checkpoint(tiny_gpt2(), (dir / "latest").string(), 2, 0.001), InputError);
  CHECK(fs::is_regular_file(dir / "latest"));
}
