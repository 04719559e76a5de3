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

std::vector<float> read_logits_row(const Tensor& logits, int64_t row, int64_t columns) {
  LATTICE_CHECK(logits.device() == Device::kCpu, "logits read-back from {} not built", logits.describe());
  LATTICE_CHECK(logits.rank() == 2 && row >= 0 && row < logits.dim(0) && columns >= 0 && columns <= logits.dim(1),
                "logits row {} columns [0, {}) outside {}", row, columns, logits.describe());
  const float* p = logits.f32() + row * logits.dim(1);
  return std::vector<float>(p, p + columns);
}

}  // namespace lattice
