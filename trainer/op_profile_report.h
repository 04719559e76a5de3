// The table `lattice bench --profile-ops` prints: device time per op and operand shapes, per step,
// against the step time, with what no op accounts for, and each row's achieved GB/s and TFLOP/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_profile.h"

namespace lattice {

// `rows` (OpProfile::stop, the most time first) summed over `steps` steps, shown per step against
// `step_s` seconds; the first `max_rows` rows, then one line for the rest.
std::string format_op_profile(const std::vector<OpTime>& rows, int64_t steps, double step_s, size_t max_rows);

}  // namespace lattice
