// The one place per step where device values come back to the host: the summed token losses
// of the step and the squared gradient norm.
#pragma once

#include "kernels/tensor.h"

namespace lattice {

// Mean of all token losses in `token_losses` (f32), summed in double.
double read_mean_loss(const Tensor& token_losses);

}  // namespace lattice
