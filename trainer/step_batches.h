// StepBatches: the micro-batches of one step as this rank reads them — each at most once, when the
// first of its chunks needs it (the embedding needs the ids, the head the targets), kept until the
// step ends so that the chunk's backward and the rank's other chunks find it. Middle pipeline
// stages never read data. The source fills pinned host buffers, copied to the device asynchronously
// on the compute stream: reading a micro-batch never makes the host wait for the device's queue, so
// the host keeps enqueueing ahead of the GPU (the step's one synchronization is its read-back). The
// ids and targets are checked against the vocabulary here, on the host, as they are filled, so the
// model's ops need not check them on the device (a read-back each: kernels/ops.h, ops::Ids).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/device_context.h"
#include "kernels/stream.h"
#include "kernels/tensor.h"
#include "parallel/trace.h"

namespace lattice {

// Fills ids/targets (i32 [micro_batch_size, seq_length]) with micro-batch `micro` of global batch
// `global_batch` (this data-parallel rank's share).
using MicroBatchSource =
    std::function<void(int64_t global_batch, int64_t micro, Tensor& ids, Tensor& targets)>;

class StepBatches {
 public:
  // Room for `micro_batches` micro-batches of [micro_batch_size, seq_length] ids and targets, each
  // value in [0, vocab_size); each
  // buffer is allocated at its first read (in the first step; never on a rank that reads no data),
  // on the host and on ctx's device. `ctx` must outlive this.
  StepBatches(int64_t micro_batches, int64_t micro_batch_size, int64_t seq_length, int64_t vocab_size,
              const DeviceContext& ctx, Tracer& tracer);

  // A new step (or evaluation batch): micro-batch i will be micro-batch i of `global_batch` of
  // `source`. `trace_step` is the step number in the trace's "data wait" events.
  void begin(const MicroBatchSource& source, int64_t global_batch, int64_t trace_step);
  const Tensor& ids(int microbatch) { return read(microbatch).ids; }
  const Tensor& targets(int microbatch) { return read(microbatch).targets; }

  // Seconds spent in the source since begin() (the loader's prefetch normally hides the reads).
  double wait_s() const { return wait_s_; }

 private:
  struct Batch {
    Tensor host_ids, host_targets;  // what the source fills: pinned, the copies' sources
    Tensor ids, targets;            // on the device
    Event copied;                   // after the last copies from host_*: refill once it completed
    bool read = false;
  };
  Batch& read(int microbatch);

  int64_t micro_batch_size_, seq_length_, vocab_size_;
  const DeviceContext& ctx_;
  Tracer& tracer_;
  std::vector<Batch> batches_;
  const MicroBatchSource* source_ = nullptr;
  int64_t global_batch_ = 0;
  int64_t trace_step_ = 0;
  double wait_s_ = 0;
};

}  // namespace lattice
