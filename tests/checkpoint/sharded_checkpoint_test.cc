// Sharded checkpoints in one process: round trips of values, moments and state (sync and async),
// resharding between TP2 boxes and one process both ways, consolidation, every corruption class and
// its message (with the store untouched), keep_last / `latest` semantics, and .partial leftovers.
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/crc32.h"
#include "checkpoint/safetensors.h"
#include "kernels/device_context.h"
#include "kernels/error.h"
#include "model/model_parameters.h"
#include "tests/checkpoint/python_helper.h"
#include "tests/checkpoint/sharded_test_util.h"
#include "tests/kernels/backend_harness.h"
#include "tests/tiny_models.h"

using namespace lattice;
using namespace lattice::testing;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = test_tmpdir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

// A vocabulary larger than one 128-row TP block, so TP2 has real rows on both ranks and padding.
ModelConfig model() {
  ModelConfig c = tiny_gpt2();
  c.vocab_size = 300;
  return c;
}

CheckpointState state_at(int64_t step) {
  CheckpointState s;
  s.step = step;
  s.consumed_samples = step * 8;
  s.optimizer_step_count = step;
  s.lr_schedule_step = step;
  s.seed = 1234;
  return s;
}

void save_one_process(const std::string& dir, const Run& run, int64_t step, bool async = false, int64_t keep_last = 0,
                      bool moments = true) {
  CheckpointWriter writer({dir, async, keep_last, 1}, {}, model_json(model()), CheckpointLayout{});
  writer.save(*run.store, run.sources(moments), state_at(step));
  writer.finish();
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Builds a checkpoint as a TP2 job would: one shard file per tp rank, replicas skipped, boxes in
// metadata.json (the reader's side of resharding, without MPI).
void write_tp2_by_hand(const std::string& dir, int64_t step, int salt) {
  const std::string iter = (fs::path(dir) / iter_dir_name(step)).string();
  make_directories(iter);
  CheckpointMetadata m;
  m.config = model_json(model());
  m.layout.world_size = m.layout.tensor = 2;
  m.state = state_at(step);
  m.optimizer_state = false;
  for (int r = 0; r < 2; ++r) {
    Run run = make_run(tp_shard_specs(model(), r, 2), salt);
    std::map<std::string, Tensor> tensors;
    const std::string file = shard_file_name(r);
    const ShardPlan plan = plan_shard(*run.store, false, 0, 1);
    for (const ShardItem& item : plan.items) {
      const ParamSpec& s = run.store->spec(item.param);
      const std::string key = tensor_key(kModelKind, s.name);
      tensors[key] = run.store->flat_values().slice_flat(item.flat_offset, s.box);
      auto& t = m.tensors[key];
      t.global_shape = s.global_shape;
      t.boxes.push_back({Box{s.offset, s.box}, file, key});
    }
    write_safetensors((fs::path(iter) / file).string(), tensors);
    const FileChecksum sum = file_checksum((fs::path(iter) / file).string());
    m.files[file] = {sum.bytes, sum.crc32, r};
  }
  write_file_atomically((fs::path(iter) / kMetadataFile).string(), metadata_to_json(m).dump(1));
  write_latest(dir, iter_dir_name(step));
}

}  // namespace

TEST_CASE("round trip: values, moments and state, bitwise") {
  const std::string dir = fresh_dir("roundtrip");
  Run run = make_run(model_parameter_specs(model()), 1);
  save_one_process(dir, run, 5);

  REQUIRE(read_latest(dir) == "iter_0000005");
  REQUIRE(committed_steps(dir) == std::vector<int64_t>{5});
  const std::string path = resolve_checkpoint(dir);
  const CheckpointMetadata meta = read_checkpoint_metadata(path);
  CHECK(meta.state.consumed_samples == 40);
  CHECK(meta.optimizer_state);
  CHECK(meta.files.size() == 1);
  CHECK(meta.tensors.size() == 3 * run.store->count());
  CHECK(meta.tensors.at("model/embedding.word_embeddings.weight").global_shape == Shape{300, 16});

  Run back = make_run(model_parameter_specs(model()), 9);  // different values, overwritten by the load
  const CheckpointMetadata loaded =
      load_checkpoint(path, model_json(model()), back.targets());
  CHECK(loaded.state.step == 5);
  CHECK(loaded.state.optimizer_step_count == 5);
  CHECK(loaded.state.lr_schedule_step == 5);
  CHECK(loaded.state.seed == 1234);
  CHECK(count_mismatches(*back.store, back.store->flat_values(), 1) == 0);
  CHECK(count_mismatches(*back.store, back.exp_avg, 101) == 0);
  CHECK(count_mismatches(*back.store, back.exp_avg_sq, 201) == 0);
}

TEST_CASE("async save holds the snapshot while the store keeps changing") {
  const std::string dir = fresh_dir("async");
  Run run = make_run(model_parameter_specs(model()), 1);
  CheckpointWriter writer({dir, /*async=*/true, 0, 1}, {}, model_json(model()), CheckpointLayout{});
  writer.save(*run.store, run.sources(), state_at(3));
  // The training loop goes on: parameters and moments change before the write is done.
  fill_by_global(*run.store, run.store->flat_values(), 2);
  fill_by_global(*run.store, run.exp_avg, 102);
  int polls = 0;
  while (!writer.try_commit()) ++polls;
  CHECK(!writer.pending());
  CHECK(writer.last_committed_step() == 3);
  CHECK(writer.last_timings().bytes > 0);

  Run back = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(dir), model_json(model()), back.targets());
  CHECK(count_mismatches(*back.store, back.store->flat_values(), 1) == 0);
  CHECK(count_mismatches(*back.store, back.exp_avg, 101) == 0);

  // A second save waits for nothing and commits through finish().
  writer.save(*run.store, run.sources(), state_at(4));
  writer.finish();
  CHECK(read_latest(dir) == "iter_0000004");
}

