// Host read-back of the step's loss.
#include "trainer/step_readback.h"

#include "kernels/error.h"

namespace lattice {

double read_mean_loss(const Tensor& token_losses) {
  LATTICE_CHECK(token_losses.device() == Device::kCpu, "loss read-back from {} not built", token_losses.describe());
  const float* p = token_losses.f32();
  const int64_t n = token_losses.numel();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i];
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

}  // namespace lattice
