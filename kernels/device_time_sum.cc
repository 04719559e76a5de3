// DeviceTimeSum: intervals read at the end.
#include "kernels/device_time_sum.h"

namespace lattice {

double DeviceTimeSum::seconds() const {
  double sum = 0;
  for (const auto& [start, end] : intervals_) sum += end.seconds_since(start);
  return sum;
}

}  // namespace lattice