TEST_CASE("overlapped snapshot: copied in the background, fenced by wait_snapshot()") {
  const std::string dir = fresh_dir("overlap");
  Run run = make_run(model_parameter_specs(model()), 1);
  CheckpointWriterOptions options{dir, /*async=*/true, 0, 1};
  options.overlap_snapshot = true;
  CheckpointWriter writer(options, {}, model_json(model()), CheckpointLayout{});
  for (int64_t step = 1; step <= 3; ++step) {
    writer.save(*run.store, run.sources(), state_at(step));
    writer.wait_snapshot();  // before the optimizer step
    run.fill(static_cast<int>(step) + 1);
    while (!writer.try_commit()) {
    }
    Run back = make_run(model_parameter_specs(model()), 9);
    load_checkpoint(resolve_checkpoint(dir), json(), back.targets());
    CHECK(back.mismatches(static_cast<int>(step)) == 0);
  }
  writer.finish();
}

namespace {

// A device posing on the host (test::cuda_stand_in) whose snapshot copies are DMAs on a copy stream:
// each copies at once but its event completes only when waited for. Waits are counted per thread,
// so that the training thread's can be told from the writer thread's.
struct FakeCopyStream {
  static inline int pinned_allocations = 0, copies = 0, compute_waits = 0, next_event = 0;
  static inline std::atomic<int> training_thread_waits{0}, writer_thread_waits{0};
  static inline std::thread::id training_thread;
  static inline std::set<int> completed;
  static inline std::mutex mutex;

  static std::shared_ptr<Storage> allocate_pinned(size_t bytes) {
    ++pinned_allocations;
    return Storage::host(bytes);
  }
  static std::shared_ptr<void> copy(const void* src, void* dst, int64_t bytes) {
    ++copies;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return std::make_shared<int>(++next_event);
  }
  static bool query(void* e) {
    std::lock_guard<std::mutex> lock(mutex);
    return completed.count(*static_cast<int*>(e)) > 0;
  }
  // While held, the writer thread's wait for the copies blocks: the snapshot is then still in
  // flight when the training thread fences it, as on a GPU where the DMAs take a while. Without
  // it, a writer thread that finished first would leave the fence nothing to order.
  static inline bool hold_writer = false;
  static inline std::condition_variable released;
  static void synchronize(void* e) {
    const bool training = std::this_thread::get_id() == training_thread;
    ++(training ? training_thread_waits : writer_thread_waits);
    std::unique_lock<std::mutex> lock(mutex);
    if (!training) released.wait(lock, [] { return !hold_writer; });
    for (int i = 1; i <= *static_cast<int*>(e); ++i) completed.insert(i);  // one stream: in order
  }
  static void release_writer() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      hold_writer = false;
    }
    released.notify_all();
  }
  static void compute_wait(void*) { ++compute_waits; }

  static Backend device() {
    Backend b = test::cuda_stand_in();
    b.allocate_pinned = &allocate_pinned;
    b.copy_to_pinned_async = &copy;
    b.event_query = &query;
    b.event_synchronize = &synchronize;
    b.compute_wait = &compute_wait;
    return b;
  }
};

}  // namespace

TEST_CASE("a device's snapshot: pinned buffer, copy-stream DMAs, and the training thread never waits") {
  const Backend device = FakeCopyStream::device();
  test::ScopedBackend registered(Device::kCuda, &device);
  const DeviceContext gpu(Device::kCuda);
  FakeCopyStream::training_thread = std::this_thread::get_id();
  for (const bool overlap : {true, false}) {
    INFO((overlap ? "overlapped snapshot" : "snapshot in save()"));
    const std::string dir = fresh_dir(overlap ? "device_overlap" : "device_blocking");
    Run run = make_run(model_parameter_specs(model()), 3);
    Tensor values = gpu.to_device(run.store->flat_values()), exp_avg = gpu.to_device(run.exp_avg),
           exp_avg_sq = gpu.to_device(run.exp_avg_sq);
    CheckpointWriterOptions options{dir, /*async=*/true, 0, 1};
    options.overlap_snapshot = overlap;
    options.device = Device::kCuda;
    FakeCopyStream::pinned_allocations = FakeCopyStream::copies = FakeCopyStream::compute_waits = 0;
    FakeCopyStream::training_thread_waits = 0;
    FakeCopyStream::hold_writer = overlap;
    CheckpointWriter writer(options, {}, model_json(model()), CheckpointLayout{});
    writer.save(*run.store, {&values, &exp_avg, &exp_avg_sq}, state_at(5));
    writer.wait_snapshot();  // before the optimizer step
    CHECK(FakeCopyStream::pinned_allocations == 1);
    CHECK(FakeCopyStream::copies >= 3);  // at least one per saved tensor
    // Overlapped: the compute stream waits for the copies on the device, the host goes on. Otherwise
    // save() waited for them itself, once.
    CHECK(FakeCopyStream::training_thread_waits == (overlap ? 0 : 1));
    CHECK(FakeCopyStream::compute_waits == (overlap ? 1 : 0));
    FakeCopyStream::release_writer();
    writer.wait_snapshot();  // a second fence adds nothing
    CHECK(FakeCopyStream::compute_waits == (overlap ? 1 : 0));
    writer.finish();
    Run back = make_run(model_parameter_specs(model()), 9);
    load_checkpoint(resolve_checkpoint(dir), json(), back.targets());
    CHECK(back.mismatches(3) == 0);
  }
  CHECK(FakeCopyStream::writer_thread_waits >= 1);  // the writer waited for the copies before writing
}

