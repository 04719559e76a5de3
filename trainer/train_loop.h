// The training loop of one process: builds the model from the config, reads micro-batches,
// accumulates gradients, clips, steps AdamW on the LR schedule, evaluates, logs and writes metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/tensor.h"
#include "trainer/config.h"

namespace lattice {

class Communicator;

struct TrainOptions {
  std::string export_dir;  // when set, the trained model is written there in Hugging Face format
  // Data parallelism (parallel.tensor = pipeline = 1): this rank's dp group, which must outlive
  // train(); nullptr = one process. Every dp rank reads its own micro-batches and trains the model
  // one process would; dp rank 0 writes the metrics file and the export, every rank its trace.
  Communicator* dp = nullptr;
  int rank = 0;  // world rank (names the trace file)
};

struct TrainResult {
  double first_loss = 0;
  double final_loss = 0;
  double last_val_loss = -1;  // -1 when no evaluation ran
  // Throughput averaged over the steps after the first (which pays for warm-up).
  double mean_tokens_per_s = 0;
  double mean_gflops = 0;
  // Data parallelism: the share of gradient communication hidden behind compute over the run
  // (1 - blocked time / time communication was outstanding, from GradBuckets::last_stats()).
  double dp_comm_s = 0;
  double dp_wait_s = 0;
};

// Fills ids/targets (i32 [micro_batch_size, seq_length]) with micro-batch `micro` of global batch
// `global_batch`.
using MicroBatchSource =
    std::function<void(int64_t global_batch, int64_t micro, Tensor& ids, Tensor& targets)>;

// Trains on the dataset the config names (validation on its valid split).
TrainResult train(const Config& config, const TrainOptions& options);
// Trains on any micro-batch source (benchmarks use synthetic tokens); no validation when
// `valid` is empty.
TrainResult train_on(const Config& config, const TrainOptions& options, const MicroBatchSource& train_data,
                     const MicroBatchSource& valid_data);

}  // namespace lattice
