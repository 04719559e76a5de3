// CheckpointWriter: fully parallel, optionally asynchronous saves of sharded checkpoints. Every rank
// writes its own boxes; rank 0 commits (metadata.json, iter_N.partial → iter_N, then `latest`).
//
// Protocol (all methods but the accessors are collectives: every rank calls them at the same
// point of the training loop, e.g. at a step boundary):
//   save(...)      waits for (and commits) the previous save; rank 0 removes a stale iter_N.partial
//                  of the same step (a save that never committed) before any rank writes; copies
//                  this rank's boxes into a reusable host buffer (the snapshot: the sources may
//                  change as soon as it returns), then writes + fsyncs its shard file — on a
//                  background thread when async.
//   try_commit()   every poll_every-th call, one all-reduce(min) of each rank's "file durable"
//                  flag; when all are, the file lists and checksums travel to rank 0, which writes
//                  metadata.json, renames, points `latest` at it and applies keep_last.
//   wait()/finish() block until the pending save is committed.
// keep_last retires old checkpoints at commit (renamed at once, deleted on a background thread),
// counting only the current line of training (see set_resumed_step and retire_checkpoints).
// A failed write on any rank fails the commit on every rank (an Error; the .partial stays behind
// and is never loaded). The destructor only joins the background thread: call finish() first.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/shard_plan.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/communicator.h"
#include "parallel/param_layout.h"

