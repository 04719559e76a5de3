// CheckpointWriter: snapshot, background write, and the agreed commit.
#include "checkpoint/checkpoint_writer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <pthread.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/crc32.h"
#include "checkpoint/safetensors.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Status of a rank's shard file; agreed with min over the job, so one failure or one writer still
// busy decides for the job.
constexpr int kFailed = -1;
constexpr int kWriting = 0;
constexpr int kDurable = 1;

// Elements per snapshot copy task (16 MB of fp32).
constexpr int64_t kSnapshotChunk = int64_t{1} << 22;

// TEST HOOK (tests/checkpoint/kill_during_save_test.sh, sigint_test.sh): LATTICE_TEST_SLOW_SAVE="STEP:SECONDS" makes
// the background write of step STEP's shard pause SECONDS after its header — mid-file, before the
// data and the fsync — so a test can kill -9 a rank while an asynchronous save is in flight,
// deterministically. Unset (always, outside those tests) it costs one getenv per save.
double slow_save_seconds(int64_t step) {
  const char* v = std::getenv("LATTICE_TEST_SLOW_SAVE");
  if (v == nullptr) return 0.0;
  long long at = -1;
  double seconds = 0.0;
  if (std::sscanf(v, "%lld:%lf", &at, &seconds) != 2 || at != step) return 0.0;
  return seconds;
}

}  // namespace

struct CheckpointWriter::Job {
  CheckpointState state;
  bool optimizer_state = false;
  ShardPlan plan;
  json boxes = json::array();  // this rank's boxes, for the metadata
  std::string partial_dir;
  std::string file_name;       // empty: this rank writes nothing this time
  StoredFile file;
  std::thread thread;
  // overlap_snapshot: the copies the background thread makes before writing, and the fence the
  // caller waits on (wait_snapshot) before it changes the sources.
  std::vector<std::pair<Tensor, Tensor>> copies;
  // Device sources: the end of the snapshot's copies on the device's copy stream (the writer thread
  // waits for it before writing); `ordered` once the compute stream waits for it (wait_snapshot).
  Event copies_done;
  bool ordered = false;
  std::atomic<bool> snapshot_taken{false};
  std::mutex mutex;
  std::condition_variable snapshot_cv;
  std::atomic<int> status{kWriting};
  std::string error;
  std::chrono::steady_clock::time_point started;
  SaveTimings timings;
};

CheckpointWriter::CheckpointWriter(CheckpointWriterOptions options, CheckpointGroups groups, json config,
                                   CheckpointLayout layout)
    : options_(std::move(options)), config_(std::move(config)), layout_(layout) {
  if (options_.dir.empty()) throw InputError("checkpoint.dir is empty: set it to the directory that holds checkpoints");
  LATTICE_CHECK(options_.poll_every >= 1 && options_.keep_last >= 0, "poll_every {} keep_last {}",
                options_.poll_every, options_.keep_last);
  if (groups.world != nullptr) {
    // A private communicator: the commit's messages never meet the trainer's.
    comm_ = groups.world->split(0, groups.world->rank(), "checkpoint", "commit protocol");
  }
  if (groups.dp != nullptr) {
    dp_rank_ = groups.dp->rank();
    dp_size_ = groups.dp->size();
  }
}

CheckpointWriter::~CheckpointWriter() {
  join_cleaner();
  if (!job_) return;
  if (job_->thread.joinable()) job_->thread.join();
  spdlog::warn("checkpoint of step {} was not committed (finish() was not called): {} stays behind and is never "
               "loaded",
               job_->state.step, job_->partial_dir);
}

int CheckpointWriter::rank() const { return comm_ ? comm_->rank() : 0; }

void CheckpointWriter::join_cleaner() {
  if (cleaner_.joinable()) cleaner_.join();
}

void CheckpointWriter::finish() {
  wait();
  join_cleaner();
}

void CheckpointWriter::allocate_staging(int64_t numel) {
  if (staging_.numel() == numel) return;
  staging_ = Tensor();  // release first: the peak is the new buffer, not old + new
  const Shape shape{numel};
  // Pinned for a device's DMA; zeroed, so the pages are resident before the first save needs them.
  staging_ = Tensor::over(backend_for("checkpoint snapshot", options_.device)
                              .allocate_pinned(tensor_bytes(shape, DType::kF32)),
                          shape, DType::kF32);
  std::fill_n(staging_.f32(), numel, 0.0f);
}

