// Sharded checkpoints under mpirun -np 4 (2 tp × 2 dp): the parallel save (every rank writes a
// shard, replicas never, every box once), the commit, loading into other layouts (one process,
// TP4, the same), the asynchronous path while the store keeps changing, a write that fails on
// one rank failing the commit on every rank without touching `latest`, and a stale .partial of the
// step being saved removed by rank 0 before any rank writes.
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <catch2/catch.hpp>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "kernels/error.h"
#include "model/model_parameters.h"
#include "parallel/grid.h"
#include "tests/checkpoint/sharded_test_util.h"
#include "tests/parallel/mpi_test_main.h"
#include "tests/tiny_models.h"

using namespace lattice;
using namespace lattice::testing;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

ModelConfig model() {
  ModelConfig c = tiny_gpt2();
  c.vocab_size = 300;  // both tp ranks hold real vocabulary rows, and padding
  return c;
}

std::string ckpt_dir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t != nullptr ? t : "/tmp") + "/" + name;
}

struct Setup {
  RankGrid grid;
  ProcessGroups groups;
  Setup() : grid(world().size(), world().rank(), /*tp=*/2, /*pp=*/1, /*dp=*/2) {
    groups = make_process_groups(grid, world());
  }
};

CheckpointState state_at(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.consumed_samples = 16 * step;
  s.optimizer_step_count = step;
  s.lr_schedule_step = step;
  s.seed = 77;
  return s;
}

CheckpointLayout layout() { return {4, 2, 1, 2, 1, false}; }

void fresh(const std::string& dir) {
  if (world().rank() == 0) fs::remove_all(dir);
  world().barrier();
}

// Loads `dir` into the specs and checks values and moments against `salt`.
int64_t load_and_count(const std::string& dir, std::vector<ParamSpec> specs, int salt) {
  Run back = make_run(std::move(specs), 999);
  load_checkpoint(resolve_checkpoint(dir), model_json(model()), back.targets());
  return back.mismatches(salt);
}

}  // namespace

TEST_CASE("TP2 x DP2: parallel save and commit, loaded into one process, TP4 and the same layout") {
  Setup s;
  const std::string dir = ckpt_dir("tp2dp2");
  fresh(dir);
  Run run = make_run(tp_shard_specs(model(), s.grid.tp_rank(), 2), 1);
  {
    CheckpointWriter writer({dir, /*async=*/false, 0, 1}, {&world(), s.groups.dp.get()}, model_json(model()), layout());
    writer.save(*run.store, run.sources(), state_at(3));
    CHECK(!writer.pending());
    CHECK(writer.last_committed_step() == 3);
    // Every rank wrote its share (dp replicas split the boxes).
    CHECK(writer.last_timings().bytes > 0);
  }
  const CheckpointMetadata meta = read_checkpoint_metadata(resolve_checkpoint(dir));
  CHECK(meta.files.size() == 4);
  CHECK(meta.layout.tensor == 2);
  CHECK(meta.layout.data == 2);
  CHECK(meta.state.consumed_samples == 48);
  // The vocabulary-parallel embedding: one box per tp rank, padding not stored.
  const StoredTensor& emb = meta.tensors.at("model/embedding.word_embeddings.weight");
  CHECK(emb.global_shape == Shape{300, 16});
  CHECK(emb.boxes.size() == 2);
  // A tp-duplicated norm: stored once.
  CHECK(meta.tensors.at("model/final_norm.weight").boxes.size() == 1);

  CHECK(load_and_count(dir, model_parameter_specs(model()), 1) == 0);
  CHECK(load_and_count(dir, tp_shard_specs(model(), world().rank(), 4), 1) == 0);
  CHECK(load_and_count(dir, tp_shard_specs(model(), s.grid.tp_rank(), 2), 1) == 0);
}