TEST_CASE("TP2 checkpoint loads into one process, and one process into TP2") {
  const std::string dir = fresh_dir("tp2");
  write_tp2_by_hand(dir, 7, 3);
  Run whole = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(dir), model_json(model()), whole.targets(false));
  CHECK(count_mismatches(*whole.store, whole.store->flat_values(), 3) == 0);

  auto consolidated = consolidate_checkpoint(resolve_checkpoint(dir), model());
  CHECK(count_mismatches(*consolidated, consolidated->flat_values(), 3) == 0);

  const std::string dir1 = fresh_dir("one_to_tp2");
  save_one_process(dir1, make_run(model_parameter_specs(model()), 4), 2);
  for (int r = 0; r < 2; ++r) {
    Run part = make_run(tp_shard_specs(model(), r, 2), 9);
    // Dirty the padding rows: the load must leave them zero.
    part.store->flat_values().f32()[part.store->numel() - 1] = 42.0f;
    load_checkpoint(resolve_checkpoint(dir1), model_json(model()), part.targets());
    CHECK(count_mismatches(*part.store, part.store->flat_values(), 4) == 0);  // padding included: zero
    CHECK(count_mismatches(*part.store, part.exp_avg_sq, 204) == 0);
  }
}

// The distributed optimizer's fp32 main parameters are the flat parameters themselves: the values of
// each range land at its values_offset (here its flat offset, in a target of the whole layout), the
// moments packed at target_offset. On the host the load writes them in place; on a device (the CUDA
// stand-in) through a packed host tensor, then range by range. Either way the values outside the
// ranges end up zero, and the moments are those of the packed load.
TEST_CASE("a load of flat ranges places the values apart from the moments where the ranges say") {
  const std::string one = fresh_dir("values_apart");
  save_one_process(one, make_run(model_parameter_specs(model()), 4), 2);
  Run whole = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(one), json(), whole.targets(true));
  const int64_t n = whole.store->numel();
  // A dp rank's blocks: two ranges out of flat order, the first at target 0 (as rank 0's first block is).
  const std::vector<LoadRange> ranges = {{n / 2, n / 4, 0, n / 2}, {3, n / 5, n / 4, 3}};
  const int64_t target_numel = n / 4 + n / 5;
  const Backend device = test::cuda_stand_in();
  test::ScopedBackend registered(Device::kCuda, &device);
  for (const Device where : {Device::kCpu, Device::kCuda}) {
    CAPTURE(device_name(where));
    const DeviceContext ctx(where);
    Tensor values = ctx.zeros({n}), m = ctx.zeros({target_numel}), v = ctx.zeros({target_numel});
    ops::fill(values, 42.0f);
    LoadTargets targets{whole.store.get(), &values, &m, &v, ranges, target_numel};
    load_checkpoint(resolve_checkpoint(one), json(), targets);
    const Tensor got = ctx.to_host(values), got_m = ctx.to_host(m);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool in_range = false;
      for (const LoadRange& r : ranges) in_range = in_range || (i >= r.flat_offset && i < r.flat_offset + r.numel);
      const float expect = in_range ? whole.store->flat_values().f32()[i] : 0.0f;
      bad += std::memcmp(&got.f32()[i], &expect, sizeof(float)) != 0;
    }
    for (const LoadRange& r : ranges)
      bad += std::memcmp(got_m.f32() + r.target_offset, whole.exp_avg.f32() + r.flat_offset, r.numel * sizeof(float)) != 0;
    CHECK(bad == 0);
  }
}

