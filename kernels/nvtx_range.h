// NvtxRange: a named range for NVIDIA Nsight Systems (`nsys profile -t cuda,nvtx`), in the NVTX
// domain "lattice", from construction to destruction on the calling thread. A run opens one per
// step, per forward and backward of each micro-batch on each model chunk, per wait (data, pipeline
// receives and sends, gradient sums and reductions), per gradient norm, optimizer step, evaluation
// and checkpoint save, and per op of kernels/ops.h, so nsys shows under each range the kernels it
// launched.
//
// Builds with CUDA (--config=cuda) use the toolkit's header-only NVTX: with no profiler attached a
// range is a call through a pointer to a function that does nothing. The CPU-only build has no NVTX:
// its ranges do nothing. A CUDA build annotates CPU runs too: NVTX marks host code.
#pragma once

#include <string>

namespace lattice {

// What a range is, which sets its colour in the timeline.
enum class NvtxKind { kStep, kForward, kBackward, kOp, kOptimizer, kCommunication, kData, kEvaluation };

class NvtxRange {
 public:
  // The message is copied when the range opens.
  NvtxRange(const char* message, NvtxKind kind);
  NvtxRange(const std::string& message, NvtxKind kind) : NvtxRange(message.c_str(), kind) {}
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace lattice
