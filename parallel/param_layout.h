// ParamLayout: where each parameter lies in the flat parameter/gradient buffers (parameter i
// follows parameter i - 1), and the maximal runs of parameters that share a property.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/param_spec.h"

namespace lattice {

// The per-parameter flags that runs group by.
enum class ParamProperty { kWeightDecay, kReplica };

// Parameters [first, last] (adjacent), flat elements [offset, offset + numel), all with the
// property equal to `value`.
struct ParamRun {
  size_t first = 0;
  size_t last = 0;
  int64_t offset = 0;
  int64_t numel = 0;
  bool value = false;
};

class ParamLayout {
 public:
  // Fills the specs' defaults (ParamSpec::fill_defaults) and lays them out in order.
  explicit ParamLayout(std::vector<ParamSpec> specs);

  size_t count() const { return specs_.size(); }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  // Flat offset of parameter i; offset(count()) is the total.
  int64_t offset(size_t i) const { return offsets_[i]; }
  int64_t numel() const { return offsets_.back(); }
  // The largest parameter's elements (0 without parameters): what a per-parameter scratch holds.
  int64_t largest_param_numel() const;

  // Index of a parameter by name; throws lattice::Error when absent.
  size_t index(const std::string& name) const;
  bool contains(const std::string& name) const;

  // Maximal runs of adjacent parameters with the same value of `property`, in flat order; they
  // cover every parameter once (AdamW steps the weight-decay runs; the grad norm skips replicas).
  const std::vector<ParamRun>& runs(ParamProperty property) const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<int64_t> offsets_;
  std::vector<ParamRun> decay_runs_;
  std::vector<ParamRun> replica_runs_;
};

}  // namespace lattice
