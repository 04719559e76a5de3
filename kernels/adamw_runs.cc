// AdamW stepping over decay-flagged runs of flat buffers.
#include "kernels/adamw_runs.h"

#include "kernels/ops.h"

namespace lattice {

void adamw_update_runs(const Tensor& values, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                       const std::vector<AdamWRun>& runs, const AdamWHyper& hyper, double lr, int64_t step,
                       float grad_scale) {
  for (const AdamWRun& r : runs) {
    if (r.numel == 0) continue;
    const Shape shape{r.numel};
    Tensor p = values.slice_flat(r.offset, shape);
    Tensor g = grads.slice_flat(r.offset, shape);
    Tensor m = exp_avg.slice_flat(r.offset, shape);
    Tensor v = exp_avg_sq.slice_flat(r.offset, shape);
    ops::AdamWParams params{
        .lr = static_cast<float>(lr),
        .beta1 = static_cast<float>(hyper.beta1),
        .beta2 = static_cast<float>(hyper.beta2),
        .eps = static_cast<float>(hyper.eps),
        .weight_decay = r.decay ? static_cast<float>(hyper.weight_decay) : 0.0f,
        .step = step,
        .grad_scale = grad_scale,
    };
    ops::adamw_update(p, g, m, v, params);
  }
}

}  // namespace lattice