// A distributed-optimizer rank loads only its shard: ranges of the flat layout that cut parameters
// anywhere (mid-row, across parameters) land in a smaller target, out of order, with gaps. Each
// loaded element equals the whole load's at its flat index; the gaps are zero. From a TP2
// checkpoint into one process, and from one process into a TP2 rank, whose padding rows stay zero.
TEST_CASE("a load of flat ranges fills exactly them, from any layout") {
  const std::string tp2 = fresh_dir("ranges_tp2");
  write_tp2_by_hand(tp2, 7, 3);  // values only
  const std::string one = fresh_dir("ranges_one");
  save_one_process(one, make_run(model_parameter_specs(model()), 4), 2);
  struct Case {
    std::string dir;
    std::vector<ParamSpec> specs;
    bool moments;
  };
  for (const Case& c : {Case{tp2, model_parameter_specs(model()), false}, Case{one, tp_shard_specs(model(), 1, 2), true}}) {
    CAPTURE(c.dir);
    Run whole = make_run(c.specs, 9);
    load_checkpoint(resolve_checkpoint(c.dir), json(), whole.targets(c.moments));
    const int64_t n = whole.store->numel();
    const int64_t la = (n - 5) - (n / 2 + 3), lb = (n / 3 + 1) - 7;
    const std::vector<LoadRange> ranges = {{n / 2 + 3, la, 0}, {7, lb, la + 4}, {n / 3 + 2, 1, la + 4 + lb}};
    const int64_t target_numel = la + 4 + lb + 1 + 3;
    Tensor values = Tensor::zeros({target_numel}), m = Tensor::zeros({target_numel}), v = Tensor::zeros({target_numel});
    for (Tensor* t : {&values, &m, &v})
      for (int64_t i = 0; i < target_numel; ++i) t->f32()[i] = 42.0f;
    LoadTargets targets{whole.store.get(), &values, c.moments ? &m : nullptr, c.moments ? &v : nullptr, ranges,
                        target_numel};
    load_checkpoint(resolve_checkpoint(c.dir), json(), targets);
    std::vector<int64_t> source(target_numel, -1);  // the flat index each target element holds, -1: a gap
    for (const LoadRange& r : ranges)
      for (int64_t k = 0; k < r.numel; ++k) source[r.target_offset + k] = r.flat_offset + k;
    int64_t bad = 0, padding_zero = 0;
    for (auto [got, want] : {std::pair{&values, &whole.store->flat_values()}, {&m, &whole.exp_avg}, {&v, &whole.exp_avg_sq}}) {
      if (!c.moments && got != &values) break;
      for (int64_t i = 0; i < target_numel; ++i) {
        const float expect = source[i] < 0 ? 0.0f : want->f32()[source[i]];
        bad += std::memcmp(&got->f32()[i], &expect, sizeof(float)) != 0;
        padding_zero += source[i] >= 0 && expect == 0.0f;
      }
    }
    CHECK(bad == 0);
    if (c.moments) CHECK(padding_zero > 0);  // the TP2 rank's ranges include vocabulary padding
  }
  // Ranges past the layout are a programming error, not a damaged checkpoint.
  Run one_process = make_run(model_parameter_specs(model()), 9);
  CHECK_THROWS_WITH(load_checkpoint(resolve_checkpoint(one), json(),
                                    LoadTargets{one_process.store.get(), &one_process.store->flat_values(), nullptr,
                                                nullptr, {{0, 4, 0, one_process.store->numel() - 2}}, 4}),
                    Catch::Contains("load_checkpoint: range"));
  Tensor t = Tensor::zeros({4});
  CHECK_THROWS_WITH(load_checkpoint(resolve_checkpoint(one), json(),
                                    LoadTargets{one_process.store.get(), &t, nullptr, nullptr,
                                                {{one_process.store->numel() - 2, 4, 0}}, 4}),
                    Catch::Contains("load_checkpoint: range"));
}

TEST_CASE("every corruption class is one InputError naming the file or field; nothing changes") {
  const std::string dir = fresh_dir("corrupt");
  save_one_process(dir, make_run(model_parameter_specs(model()), 1), 5);
  const std::string iter = resolve_checkpoint(dir);
  const std::string shard = (fs::path(iter) / shard_file_name(0)).string();
  const std::string meta_path = (fs::path(iter) / kMetadataFile).string();
  const std::string pristine_shard = test_tmpdir() + "/pristine.safetensors";
  const std::string pristine_meta = test_tmpdir() + "/pristine.json";
  fs::copy_file(shard, pristine_shard, fs::copy_options::overwrite_existing);
  fs::copy_file(meta_path, pristine_meta, fs::copy_options::overwrite_existing);
  auto restore = [&] {
    fs::copy_file(pristine_shard, shard, fs::copy_options::overwrite_existing);
    fs::copy_file(pristine_meta, meta_path, fs::copy_options::overwrite_existing);
  };
  Run target = make_run(model_parameter_specs(model()), 9);
  auto load = [&] { load_checkpoint(iter, model_json(model()), target.targets()); };
  auto untouched = [&] {
    CHECK(count_mismatches(*target.store, target.store->flat_values(), 9) == 0);
    CHECK(count_mismatches(*target.store, target.exp_avg, 109) == 0);
  };

  SECTION("truncated shard") {
    fs::resize_file(shard, fs::file_size(shard) - 100);
    const std::string msg = message_of(load);
    CHECK_THAT(msg, Catch::Contains(shard) && Catch::Contains("truncated"));
  }
  SECTION("flipped byte: checksum mismatch") {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(shard) - 7));
    f.put('\x7f');
    f.close();
    CHECK_THAT(message_of(load), Catch::Contains(shard) && Catch::Contains("fails its checksum"));
  }
  SECTION("missing shard") {
    fs::remove(shard);
    CHECK_THAT(message_of(load), Catch::Contains(shard) && Catch::Contains("is missing"));
  }
  // The sections below edit metadata.json on purpose: they drop its checksum, as such an edit must.
  SECTION("an edit that leaves valid JSON fails the metadata checksum") {
    json doc = json::parse(std::ifstream(meta_path));
    REQUIRE(doc.contains("metadata_crc32"));
    doc["optimizer_step_count"] = doc["optimizer_step_count"].get<int64_t>() - 1;  // wrong AdamW bias correction
    std::ofstream(meta_path) << doc.dump(1);
    CHECK_THAT(message_of(load), Catch::Contains(meta_path) && Catch::Contains("does not match its metadata_crc32"));
  }
  SECTION("missing tensor") {
    json doc = json::parse(std::ifstream(meta_path));
    doc.erase("metadata_crc32");
    doc["tensors"].erase("exp_avg/final_norm.bias");
    std::ofstream(meta_path) << doc.dump();
    CHECK_THAT(message_of(load), Catch::Contains("no tensor 'exp_avg/final_norm.bias'"));
  }
  SECTION("damaged metadata.json") {
    std::ofstream(meta_path) << "{\"format\": \"lattice-sharded-checkpoint\", ";
    CHECK_THAT(message_of(load), Catch::Contains(meta_path) && Catch::Contains("not valid JSON"));
  }
  SECTION("a count that no run writes: a negative optimizer_step_count") {
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(meta_path));
    doc.erase("metadata_crc32");
    doc["optimizer_step_count"] = -1;
    std::ofstream(meta_path) << doc.dump(1);
    CHECK_THAT(message_of(load), Catch::Contains(meta_path) && Catch::Contains("optimizer_step_count is negative"));
  }
  SECTION("model config differs: every field named") {
    ModelConfig other = model();
    other.hidden_size = 32;
    other.num_layers = 3;
    const std::string msg = message_of([&] {
      load_checkpoint(iter, model_json(other), target.targets(false));
    });
    CHECK_THAT(msg, Catch::Contains("model.hidden_size: checkpoint 16, config 32") &&
                        Catch::Contains("model.num_layers: checkpoint 2, config 3"));
    // init_from only matters for a fresh start.
    other = model();
    other.init_from = "some.safetensors";
    CHECK_NOTHROW(load_checkpoint(iter, model_json(other), target.targets(false)));
    target = make_run(model_parameter_specs(model()), 9);
  }
  SECTION("moments asked of a weights-only checkpoint") {
    const std::string wdir = fresh_dir("weights_only");
    save_one_process(wdir, make_run(model_parameter_specs(model()), 1), 1, false, 0, /*moments=*/false);
    CHECK_THAT(message_of([&] {
                 load_checkpoint(resolve_checkpoint(wdir), json(), target.targets());
               }),
               Catch::Contains("no optimizer state"));
  }
  SECTION("`latest` names a directory that is gone") {
    write_latest(dir, "iter_0000099");
    CHECK_THAT(message_of([&] { resolve_checkpoint(dir); }),
               Catch::Contains("iter_0000099") && Catch::Contains("does not exist"));
    CHECK_THAT(message_of([&] { find_latest_checkpoint(dir); }), Catch::Contains("iter_0000099"));
    write_latest(dir, "iter_0000005");
  }
  SECTION("`latest` is a directory") {
    fs::remove(fs::path(dir) / "latest");
    fs::create_directory(fs::path(dir) / "latest");
    CHECK_THAT(message_of([&] { find_latest_checkpoint(dir); }), Catch::Contains("latest' is a directory"));
    fs::remove(fs::path(dir) / "latest");
    write_latest(dir, "iter_0000005");
  }
  SECTION("not a checkpoint at all") {
    CHECK_THAT(message_of([&] { resolve_checkpoint(test_tmpdir() + "/nowhere"); }), Catch::Contains("does not exist"));
    CHECK(!find_latest_checkpoint(test_tmpdir() + "/nowhere").has_value());
  }
  untouched();
  // Nothing on disk was deleted or rewritten by the failed loads (the sections' own damage aside).
  CHECK(fs::exists(iter));
  restore();
  CHECK_NOTHROW(load());
}

