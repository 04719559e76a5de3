// Lazily read micro-batches of a step.
#include "trainer/step_batches.h"

#include <chrono>

#include <fmt/format.h>

#include "kernels/cpu/embedding.h"
#include "kernels/error.h"
#include "kernels/nvtx_range.h"

namespace lattice {

namespace {

// The first value of `t` outside [0, vocab) as an InputError naming the micro-batch: a source that
// hands out ids the model cannot embed (the data loader checks its own, with the file's name).
void check_vocab(const Tensor& t, const char* what, int64_t vocab, int64_t global_batch, int64_t micro) {
  const int64_t bad = cpu::first_bad_index(t.i32(), t.numel(), vocab);
  if (bad >= 0) {
    throw InputError(fmt::format("micro-batch {} of global batch {}: {} {} at position {} is outside [0, {}) "
                                 "(model.vocab_size): the data's tokenizer does not match the model",
                                 micro, global_batch, what, t.i32()[bad], bad, vocab));
  }
}

}  // namespace

StepBatches::StepBatches(int64_t micro_batches, int64_t micro_batch_size, int64_t seq_length, int64_t vocab_size,
                         const DeviceContext& ctx, Tracer& tracer)
    : micro_batch_size_(micro_batch_size),
      seq_length_(seq_length),
      vocab_size_(vocab_size),
      ctx_(ctx),
      tracer_(tracer),
      batches_(micro_batches) {}

void StepBatches::begin(const MicroBatchSource& source, int64_t global_batch, int64_t trace_step) {
  source_ = &source;
  global_batch_ = global_batch;
  trace_step_ = trace_step;
  wait_s_ = 0;
  for (Batch& b : batches_) b.read = false;
}

StepBatches::Batch& StepBatches::read(int microbatch) {
  LATTICE_CHECK(microbatch >= 0 && microbatch < static_cast<int>(batches_.size()), "micro-batch {} of {}",
                microbatch, batches_.size());
  Batch& b = batches_[microbatch];
  if (b.read) return b;
  LATTICE_CHECK(source_ != nullptr && *source_, "micro-batch {} read before the step began", microbatch);
  if (!b.ids.defined()) {
    const Shape shape{micro_batch_size_, seq_length_};
    b.host_ids = ctx_.pinned_empty(shape, DType::kI32);
    b.host_targets = ctx_.pinned_empty(shape, DType::kI32);
    b.ids = ctx_.empty(shape, DType::kI32);
    b.targets = ctx_.empty(shape, DType::kI32);
  }
  const auto start = std::chrono::steady_clock::now();
  {
    const TraceArgs args = {{"step", trace_step_}, {"microbatch", microbatch}};
    const NvtxRange range(trace_label("data wait", args), NvtxKind::kData);
    TraceScope s = tracer_.scope("data wait", "data", args);
    // The previous step's copies out of these buffers: done long ago (they ran first in that step).
    b.copied.synchronize();
    (*source_)(global_batch_, microbatch, b.host_ids, b.host_targets);
  }
  check_vocab(b.host_ids, "token id", vocab_size_, global_batch_, microbatch);
  check_vocab(b.host_targets, "target", vocab_size_, global_batch_, microbatch);
  ctx_.copy_from_pinned(b.host_ids, b.ids);
  ctx_.copy_from_pinned(b.host_targets, b.targets);
  b.copied = ctx_.stream().record();
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  b.read = true;
  return b;
}

}  // namespace lattice
