// ops::adamw_update: argument checks and backend dispatch for the fused AdamW step.
#include <fmt/format.h>

#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

namespace lattice::ops {

void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWParams& p) {
  LATTICE_CHECK(param.defined() && grad.defined() && exp_avg.defined() && exp_avg_sq.defined(),
                "adamw_update: every tensor must be defined");
  // The parameters and both moments are read and written back, the gradient read.
  const OpScope timed("adamw_update", {&param, &grad, &exp_avg, &exp_avg_sq},
                      {.bytes = static_cast<double>(2 * (param.bytes() + exp_avg.bytes() + exp_avg_sq.bytes()) +
                                                    grad.bytes())});
  const Backend& be = backend_for("adamw_update", {&param, &grad, &exp_avg, &exp_avg_sq});
  LATTICE_CHECK(param.dtype() == DType::kF32 && grad.dtype() == DType::kF32 && exp_avg.dtype() == DType::kF32 &&
                    exp_avg_sq.dtype() == DType::kF32,
                "adamw_update: expected f32 tensors, got param {}, grad {}, exp_avg {}, exp_avg_sq {}",
                param.describe(), grad.describe(), exp_avg.describe(), exp_avg_sq.describe());
  LATTICE_CHECK(grad.numel() == param.numel() && exp_avg.numel() == param.numel() &&
                    exp_avg_sq.numel() == param.numel(),
                "adamw_update: sizes differ: param {}, grad {}, exp_avg {}, exp_avg_sq {}", param.describe(),
                grad.describe(), exp_avg.describe(), exp_avg_sq.describe());
  LATTICE_CHECK(p.step >= 1, "adamw_update: step is 1-based, got {}", p.step);
  be.adamw_update(param.f32(), grad.f32(), exp_avg.f32(), exp_avg_sq.f32(), param.numel(), p);
}

}  // namespace lattice::ops