namespace lattice {

struct CheckpointWriterOptions {
  std::string dir;           // checkpoint root (created when missing)
  bool async = true;         // write on a background thread after the snapshot
  int64_t keep_last = 0;     // committed checkpoints up to the saved step to keep (0 = all); later
                             // steps (an abandoned line) and `latest` are never deleted
  int64_t poll_every = 1;    // try_commit() runs its all-reduce every this many calls
  // async only: the snapshot copy also runs on the background thread, overlapping the next
  // forward/backward; the caller must call wait_snapshot() before it changes anything it saved
  // (before the optimizer step, a parameter all-gather or a load). Off: save() copies before it
  // returns.
  bool overlap_snapshot = false;
  // Where the saved tensors live. On a device the host snapshot buffer is pinned memory, and the
  // snapshot is one DMA per piece on the device's copy stream (ops::copy_to_host_async): it runs
  // beside the next step's kernels, and wait_snapshot() orders the compute stream after it on the
  // device instead of blocking the host.
  Device device = Device::kCpu;
  // Box checksums per this many bytes (checkpoint_format.h); the same on every rank. Tests make
  // it small, to cut small tensors into several chunks.
  uint64_t box_crc32_chunk_bytes = kBoxCrc32ChunkBytes;
};

// The groups a save needs; nullptr world = one process (no communication at all).
struct CheckpointGroups {
  Communicator* world = nullptr;  // every rank of the job
  Communicator* dp = nullptr;     // this rank's data-parallel replicas (nullptr = none)
};

// What a save writes, in the layout's flat order (numel == layout.numel() each): the parameters
// (in training, the optimizer's fp32 main parameters) and, when given, AdamW's two moments.
struct SaveSources {
  const Tensor* values = nullptr;
  const Tensor* exp_avg = nullptr;
  const Tensor* exp_avg_sq = nullptr;
};

// Where one save's time went, on this rank.
struct SaveTimings {
  int64_t step = -1;
  double snapshot_s = 0;  // caller: copying the boxes into the host buffer (~0 with overlap_snapshot)
  double fence_s = 0;     // caller: wait_snapshot() blocked (overlap_snapshot only)
  double wait_s = 0;      // caller: save() waiting for the previous save to commit
  double poll_s = 0;      // caller: try_commit() calls that found the save still being written
  double commit_s = 0;    // caller: the call that committed it (gather, metadata, rename, latest, retention)
  double write_s = 0;     // background: writing + fsync of this rank's shard file
  double total_s = 0;     // from save() entry to committed
  uint64_t bytes = 0;     // this rank's shard file
  // What the training loop lost to this save: snapshot + fence + wait + polls + commit.
  double stall_s() const { return snapshot_s + fence_s + wait_s + poll_s + commit_s; }
};

class CheckpointWriter {
 public:
  // Collective over groups.world (splits off a private communicator for the commit protocol).
  // `config` (the resolved run config) and `layout` go into every metadata.json.
  CheckpointWriter(CheckpointWriterOptions options, CheckpointGroups groups, nlohmann::json config,
                   CheckpointLayout layout);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Saves `sources` (this rank's parameters of `layout`; with the distributed optimizer, gathered
  // over dp first) with `state`. Every rank passes the same state and the same moments-or-not
  // choice. With overlap_snapshot the sources must not change until wait_snapshot().
  void save(const ParamLayout& layout, const SaveSources& sources, const CheckpointState& state);

  // The same, for sources that are not whole flat tensors on this rank (the distributed optimizer's
  // state, sharded over dp): `fill` copies this rank's items (plan.items) into `staging` at their
  // staging_offset and returns the event after its last device→host copy (not recorded: the
  // copies are complete). It runs inside save() on every rank, so it may be a collective.
  using SnapshotFill = std::function<Event(const ShardPlan& plan, Tensor& staging)>;
  void save(const ParamLayout& layout, bool optimizer_state, const SnapshotFill& fill, const CheckpointState& state);

  // Allocates (and touches) the host snapshot buffer for saves of `layout` now, e.g. at start-up,
  // so that the first save() does not pay for it inside the training loop. Not a collective.
  void reserve(const ParamLayout& layout, bool optimizer_state);

  // With overlap_snapshot: blocks until the pending save's snapshot is taken (at once otherwise, or
  // with nothing pending). Not a collective.
  void wait_snapshot();

  // Commits the pending save if every rank's file is durable; true when this call committed one.
  // Without a pending save it does nothing (and communicates nothing).
  bool try_commit();
  // Blocks until the pending save (if any) is committed.
  void wait();
  // wait(), then also waits for the deletion of checkpoints retired by keep_last.
  void finish();

  bool pending() const { return job_ != nullptr; }
  int64_t pending_step() const;
  int64_t last_committed_step() const { return last_committed_step_; }
  // The step this run resumed from (0: a fresh start). keep_last then counts the checkpoints up to it
  // and those this writer committed: the current line. Others (later steps of a line abandoned by a
  // rollback, or another run's left in the directory) are neither counted nor retired. Unset, the
  // line is every checkpoint up to the step being committed.
  void set_resumed_step(int64_t step) { resumed_step_ = step; }
  const SaveTimings& last_timings() const { return last_timings_; }
  const std::string& dir() const { return options_.dir; }

 private:
  struct Job;
  // save()'s common part: `snapshot` copies the plan's items into staging_ and sets the job's
  // snapshot fields.
  void save_job(const ParamLayout& layout, bool optimizer_state, const CheckpointState& state,
                const std::function<void(Job&)>& snapshot);
  void write_shard(Job& job);  // the background part
  void remove_stale_partial(const std::string& partial_dir, int64_t step);  // collective, before any write
  void commit(int flag);       // flag: agreed status (1 all durable, -1 some rank failed)
  void finalize_on_root(const Job& job, const std::vector<nlohmann::json>& reports);
  int agree(int flag);         // min over the job's host channel; identity in one process
  std::vector<nlohmann::json> gather_reports(const nlohmann::json& mine);
  int rank() const;
  void join_cleaner();

  CheckpointWriterOptions options_;
  std::unique_ptr<Communicator> comm_;  // private split of the world; nullptr in one process
  int dp_rank_ = 0;
  int dp_size_ = 1;
  nlohmann::json config_;
  CheckpointLayout layout_;
  void allocate_staging(int64_t numel);

  Tensor staging_;  // host snapshot buffer, reused by every save of the same plan
  std::unique_ptr<Job> job_;
  int64_t polls_ = 0;
  int64_t last_committed_step_ = -1;
  int64_t resumed_step_ = -1;                // -1: not told (see set_resumed_step)
  std::set<int64_t> committed_by_this_run_;  // rank 0's commits, for keep_last
  bool root_synced_ = false;  // the root's own directory entry has been fsynced
  std::thread cleaner_;       // rank 0: deletes retired checkpoints (seconds for big ones) off the loop
  SaveTimings last_timings_;
};

}  // namespace lattice
