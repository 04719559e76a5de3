// TrainingCheckpoint: the training loop's side of sharded checkpoints — what to resume from
// (checkpoint.load: auto | none | PATH), loading a checkpoint of any layout into this rank's
// optimizer, and saving into checkpoint.dir through the (asynchronous) CheckpointWriter.
// Checkpoints hold the optimizer's fp32 main parameters and AdamW moments in the buffer's flat
// layout: sharded, they are all-gathered over dp for a save and this rank's part is taken after a load.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_writer.h"
#include "parallel/communicator.h"
#include "parallel/optimizer.h"
#include "trainer/config.h"

namespace lattice {

// The iteration directory checkpoint.load names: nullopt for "none", and for "auto" when
// checkpoint.dir is empty or holds no `latest` yet (a fresh start). InputError (exit 2) when a
// given PATH or an existing `latest` does not lead to a complete checkpoint.
std::optional<std::string> checkpoint_to_load(const CheckpointConfig& config);

// The checks of a resume from `dir` that read only its metadata, before anything is loaded: the
// model it holds is the config's, its LR schedule position is its step, it has the AdamW moments,
// and training.global_batch_size continues at its sample. InputErrors (exit 2) naming the fields and
// what to set; returns the metadata. `lattice validate` runs them too.
CheckpointMetadata check_checkpoint_fits(const Config& config, const std::string& dir);

// "4 ranks: tensor 2 × pipeline 2 × data 1, 1 virtual stage(s), distributed optimizer off"
std::string describe_checkpoint_layout(const CheckpointLayout& layout);

class TrainingCheckpoint {
 public:
  // `world` and `dp` are nullptr in one process (no communication at all); they and the optimizer
  // must outlive this object. Saving is on when checkpoint.dir is set (constructing the writer is
  // then a collective over `world`). `device`: where the optimizer's state lives (a GPU's
  // snapshots go over its copy stream into pinned memory).
  TrainingCheckpoint(const Config& config, const ParallelLayout& layout, Optimizer& optimizer, Device device,
                     Communicator* world, Communicator* dp);
  ~TrainingCheckpoint();

  // Loads what checkpoint.load names into the optimizer (main parameters, moments, step count;
  // the model's parameters follow) and returns the step it holds; 0 when there is nothing to load (a fresh start). Every
  // rank reads the files it needs itself (no communication). A different model, a missing /
  // truncated / corrupt file, or a global batch size under which the data would not continue at the
  // checkpoint's sample: InputError naming the fields or the file, nothing touched on disk.
  int64_t resume();

  bool saving() const { return writer_ != nullptr; }
  // Whether step ends with a save: every checkpoint.save_interval steps.
  bool save_due(int64_t step) const;
  // At every step boundary (a collective while a save is pending): commits a background save once
  // every rank's file is durable.
  void poll();
  // Before the optimizer changes values or moments: an overlapped snapshot must be complete.
  void before_optimizer_step();
  // Saves the state after `step` (a collective).
  void save(int64_t step);
  int64_t last_saved_step() const { return last_saved_step_; }
  // Waits until the pending save is committed (and retired checkpoints are deleted).
  void finish();

 private:
  const Config& config_;
  Optimizer& optimizer_;
  std::unique_ptr<CheckpointWriter> writer_;
  int64_t last_saved_step_ = -1;
};

}  // namespace lattice