// Box checksums, here per 64 bytes: each box's list in metadata.json holds the CRC-32 of each
// 64-byte chunk of its bytes in the file, the header's that of the bytes before them, and the
// file's (combined from them while writing) is still that of the whole file. A load verifies the
// header and only the chunks it reads: a range load beside a damaged chunk it does not need
// succeeds, having read only its part of the checkpoint; a load that needs the chunk names it;
// header damage fails every load. A checkpoint written before boxes carried checksums is verified
// file by file.
TEST_CASE("box checksums: a load verifies the chunks it reads; older checkpoints whole files") {
  const std::string dir = fresh_dir("box_crc");
  {
    CheckpointWriterOptions o{dir, false, 0, 1};
    o.box_crc32_chunk_bytes = 64;
    CheckpointWriter writer(o, {}, model_json(model()), CheckpointLayout{});
    const Run run = make_run(model_parameter_specs(model()), 1);
    writer.save(*run.store, run.sources(true), state_at(5));
    writer.finish();
  }
  const std::string iter = resolve_checkpoint(dir);
  const std::string shard = (fs::path(iter) / shard_file_name(0)).string();
  const std::string meta_path = (fs::path(iter) / kMetadataFile).string();
  const CheckpointMetadata m = read_checkpoint_metadata(iter);
  CHECK(m.box_crc32_chunk_bytes == 64);
  const StoredFile& stored = m.files.at(shard_file_name(0));
  CHECK(stored.crc32 == file_checksum(shard).crc32);
  REQUIRE(stored.header.has_value());
  CHECK(stored.header->crc32 == file_checksum(shard, stored.header->bytes).crc32);
  {
    SafetensorsFile f(shard);
    int64_t chunks = 0;
    for (const auto& [key, t] : m.tensors) {
      for (const StoredBox& b : t.boxes) {
        REQUIRE(b.crc32.has_value());
        const SafetensorsEntry& e = f.entry(b.key);
        const auto* bytes = static_cast<const Bytef*>(f.raw(b.key));
        REQUIRE(b.crc32->size() == (e.end - e.begin + 63) / 64);
        for (size_t c = 0; c < b.crc32->size(); ++c)
          CHECK((*b.crc32)[c] == static_cast<uint32_t>(::crc32(0, bytes + 64 * c, std::min<uint64_t>(64, e.end - e.begin - 64 * c))));
        chunks += static_cast<int64_t>(b.crc32->size());
      }
    }
    CHECK(chunks > 3 * 100);
  }
  // Damage byte 5 of chunk 3 (elements 48-63) of the word embeddings' exp_avg_sq.
  const std::string damaged_key = tensor_key(kExpAvgSqKind, "embedding.word_embeddings.weight");
  {
    SafetensorsFile f(shard);
    const uint64_t at = stored.header->bytes + f.entry(damaged_key).begin + 3 * 64 + 5;
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(at));
    const char c = static_cast<char>(file.get());
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(c ^ 0x5a));
  }
  Run part = make_run(model_parameter_specs(model()), 9);
  REQUIRE(part.store->spec(0).name == "embedding.word_embeddings.weight");
  const int64_t rest = part.store->offset(1), n = part.store->numel();
  // Elements 0-31 of the word embeddings (chunks 0 and 1) and every later parameter: loads.
  const int64_t k = 32 + (n - rest);
  Tensor values = Tensor::zeros({k}), ea = Tensor::zeros({k}), eas = Tensor::zeros({k});
  LoadReport report;
  LoadTargets targets{part.store.get(), &values, &ea, &eas, {{0, 32, 0}, {rest, n - rest, 32}}, k, &report};
  CHECK_NOTHROW(load_checkpoint(iter, model_json(model()), targets));
  CHECK(report.checkpoint_bytes == stored.bytes);
  CHECK(report.bytes_read == stored.header->bytes + static_cast<uint64_t>(3 * k * 4));  // the header, its chunks
  CHECK(std::memcmp(values.f32(), part.store->flat_values().f32(), 4) != 0);  // it loaded them
  // Element 50 lies in the damaged chunk: so does any load that reads it.
  Run target = make_run(model_parameter_specs(model()), 9);
  const std::string expected = "fails its checksum in tensor '" + damaged_key + "', bytes 192 to 256 of it";
  targets.ranges = {{50, 1, 0}};
  CHECK_THAT(message_of([&] { load_checkpoint(iter, model_json(model()), targets); }),
             Catch::Contains(shard) && Catch::Contains(expected));
  CHECK_THAT(message_of([&] { load_checkpoint(iter, model_json(model()), target.targets()); }),
             Catch::Contains(shard) && Catch::Contains(expected));
  CHECK(count_mismatches(*target.store, target.store->flat_values(), 9) == 0);  // untouched
  // Damage in the header (the safetensors JSON and its length): every load reads the header.
  targets.ranges = {{rest, n - rest, 0}};
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(stored.header->bytes - 1));  // the header's last byte: a space or '}'
    f.put('\t');
  }
  CHECK_THAT(message_of([&] { load_checkpoint(iter, model_json(model()), targets); }),
             Catch::Contains(shard) && Catch::Contains("fails its checksum in its header"));
  // Without header and box checksums (an older checkpoint), the file's checksum finds the damage
  // even for the range load, which then reads the whole file.
  json doc = json::parse(std::ifstream(meta_path));
  doc.erase("metadata_crc32");
  doc.erase("box_crc32_chunk_bytes");
  for (auto& [key, t] : doc["tensors"].items())
    for (json& b : t["boxes"]) b.erase("crc32");
  for (auto& [name, f] : doc["files"].items()) {
    f.erase("header_bytes");
    f.erase("header_crc32");
  }
  std::ofstream(meta_path) << doc.dump(1);
  CHECK_THAT(message_of([&] { load_checkpoint(iter, model_json(model()), targets); }),
             Catch::Contains(shard) && Catch::Contains("fails its checksum (CRC-32"));
}

