// How much of its data a run reads, for the start-of-run log (Megatron-LM users look for its epoch
// count to see whether data repeats): the train split's epochs over the whole run, each dataset's
// for a blend, and the share of the validation split one evaluation reads — a warning when that is
// more than one epoch, since the same samples are then counted again.
#pragma once

#include <string>
#include <vector>

#include "data/gpt_dataset.h"
#include "trainer/config.h"

namespace lattice {

struct DataCoverage {
  std::vector<std::string> info;      // one line per split
  std::vector<std::string> warnings;  // an evaluation that reads its split more than once
};

// `train` and `valid` (nullptr without evaluation) as make_split_samples builds them: a GptSamples,
// or a BlendedSamples of GptSamples (whose share of a blend's samples is taken as its weight).
DataCoverage data_coverage(const Config& config, const SampleSource& train, const SampleSource* valid);

}  // namespace lattice
