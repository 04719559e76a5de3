// Checkpoint benchmark: for a model's one-process store (e.g. the GPT-2 124M shape), the
// synchronous save time, the training loop's stall per asynchronous save, and the load time.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_config.h"

namespace lattice {

// Where the training loop's time went per asynchronous save (means over the saves after the
// first; the host buffer is reserved before the first save, as the trainer does at start-up, so the
// first differs only by warming up the writer).
struct AsyncSaveFigures {
  double first_stall_s = 0;
  double stall_s = 0;       // snapshot + fence + polls + commit, on the caller
  double snapshot_s = 0;
  double fence_s = 0;       // wait_snapshot() before the "optimizer step" (overlapped snapshot only)
  double commit_s = 0;
  double total_s = 0;       // save() to committed
};

struct CheckpointBenchResult {
  int64_t parameters = 0;
  uint64_t bytes = 0;            // written per save (values + both moments + headers)
  double sync_save_s = 0;        // save() with async off: snapshot, write, fsync, commit
  int async_saves = 0;
  AsyncSaveFigures blocking;     // snapshot copied inside save()
  AsyncSaveFigures overlapped;   // snapshot copied on the background thread (overlap_snapshot)
  double load_s = 0;             // load_checkpoint with moments: verify every file (CRC) + copy
  double step_s = 0;             // the simulated forward/backward between save and optimizer step
};

// Saves a store of `model` (values + AdamW moments) under `dir` once synchronously, then
// `async_saves` (>= 2) times asynchronously with the blocking and with the overlapped snapshot —
// simulated training steps of `step_s` seconds (sleep = forward/backward, wait_snapshot(), the
// "optimizer" changing the moments, try_commit()) until each commits — then loads the newest.
// `dir` must not exist (it is created, and removed at the end) or be empty, else InputError: the
// benchmark never deletes what it did not write. What it wrote is deleted at the end.
CheckpointBenchResult bench_checkpoint(const ModelConfig& model, const std::string& dir, int async_saves = 3,
                                       double step_s = 0.1);

// Multi-line report with the stall as a percentage of the synchronous save (the target is <= 5%).
std::string format_checkpoint_bench(const CheckpointBenchResult& result);

// The GPT-2 124M shape (12 layers, 768 hidden, 12 heads, 3072 FFN, 50257 vocab, 1024 positions).
ModelConfig gpt2_124m_config();

}  // namespace lattice