TEST_CASE("keep_last deletes older checkpoints only after a commit, never what `latest` names") {
  const std::string dir = fresh_dir("retention");
  Run run = make_run(model_parameter_specs(model()), 1);
  {
    CheckpointWriter writer({dir, true, /*keep_last=*/2, 1}, {}, model_json(model()), CheckpointLayout{});
    for (int64_t step = 1; step <= 4; ++step) {
      writer.save(*run.store, run.sources(), state_at(step));
      // While step 4 is still being written, 2 and 3 both exist (1 went when 3 committed).
      if (step == 4) CHECK(committed_steps(dir) == std::vector<int64_t>{2, 3});
    }
    writer.finish();
  }
  CHECK(committed_steps(dir) == std::vector<int64_t>{3, 4});
  CHECK(read_latest(dir) == "iter_0000004");
  CHECK(!fs::exists(fs::path(dir) / "iter_0000002.deleting"));  // finish() waits for the deletion

  // A retired directory that a killed job did not finish deleting is never loaded.
  fs::create_directories(fs::path(dir) / "iter_0000001.deleting");
  CHECK_THAT(message_of([&] { resolve_checkpoint((fs::path(dir) / "iter_0000001.deleting").string()); }),
             Catch::Contains("retired"));

  // A run resumed from an older step: the new checkpoint is what `latest` names and survives
  // keep_last = 1 although higher steps exist; those (an abandoned line) are not counted or retired.
  save_one_process(dir, run, 2, false, /*keep_last=*/1);
  CHECK(read_latest(dir) == "iter_0000002");
  CHECK(fs::exists(fs::path(dir) / "iter_0000002"));
  CHECK(committed_steps(dir) == std::vector<int64_t>{2, 3, 4});
  CHECK(!fs::exists(fs::path(dir) / "iter_0000001.deleting"));  // the leftover went too
}

TEST_CASE("keep_last after a rollback counts only the current line: not the resume point, not later steps") {
  const std::string dir = fresh_dir("rollback");
  Run run = make_run(model_parameter_specs(model()), 1);
  for (int64_t step : {4, 8, 10}) save_one_process(dir, run, step);
  // Resumed from iter_0000004 with keep_last = 2, saving every 2 steps.
  CheckpointWriter writer({dir, /*async=*/false, /*keep_last=*/2, 1}, {}, model_json(model()), CheckpointLayout{});
  writer.set_resumed_step(4);
  writer.save(*run.store, run.sources(), state_at(6));
  // 4 (the rollback point) and 6 are the line's two newest; 8 and 10 are after it: all stay.
  CHECK(committed_steps(dir) == std::vector<int64_t>{4, 6, 8, 10});
  CHECK(read_latest(dir) == "iter_0000006");
  // Reaching step 8 replaces the abandoned iter_0000008; now 4 is beyond the line's two newest.
  writer.save(*run.store, run.sources(), state_at(8));
  CHECK(committed_steps(dir) == std::vector<int64_t>{6, 8, 10});
  writer.save(*run.store, run.sources(), state_at(10));
  writer.finish();
  CHECK(committed_steps(dir) == std::vector<int64_t>{8, 10});
  CHECK(read_latest(dir) == "iter_0000010");
}