TEST_CASE("asynchronous save: the checkpoint holds the snapshot while training goes on") {
  Setup s;
  const std::string dir = ckpt_dir("async");
  fresh(dir);
  Run run = make_run(tp_shard_specs(model(), s.grid.tp_rank(), 2), 5);
  CheckpointWriter writer({dir, /*async=*/true, /*keep_last=*/1, 1}, {&world(), s.groups.dp.get()},
                          model_json(model()), layout());
  writer.save(*run.store, run.sources(), state_at(7));
  // "Training": the store and moments change every step; try_commit at every step boundary.
  int steps = 0;
  bool committed = false;
  for (; steps < 20000 && !committed; ++steps) {
    run.fill(6 + steps % 2);
    committed = writer.try_commit();
    if (!committed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(committed);
  CHECK(writer.last_committed_step() == 7);
  CHECK(load_and_count(dir, model_parameter_specs(model()), 5) == 0);

  // A second save (from the changed store) replaces it; keep_last = 1 removes step 7.
  run.fill(8);
  writer.save(*run.store, run.sources(), state_at(8));
  writer.finish();
  CHECK(read_latest(dir) == "iter_0000008");
  CHECK(committed_steps(dir) == std::vector<int64_t>{8});
  CHECK(load_and_count(dir, tp_shard_specs(model(), world().rank(), 4), 8) == 0);
}

TEST_CASE("a write failing on one rank fails the commit everywhere; latest stays") {
  Setup s;
  const std::string dir = ckpt_dir("failure");
  fresh(dir);
  Run run = make_run(tp_shard_specs(model(), s.grid.tp_rank(), 2), 1);
  CheckpointWriter writer({dir, /*async=*/true, 0, 1}, {&world(), s.groups.dp.get()}, model_json(model()), layout());
  writer.save(*run.store, run.sources(), state_at(1));
  writer.finish();

  // Rank 2's disk is full: its files cannot grow past 16 bytes (RLIMIT_FSIZE; the write fails
  // with EFBIG rather than raising SIGXFSZ). Obstacles inside iter_0000002.partial would not do:
  // rank 0 removes a stale .partial before the save writes.
  rlimit unlimited{};
  if (world().rank() == 2) {
    std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &unlimited);
    rlimit full = unlimited;
    full.rlim_cur = 16;
    setrlimit(RLIMIT_FSIZE, &full);
  }
  std::string message;
  try {
    writer.save(*run.store, run.sources(), state_at(2));
    writer.finish();
  } catch (const Error& e) {
    message = e.what();
  }
  if (world().rank() == 2) setrlimit(RLIMIT_FSIZE, &unlimited);
  CHECK(!message.empty());
  if (world().rank() == 2) {
    CHECK_THAT(message, Catch::Contains("rank_00002.safetensors"));
  } else {
    CHECK_THAT(message, Catch::Contains("failed on another rank"));
  }
  CHECK(!writer.pending());
  CHECK(read_latest(dir) == "iter_0000001");
  CHECK(committed_steps(dir) == std::vector<int64_t>{1});

  CHECK(fs::exists(fs::path(dir) / "iter_0000002.partial"));

  // The next save succeeds and clears the leftover.
  writer.save(*run.store, run.sources(), state_at(3));
  writer.finish();
  CHECK(read_latest(dir) == "iter_0000003");
  CHECK(!fs::exists(fs::path(dir) / "iter_0000002.partial"));
}

TEST_CASE("a stale .partial of the step is removed by rank 0 before any rank writes into it") {
  Setup s;
  const std::string dir = ckpt_dir("stale_partial");
  fresh(dir);
  // A save of step 4 that never committed left every rank's file, and a directory where each
  // rank's temporary file goes: a rank writing before rank 0 removed it all would fail, or lose
  // its new file with it.
  const fs::path partial = fs::path(dir) / "iter_0000004.partial";
  if (world().rank() == 0) {
    for (int r = 0; r < world().size(); ++r) {
      fs::create_directories(partial / (shard_file_name(r) + ".tmp"));
      std::ofstream(partial / shard_file_name(r)) << "a shard of the failed save";
    }
  }
  world().barrier();
  Run run = make_run(tp_shard_specs(model(), s.grid.tp_rank(), 2), 3);
  CheckpointWriter writer({dir, /*async=*/true, 0, 1}, {&world(), s.groups.dp.get()}, model_json(model()), layout());
  writer.save(*run.store, run.sources(), state_at(4));
  writer.finish();
  CHECK(read_latest(dir) == "iter_0000004");
  CHECK(!fs::exists(partial));
  CHECK(load_and_count(dir, model_parameter_specs(model()), 3) == 0);
}
