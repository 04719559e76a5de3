// ops::adamw_update: argument checks and backend dispatch for the fused AdamW step.
#include <fmt/format.h>

#include "kernels/adamw_checks.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

namespace lattice {

void check_adamw_operands(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                          const Tensor& exp_avg_sq, int64_t step, bool by_runs) {
  LATTICE_CHECK(param.defined() && grad.defined() && exp_avg.defined() && exp_avg_sq.defined(),
                "{}: every tensor must be defined", op);
  LATTICE_CHECK(param.dtype() == DType::kF32 && grad.dtype() == DType::kF32 && exp_avg.dtype() == DType::kF32 &&
                    exp_avg_sq.dtype() == DType::kF32,
                "{}: expected f32 tensors, got param {}, grad {}, exp_avg {}, exp_avg_sq {}", op, param.describe(),
                grad.describe(), exp_avg.describe(), exp_avg_sq.describe());
  LATTICE_CHECK(by_runs || (grad.numel() == param.numel() && exp_avg.numel() == param.numel() &&
                             exp_avg_sq.numel() == param.numel()),
                "{}: sizes differ: param {}, grad {}, exp_avg {}, exp_avg_sq {}", op, param.describe(),
                grad.describe(), exp_avg.describe(), exp_avg_sq.describe());
  LATTICE_CHECK(step >= 1, "{}: step is 1-based, got {}", op, step);
}

namespace ops {

void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWParams& p) {
  check_adamw_operands("adamw_update", param, grad, exp_avg, exp_avg_sq, p.step);
  // The parameters and both moments are read and written back, the gradient read.
  const OpScope timed("adamw_update", {&param, &grad, &exp_avg, &exp_avg_sq},
                      {.bytes = static_cast<double>(2 * (param.bytes() + exp_avg.bytes() + exp_avg_sq.bytes()) +
                                                    grad.bytes())});
  const Backend& be = backend_for("adamw_update", {&param, &grad, &exp_avg, &exp_avg_sq});
  be.adamw_update(param.f32(), grad.f32(), exp_avg.f32(), exp_avg_sq.f32(), param.numel(), p);
}

}  // namespace ops
}  // namespace lattice