void CheckpointWriter::reserve(const ParamLayout& layout, bool optimizer_state) {
  wait();  // a pending save still reads the buffer
  allocate_staging(plan_shard(layout, optimizer_state, dp_rank_, dp_size_).staging_numel);
}

int64_t CheckpointWriter::pending_step() const { return job_ ? job_->state.step : -1; }

void CheckpointWriter::save(const ParamLayout& layout, const SaveSources& sources, const CheckpointState& state) {
  const Tensor *exp_avg = sources.exp_avg, *exp_avg_sq = sources.exp_avg_sq;
  LATTICE_CHECK(sources.values != nullptr && sources.values->numel() == layout.numel(),
                "a save needs the {} parameter values of the layout", layout.numel());
  LATTICE_CHECK((exp_avg == nullptr) == (exp_avg_sq == nullptr), "pass both moments or neither");
  if (exp_avg != nullptr) {
    LATTICE_CHECK(exp_avg->numel() == layout.numel() && exp_avg_sq->numel() == layout.numel(),
                  "moments have {} and {} elements, the layout {}", exp_avg->numel(), exp_avg_sq->numel(),
                  layout.numel());
  }
  save_job(layout, exp_avg != nullptr, state, [&](Job& job) {
    // Copies of at most kSnapshotChunk elements, spread over the OpenMP threads: one thread does not
    // reach the memory bandwidth, and this copy is what the training loop waits for.
    std::vector<std::pair<Tensor, Tensor>> chunks;  // (source, destination)
    for (const ShardItem& item : job.plan.items) {
      const Tensor& flat = item.kind == kModelKind ? *sources.values : item.kind == kExpAvgKind ? *exp_avg : *exp_avg_sq;
      for (int64_t begin = 0; begin < item.numel; begin += kSnapshotChunk) {
        const int64_t n = std::min(kSnapshotChunk, item.numel - begin);
        chunks.emplace_back(flat.slice_flat(item.flat_offset + begin, {n}),
                            staging_.slice_flat(item.staging_offset + begin, {n}));
      }
    }
    const bool overlap = options_.async && options_.overlap_snapshot;
    if (options_.device != Device::kCpu) {
      for (const auto& [src, dst] : chunks) {
        LATTICE_CHECK(src.device() == options_.device, "checkpoint save: {} is not on the writer's device {}",
                      src.describe(), device_name(options_.device));
      }
      // One stream's copies complete in order: the last one's event stands for them all.
      for (auto& [src, dst] : chunks) job.copies_done = ops::copy_to_host_async(src, dst);
      if (!overlap) {
        job.copies_done.synchronize();
        job.snapshot_taken.store(true);
      }
    } else if (overlap) {
      job.copies = std::move(chunks);  // the background thread copies; the views keep the storage alive
    } else {
#pragma omp parallel for schedule(dynamic, 1)
      for (size_t k = 0; k < chunks.size(); ++k) ops::copy(chunks[k].first, chunks[k].second);
      job.snapshot_taken.store(true);
    }
  });
}

void CheckpointWriter::save(const ParamLayout& layout, bool optimizer_state, const SnapshotFill& fill,
                            const CheckpointState& state) {
  save_job(layout, optimizer_state, state, [&](Job& job) {
    job.copies_done = fill(job.plan, staging_);
    // Device copies still in flight overlap the next step, as with flat sources (wait_snapshot).
    const bool pending = options_.async && options_.overlap_snapshot && options_.device != Device::kCpu &&
                         job.copies_done.recorded();
    if (!pending) {
      job.copies_done.synchronize();
      job.snapshot_taken.store(true);
    }
  });
}