TEST_CASE("keep_last after a rollback to steps that miss the old ones keeps the new line, not the abandoned one") {
  const std::string dir = fresh_dir("rollback_offset");
  Run run = make_run(model_parameter_specs(model()), 1);
  for (int64_t step : {4, 8, 10}) save_one_process(dir, run, step);
  // Resumed from iter_0000004 with keep_last = 2, saving every 3 steps: 8 and 10 are never reached.
  CheckpointWriter writer({dir, /*async=*/false, /*keep_last=*/2, 1}, {}, model_json(model()), CheckpointLayout{});
  writer.set_resumed_step(4);
  writer.save(*run.store, run.sources(), state_at(7));
  CHECK(committed_steps(dir) == std::vector<int64_t>{4, 7, 8, 10});
  // At 9 the line is 4, 7, 9: 4 goes; the abandoned 8 (below 9) is neither counted nor deleted.
  writer.save(*run.store, run.sources(), state_at(9));
  CHECK(committed_steps(dir) == std::vector<int64_t>{7, 8, 9, 10});
  writer.save(*run.store, run.sources(), state_at(12));
  writer.finish();
  CHECK(committed_steps(dir) == std::vector<int64_t>{8, 9, 10, 12});
  CHECK(read_latest(dir) == "iter_0000012");
  // A fresh start (load none) in that directory counts only its own saves.
  CheckpointWriter fresh({dir, /*async=*/false, /*keep_last=*/1, 1}, {}, model_json(model()), CheckpointLayout{});
  fresh.set_resumed_step(0);
  fresh.save(*run.store, run.sources(), state_at(3));
  fresh.save(*run.store, run.sources(), state_at(5));
  fresh.finish();
  CHECK(committed_steps(dir) == std::vector<int64_t>{5, 8, 9, 10, 12});
}

TEST_CASE("committed checkpoints without `latest` are not a fresh start") {
  const std::string dir = fresh_dir("no_latest");
  Run run = make_run(model_parameter_specs(model()), 1);
  for (int64_t step : {4, 8, 10}) save_one_process(dir, run, step);
  fs::create_directories(fs::path(dir) / "iter_0000012.partial");  // never committed: not named
  fs::remove(fs::path(dir) / "latest");
  const std::string latest = (fs::path(dir) / "latest").string();
  CHECK_THAT(message_of([&] { find_latest_checkpoint(dir); }),
             Catch::Contains("checkpoint.dir '" + dir + "' holds committed checkpoints (the newest is iter_0000010)") &&
                 Catch::Contains("echo iter_0000010 > " + latest) &&
                 Catch::Contains("checkpoint.load=" + dir + "/iter_0000010") &&
                 Catch::Contains("another checkpoint.dir"));
  CHECK(committed_steps(dir) == std::vector<int64_t>{4, 8, 10});
  // The advice works: `latest` written as the message says (echo's newline included) resolves.
  std::ofstream(latest) << "iter_0000010\n";
  CHECK(find_latest_checkpoint(dir).value() == (fs::path(dir) / "iter_0000010").string());
}

TEST_CASE("a stale .partial of the step being saved is removed before any rank writes into it") {
  const std::string dir = fresh_dir("stale_partial");
  Run run = make_run(model_parameter_specs(model()), 1);
  save_one_process(dir, run, 5);
  // A save of step 20 that failed (disk full): its files stay behind, one where this save's
  // temporary file goes.
  const fs::path partial = fs::path(dir) / "iter_0000020.partial";
  fs::create_directories(partial / "rank_00000.safetensors.tmp");
  std::ofstream(partial / "rank_00001.safetensors") << "a shard of the failed save";
  CheckpointWriter writer({dir, /*async=*/true, 0, 1}, {}, model_json(model()), CheckpointLayout{});
  writer.save(*run.store, run.sources(), state_at(20));
  CHECK(!fs::exists(partial / "rank_00001.safetensors"));  // gone before the commit
  writer.finish();
  CHECK(committed_steps(dir) == std::vector<int64_t>{5, 20});
  CHECK(read_latest(dir) == "iter_0000020");
  Run back = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(dir), json(), back.targets());
  CHECK(count_mismatches(*back.store, back.store->flat_values(), 1) == 0);
}

TEST_CASE("saving a step again replaces its directory atomically") {
  const std::string dir = fresh_dir("resave");
  save_one_process(dir, make_run(model_parameter_specs(model()), 1), 5);
  save_one_process(dir, make_run(model_parameter_specs(model()), 2), 5);
  Run back = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(dir), json(), back.targets(false));
  CHECK(count_mismatches(*back.store, back.store->flat_values(), 2) == 0);
  CHECK(committed_steps(dir) == std::vector<int64_t>{5});
}

