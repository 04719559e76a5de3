// Flat offsets and property runs of a parameter list.
#include "parallel/param_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"

namespace lattice {
namespace {

std::vector<ParamRun> runs_of(const std::vector<ParamSpec>& specs, const std::vector<int64_t>& offsets,
                              bool ParamSpec::*flag) {
  std::vector<ParamRun> runs;
  for (size_t i = 0; i < specs.size(); ++i) {
    const bool value = specs[i].*flag;
    if (!runs.empty() && runs.back().value == value) {
      runs.back().last = i;
      runs.back().numel += specs[i].numel();
    } else {
      runs.push_back({i, i, offsets[i], specs[i].numel(), value});
    }
  }
  return runs;
}

}  // namespace

ParamLayout::ParamLayout(std::vector<ParamSpec> specs) : specs_(std::move(specs)), offsets_(specs_.size() + 1, 0) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    specs_[i].fill_defaults();
    offsets_[i + 1] = offsets_[i] + specs_[i].numel();
  }
  decay_runs_ = runs_of(specs_, offsets_, &ParamSpec::weight_decay);
  replica_runs_ = runs_of(specs_, offsets_, &ParamSpec::replica);
}

bool ParamLayout::contains(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return true;
  return false;
}

int64_t ParamLayout::largest_param_numel() const {
  int64_t largest = 0;
  for (size_t i = 0; i < count(); ++i) largest = std::max(largest, offset(i + 1) - offset(i));
  return largest;
}

size_t ParamLayout::index(const std::string& name) const {
  for (size_t i = 0; i < specs_.size(); ++i)
    if (specs_[i].name == name) return i;
  throw Error(fmt::format("no parameter named '{}'", name));
}

const std::vector<ParamRun>& ParamLayout::runs(ParamProperty property) const {
  return property == ParamProperty::kWeightDecay ? decay_runs_ : replica_runs_;
}

}  // namespace lattice