void CheckpointWriter::save_job(const ParamLayout& layout, bool optimizer_state, const CheckpointState& state,
                                const std::function<void(Job&)>& snapshot) {
  const auto t0 = std::chrono::steady_clock::now();
  wait();  // one save in flight at a time: the host buffer and the .partial name are reused
  if (options_.keep_last > 0) {
    // The checkpoints the last commit retired are deleted (rank 0's cleaner) before any rank writes
    // this one: keep_last = N then needs room for N + 1 checkpoints, not N + 2 (a full disk otherwise,
    // while the space is being freed).
    join_cleaner();
    if (comm_) comm_->host().barrier("checkpoint retirement");
  }
  const double wait_s = seconds_since(t0);

  auto job = std::make_unique<Job>();
  job->started = t0;
  job->state = state;
  job->optimizer_state = optimizer_state;
  job->plan = plan_shard(layout, job->optimizer_state, dp_rank_, dp_size_);
  job->partial_dir = (fs::path(options_.dir) / (iter_dir_name(state.step) + kPartialSuffix)).string();
  remove_stale_partial(job->partial_dir, state.step);
  job->timings.step = state.step;
  job->timings.wait_s = wait_s;

  // The snapshot: this rank's boxes into the reusable host buffer.
  const auto t1 = std::chrono::steady_clock::now();
  allocate_staging(job->plan.staging_numel);
  snapshot(*job);
  for (const ShardItem& item : job->plan.items) {
    const ParamSpec& spec = layout.spec(item.param);
    job->boxes.push_back({{"key", tensor_key(item.kind, spec.name)},
                          {"global_shape", spec.global_shape},
                          {"offset", spec.offset},
                          {"shape", spec.box}});
  }
  job->timings.snapshot_s = seconds_since(t1);
  if (!job->plan.items.empty()) job->file_name = shard_file_name(comm_ ? comm_->world_ranks()[rank()] : 0);

  job_ = std::move(job);
  polls_ = 0;
  if (options_.async) {
    Job* j = job_.get();
    j->thread = std::thread([this, j] {
      pthread_setname_np(pthread_self(), "lt-ckpt-write");  // how nsys, gdb and top -H show it
      write_shard(*j);
    });
  } else {
    write_shard(*job_);
    wait();
  }
}

void CheckpointWriter::remove_stale_partial(const std::string& partial_dir, int64_t step) {
  // A save of this step that never committed (it failed, e.g. on a full disk, or its job was
  // killed) left partial_dir: its files would take the space this save needs, or sit where ours
  // go. Rank 0 — in training the rank holding the root's lock — removes it, and no rank writes
  // there before it is done (the vote below), so no rank's new file is deleted with it.
  std::string error;
  if (rank() == 0) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(partial_dir, ec))) {
      fs::remove_all(partial_dir, ec);
      if (ec)
        error = fmt::format("cannot remove '{}', left by a save that did not commit: {}; delete it by hand",
                            partial_dir, ec.message());
      else
        spdlog::info("removed {}, left by an earlier save of step {} that did not commit, before saving it again",
                     partial_dir, step);
    }
  }
  const bool failed = comm_ ? comm_->host().any(!error.empty(), "checkpoint stale .partial removal") : !error.empty();
  if (!error.empty()) throw Error(error);
  if (failed) throw Error(fmt::format("cannot remove '{}' on rank 0 (see its log): the checkpoint is not saved",
                                      partial_dir));
}

void CheckpointWriter::wait_snapshot() {
  if (!job_ || job_->snapshot_taken.load() || job_->ordered) return;
  if (job_->copies_done.recorded()) {
    // Device copies: whatever changes the sources next is enqueued on the compute stream, which
    // now waits for the copies on the device; the host goes on.
    Stream(options_.device).wait(job_->copies_done);
    job_->ordered = true;
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::unique_lock<std::mutex> lock(job_->mutex);
    job_->snapshot_cv.wait(lock, [&] { return job_->snapshot_taken.load(); });
  }
  job_->timings.fence_s += seconds_since(t0);
}