TEST_CASE("saving a step again where the filesystem has no atomic exchange (NFS) replaces it too") {
  const std::string dir = fresh_dir("resave_no_exchange");
  save_one_process(dir, make_run(model_parameter_specs(model()), 1), 5);
  ::setenv("LATTICE_TEST_NO_RENAME_EXCHANGE", "1", 1);
  save_one_process(dir, make_run(model_parameter_specs(model()), 2), 5);
  ::unsetenv("LATTICE_TEST_NO_RENAME_EXCHANGE");
  Run back = make_run(model_parameter_specs(model()), 9);
  load_checkpoint(resolve_checkpoint(dir), json(), back.targets(false));
  CHECK(count_mismatches(*back.store, back.store->flat_values(), 2) == 0);
  CHECK(committed_steps(dir) == std::vector<int64_t>{5});
  CHECK(!fs::exists(fs::path(dir) / "iter_0000005.deleting"));
  CHECK(!fs::exists(fs::path(dir) / "iter_0000005.partial"));
}

TEST_CASE("a .partial left by a killed job is never loaded, and goes with the next commit") {
  const std::string dir = fresh_dir("partial");
  save_one_process(dir, make_run(model_parameter_specs(model()), 1), 5);
  // A killed job: step 9's files (even a metadata.json) written, never committed.
  const fs::path partial = fs::path(dir) / "iter_0000009.partial";
  fs::copy(fs::path(dir) / "iter_0000005", partial);
  CHECK(resolve_checkpoint(dir) == (fs::path(dir) / "iter_0000005").string());
  CHECK(find_latest_checkpoint(dir).value() == (fs::path(dir) / "iter_0000005").string());
  CHECK_THAT(message_of([&] { resolve_checkpoint(partial.string()); }), Catch::Contains("never committed"));
  CHECK(committed_steps(dir) == std::vector<int64_t>{5});

  // Without any `latest`, a root holding only a .partial is a fresh start.
  const std::string lone = fresh_dir("partial_only");
  fs::create_directories(fs::path(lone) / "iter_0000003.partial");
  CHECK(!find_latest_checkpoint(lone).has_value());

  save_one_process(dir, make_run(model_parameter_specs(model()), 1), 6);
  CHECK(!fs::exists(partial));
  CHECK(committed_steps(dir) == std::vector<int64_t>{5, 6});
}

TEST_CASE("box arithmetic and the region copy") {
  const Box a{{0, 4}, {4, 4}}, b{{2, 6}, {4, 4}};
  CHECK(intersect(a, b) == Box{{2, 6}, {2, 2}});
  CHECK(intersect(a, Box{{4, 0}, {1, 1}}).numel() == 0);
  // src holds global [2:6, 6:10] of a 8x10 tensor; dst is a local [3, 10] tensor at global row 3
  // (with one padding row): copy global [3:5, 6:8].
  std::vector<float> src(16), dst(30, -1.0f);
  for (int i = 0; i < 16; ++i) src[i] = static_cast<float>(i);
  copy_region(src.data(), b, dst.data(), {3, 0}, {3, 10}, Box{{3, 6}, {2, 2}}, sizeof(float));
  CHECK(dst[0 * 10 + 6] == 4.0f);   // global (3,6) = src row 1 col 0
  CHECK(dst[0 * 10 + 7] == 5.0f);
  CHECK(dst[1 * 10 + 6] == 8.0f);
  CHECK(dst[1 * 10 + 7] == 9.0f);
  CHECK(dst[0] == -1.0f);

  // flat_range_boxes: for every range of a [3, 4, 5] tensor, the boxes' elements in order are
  // exactly the range, at most two per dimension.
  const Shape shape{3, 4, 5};
  for (int64_t begin = 0; begin <= 60; ++begin) {
    for (int64_t end = begin; end <= 60; ++end) {
      std::vector<int64_t> elements;
      const std::vector<Box> boxes = flat_range_boxes(shape, begin, end);
      CHECK(boxes.size() <= 5);
      for (const Box& b : boxes) {
        CHECK(b.numel() > 0);
        for (int64_t i = b.offset[0]; i < b.offset[0] + b.shape[0]; ++i)
          for (int64_t j = b.offset[1]; j < b.offset[1] + b.shape[1]; ++j)
            for (int64_t k = b.offset[2]; k < b.offset[2] + b.shape[2]; ++k) elements.push_back((i * 4 + j) * 5 + k);
      }
      std::vector<int64_t> want(static_cast<size_t>(end - begin));
      for (int64_t e = begin; e < end; ++e) want[static_cast<size_t>(e - begin)] = e;
      if (elements != want) FAIL_CHECK("flat_range_boxes(" << begin << ", " << end << ")");
    }
  }
  CHECK(flat_range_boxes({}, 0, 1).size() == 1);  // a 0-d tensor
}

TEST_CASE("data-parallel replicas split the boxes, each exactly once, balanced by bytes") {
  const auto specs = tp_shard_specs(model(), 1, 2);  // includes replicas and a padded vocabulary
  ParameterStore store(specs, host_context());
  std::map<std::string, int> seen;
  std::vector<int64_t> bytes;
  for (int r = 0; r < 3; ++r) {
    const ShardPlan plan = plan_shard(store, true, r, 3);
    bytes.push_back(plan.staging_numel);
    for (const ShardItem& i : plan.items) seen[i.kind + "/" + store.spec(i.param).name]++;
  }
  int64_t expected = 0;
  for (const ParamSpec& s : store.specs())
    if (!s.replica && s.box_numel() > 0) ++expected;
  CHECK(static_cast<int64_t>(seen.size()) == 3 * expected);
  for (const auto& [k, n] : seen) CHECK(n == 1);
  const auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
  CHECK(*hi - *lo <= 128 * 16);  // within the largest item
}
