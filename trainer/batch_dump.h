// `lattice data batch`: the tokens of one global batch as a run of the config reads them, for a
// reference implementation (PyTorch, Megatron-LM) fed the same batches, or to look at what a step
// trained on.
#pragma once

#include <cstdint>
#include <string>

#include "data/gpt_dataset.h"
#include "trainer/config.h"

namespace lattice {

// One JSON line per sample of the global batch, in the batch's order (data-parallel rank r reads
// rows [r·B/D, (r+1)·B/D)): {"step", "row", "sample", "source", "tokens"}, tokens the sample's
// seq_length + 1 ids (a row's input is tokens[0..S), its targets tokens[1..S]). Train: the batch of
// training step `step` (1-based), read through the trainer's loader; valid: batch `step` of each
// evaluation (which restarts at the split's first batch). InputError for a step outside the run.
std::string dump_global_batch(const Config& config, Split split, int64_t step);

}  // namespace lattice