void CheckpointWriter::write_shard(Job& job) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!job.copies.empty()) {
      for (auto& [src, dst] : job.copies) ops::copy(src, dst);
      job.copies.clear();
    }
    job.copies_done.synchronize();  // device copies (none: complete)
  } catch (const std::exception& e) {
    job.error = fmt::format("checkpoint snapshot of step {} failed: {}", job.state.step, e.what());
    job.status.store(kFailed);
  }
  {
    // Whatever happened, the caller may go on changing the sources now.
    std::lock_guard<std::mutex> lock(job.mutex);
    job.snapshot_taken.store(true);
  }
  job.snapshot_cv.notify_all();
  if (job.status.load() == kFailed) return;
  try {
    make_directories(job.partial_dir);
    if (!job.file_name.empty()) {
      std::map<std::string, Tensor> tensors;
      std::map<std::string, std::vector<uint32_t>> tensor_crcs;  // every box's chunks (none when empty)
      for (size_t k = 0; k < job.plan.items.size(); ++k) {
        const ShardItem& item = job.plan.items[k];
        const json& box = job.boxes[k];
        tensors.emplace(box["key"].get<std::string>(),
                        staging_.slice_flat(item.staging_offset, box["shape"].get<Shape>()));
        tensor_crcs[box["key"].get<std::string>()] = {};
      }
      // One pass over the bytes: each tensor's chunks' CRCs as they go by, the file's combined from them.
      Crc32 crc, header;
      uint64_t bytes = 0, header_bytes = 0;
      double pause_s = slow_save_seconds(job.state.step);
      write_safetensors((fs::path(job.partial_dir) / job.file_name).string(), tensors,
                        {{"format", kCheckpointFormat}, {"step", std::to_string(job.state.step)}},
                        [&](const std::string& tensor, const void* data, size_t n) {
                          if (tensor.empty()) {
                            crc.update(data, n);
                            header.update(data, n);
                            header_bytes += n;
                          } else {
                            std::vector<uint32_t>& chunks = tensor_crcs.at(tensor);
                            const uint64_t chunk = options_.box_crc32_chunk_bytes;
                            for (uint64_t at = 0; at < n; at += chunk) {
                              const uint64_t len = std::min<uint64_t>(chunk, n - at);
                              Crc32 part;
                              part.update(static_cast<const char*>(data) + at, len);
                              chunks.push_back(part.value());
                              crc.append(part.value(), len);
                            }
                          }
                          bytes += n;
                          if (pause_s > 0 && bytes > 8) {  // the header is out, the data not yet
                            spdlog::warn("LATTICE_TEST_SLOW_SAVE: pausing the write of step {} for {} s",
                                         job.state.step, pause_s);
                            std::this_thread::sleep_for(std::chrono::duration<double>(pause_s));
                            pause_s = 0;
                          }
                        });
      job.file.bytes = bytes;
      job.file.crc32 = crc.value();
      job.file.header = FileChecksum{header_bytes, header.value()};
      for (json& box : job.boxes) box["crc32"] = tensor_crcs.at(box["key"].get<std::string>());
    }
    job.timings.bytes = job.file.bytes;
    job.timings.write_s = seconds_since(t0);
    job.status.store(kDurable);
  } catch (const std::exception& e) {
    job.error = fmt::format("writing checkpoint shard {}/{} failed: {}", job.partial_dir, job.file_name, e.what());
    job.timings.write_s = seconds_since(t0);
    job.status.store(kFailed);
  }
}

int CheckpointWriter::agree(int flag) {
  if (!comm_) return flag;
  return comm_->host().min(flag, "checkpoint commit vote");
}

bool CheckpointWriter::try_commit() {
  if (!job_) return false;
  const auto t0 = std::chrono::steady_clock::now();
  if (++polls_ % options_.poll_every != 0) return false;
  const int flag = agree(job_->status.load());
  if (flag == kWriting) {
    job_->timings.poll_s += seconds_since(t0);
    return false;
  }
  commit(flag);
  last_timings_.commit_s += seconds_since(t0);
  return true;
}

void CheckpointWriter::wait() {
  if (!job_) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (job_->thread.joinable()) job_->thread.join();
  const int flag = agree(job_->status.load());
  commit(flag);
  last_timings_.commit_s += seconds_since(t0);
}

std::vector<json> CheckpointWriter::gather_reports(const json& mine) {
  if (!comm_) return {mine};
  std::vector<json> reports;
  for (const std::string& text : comm_->host().gather_strings(mine.dump(), 0, "checkpoint shard report"))
    reports.push_back(json::parse(text));
  return reports;
}

void CheckpointWriter::commit(int flag) {
  // Whatever happens below, this save is over on this rank.
  std::unique_ptr<Job> job = std::move(job_);
  if (job->thread.joinable()) job->thread.join();
  if (flag == kFailed) {
    if (!job->error.empty()) throw Error(job->error + " (the checkpoint is not committed; the previous one stays)");
    throw Error(fmt::format("checkpoint of step {} failed on another rank (see its log): not committed, {} is left "
                            "behind and never loaded",
                            job->state.step, job->partial_dir));
  }
  json report = {{"rank", comm_ ? comm_->world_ranks()[rank()] : 0},
                 {"optimizer_state", job->optimizer_state},
                 {"boxes", job->boxes}};
  if (!job->file_name.empty())
    report["file"] = {{"name", job->file_name},
                      {"bytes", job->file.bytes},
                      {"crc32", job->file.crc32},
                      {"header_bytes", job->file.header->bytes},
                      {"header_crc32", job->file.header->crc32}};
  const std::vector<json> reports = gather_reports(report);

  int ok = 1;
  std::string error;
  if (rank() == 0) {
    try {
      finalize_on_root(*job, reports);
    } catch (const std::exception& e) {
      ok = 0;
      error = e.what();
    }
  }
  if (comm_) ok = comm_->host().broadcast(ok, 0, "checkpoint commit result");
  if (!ok) {
    if (!error.empty()) throw Error(fmt::format("committing checkpoint of step {} failed: {}", job->state.step, error));
    throw Error(fmt::format("committing checkpoint of step {} failed on rank 0 (see its log)", job->state.step));
  }
  last_committed_step_ = job->state.step;
  job->timings.total_s = seconds_since(job->started);
  last_timings_ = job->timings;
}

