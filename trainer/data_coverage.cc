// The epochs a run's splits cover (see data_coverage.h).
#include "trainer/data_coverage.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/blended_dataset.h"

namespace lattice {

namespace {

// One dataset's part of a split: its samples per epoch and the share of the split's samples it gives.
struct Part {
  const GptSamples* samples;
  double share;
};

std::vector<Part> parts_of(const SampleSource& source) {
  if (const auto* one = dynamic_cast<const GptSamples*>(&source)) return {{one, 1.0}};
  std::vector<Part> parts;
  if (const auto* blend = dynamic_cast<const BlendedSamples*>(&source))
    for (int64_t i = 0; i < blend->num_sources(); ++i)
      if (const auto* one = dynamic_cast<const GptSamples*>(&blend->source(i)))
        parts.push_back({one, blend->weights()[i]});
  return parts;
}

// "1402 samples of 129 tokens per epoch: 2.28 epochs", per dataset of a blend.
std::string describe(const std::vector<Part>& parts, int64_t samples, double* most_epochs) {
  std::string text;
  *most_epochs = 0;
  for (const Part& p : parts) {
    const int64_t per_epoch = p.samples->num_samples();
    const double epochs = p.share * static_cast<double>(samples) / static_cast<double>(per_epoch);
    *most_epochs = std::max(*most_epochs, epochs);
    if (!text.empty()) text += "; ";
    if (parts.size() > 1) text += fmt::format("{} ({}, weight {:.3g}): ", p.samples->label(),
                                              p.samples->dataset().prefix(), p.share);
    text += fmt::format("{} samples of {} tokens per epoch, {}{:.3g} epochs", per_epoch,
                        p.samples->seq_length() + 1, parts.size() > 1 ? "about " : "", epochs);
  }
  return text;
}

}  // namespace

DataCoverage data_coverage(const Config& c, const SampleSource& train, const SampleSource* valid) {
  DataCoverage d;
  const int64_t B = c.training.global_batch_size;
  const int64_t run_samples = c.training.train_iters * B;
  double epochs = 0;
  const std::vector<Part> train_parts = parts_of(train);
  if (!train_parts.empty())
    d.info.push_back(fmt::format("data: the run reads {} train samples (training.train_iters {} × global batch {}): {}",
                                 run_samples, c.training.train_iters, B, describe(train_parts, run_samples, &epochs)));
  if (valid == nullptr) return d;
  const int64_t eval_samples = c.training.eval_iters * B;
  const std::vector<Part> valid_parts = parts_of(*valid);
  if (valid_parts.empty()) return d;
  d.info.push_back(fmt::format("data: each evaluation reads {} validation samples (training.eval_iters {} × global "
                               "batch {}): {}",
                               eval_samples, c.training.eval_iters, B, describe(valid_parts, eval_samples, &epochs)));
  if (epochs > 1) {
    int64_t fewest = valid_parts.front().samples->num_samples();
    for (const Part& p : valid_parts) fewest = std::min(fewest, p.samples->num_samples());
    d.warnings.push_back(fmt::format(
        "an evaluation reads its validation split {:.3g} times over (training.eval_iters {} × global batch {} = {} "
        "samples, the split holds {} per epoch): the validation loss counts the same samples again and is no "
        "better an estimate for it; lower training.eval_iters{}, or give validation more documents (data.split)",
        epochs, c.training.eval_iters, B, eval_samples, fewest,
        fewest >= B ? fmt::format(" to {} or fewer", fewest / B) : std::string()));
  }
  return d;
}

}  // namespace lattice
