// The learning-rate schedule (Megatron-style): linear warmup, then cosine / linear / constant decay
// to min_lr. A pure function of (config, train_iters, step), so a resumed run recomputes it exactly.
#pragma once

#include <cstdint>

#include "trainer/config.h"

namespace lattice {

// Learning rate for optimizer step `step`, the 1-based index of the step being taken (the same
// number AdamW uses for bias correction; step 0 means "before any step").
//   warmup (warmup_iters > 0 and step <= warmup_iters): lr * step / warmup_iters
//   decay end D = decay_iters, or train_iters when decay_iters == 0
//   constant: lr after warmup, forever (Megatron: min_lr is not used)
//   step >= D: min_lr
//   otherwise, with progress = (step - warmup_iters) / (D - warmup_iters) in [0, 1):
//     cosine: min_lr + 0.5 (lr - min_lr) (1 + cos(pi progress))
//     linear: min_lr + (lr - min_lr) (1 - progress)
// D <= warmup_iters means "no decay phase": min_lr right after warmup. Never divides by zero.
double learning_rate(const OptimizerConfig& config, int64_t train_iters, int64_t step);

}  // namespace lattice