void CheckpointWriter::finalize_on_root(const Job& job, const std::vector<json>& reports) {
  join_cleaner();  // the previous commit's deletions are done before this one renames anything
  const std::string iter_name = iter_dir_name(job.state.step);
  CheckpointMetadata m;
  m.config = config_;
  m.layout = layout_;
  m.state = job.state;
  m.optimizer_state = job.optimizer_state;
  m.box_crc32_chunk_bytes = options_.box_crc32_chunk_bytes;
  for (const json& r : reports) {
    if (r["optimizer_state"].get<bool>() != job.optimizer_state)
      throw Error(fmt::format("rank {} saved {} optimizer state, rank 0 {}: every rank must pass moments or none",
                              r["rank"].get<int>(), r["optimizer_state"].get<bool>() ? "with" : "without",
                              job.optimizer_state ? "with" : "without"));
    std::string file;
    if (r.contains("file")) {
      const json& f = r["file"];
      file = f["name"].get<std::string>();
      m.files[file] = {f["bytes"].get<uint64_t>(), f["crc32"].get<uint32_t>(), r["rank"].get<int>(),
                       FileChecksum{f["header_bytes"].get<uint64_t>(), f["header_crc32"].get<uint32_t>()}};
    }
    for (const json& b : r["boxes"]) {
      const std::string key = b["key"].get<std::string>();
      const Shape global = b["global_shape"].get<Shape>();
      auto [it, fresh] = m.tensors.try_emplace(key);
      if (fresh) {
        it->second.global_shape = global;
      } else if (it->second.global_shape != global) {
        throw Error(fmt::format("tensor '{}' has global shape {} on rank {} but {} elsewhere", key,
                                shape_string(global), r["rank"].get<int>(), shape_string(it->second.global_shape)));
      }
      it->second.boxes.push_back({Box{b["offset"].get<Shape>(), b["shape"].get<Shape>()}, file, key,
                                  b["crc32"].get<std::vector<uint32_t>>()});
    }
  }
  // Every element of every tensor exactly once: catches a parameter no rank wrote (a wrong replica
  // flag) before it becomes a checkpoint that cannot be loaded.
  check_tensor_coverage(m, job.partial_dir, /*input=*/false);

  make_directories(job.partial_dir);
  if (!root_synced_) {
    const fs::path parent = fs::absolute(options_.dir).parent_path();
    fsync_directory(parent.string());
    root_synced_ = true;
  }
  // A killed job may have left other files under the same .partial name: only ours go in.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(job.partial_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (m.files.count(name) == 0) fs::remove_all(entry.path(), ec);
  }
  write_file_atomically((fs::path(job.partial_dir) / kMetadataFile).string(), metadata_to_json_with_crc(m).dump(1));
  publish_directory(job.partial_dir, (fs::path(options_.dir) / iter_name).string());
  write_latest(options_.dir, iter_name);
  committed_by_this_run_.insert(job.state.step);
  const int64_t committed = job.state.step;
  const std::vector<std::string> deleted = retire_checkpoints(options_.dir, options_.keep_last, [&](int64_t step) {
    if (resumed_step_ < 0) return step <= committed;
    return step <= resumed_step_ || committed_by_this_run_.count(step) > 0;
  });
  // Deleting gigabytes takes seconds: off the training loop (joined before the next commit).
  cleaner_ = std::thread([root = options_.dir] {
    pthread_setname_np(pthread_self(), "lt-ckpt-clean");
    try {
      delete_retired(root);
    } catch (const std::exception& e) {
      spdlog::error("{} (delete it by hand; training goes on)", e.what());
    }
  });
  uint64_t bytes = 0;
  for (const auto& [name, f] : m.files) bytes += f.bytes;
  spdlog::info("checkpoint step {} committed: {}/{} ({:.1f} MB in {} files{})", job.state.step, options_.dir, iter_name,
               static_cast<double>(bytes) / 1e6, m.files.size(),
               deleted.empty() ? std::string() : fmt::format("; retired {}", fmt::join(deleted, ", ")));
}

}  // namespace lattice
