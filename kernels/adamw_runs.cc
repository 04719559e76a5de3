// AdamW stepping over decay-flagged runs of flat buffers.
#include "kernels/adamw_runs.h"

#include "kernels/adamw_checks.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "kernels/op_profile.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

// The per-run loop of backends without a fused entry, then the copy one cast per stretch of
// adjacent runs (the whole buffer when the runs tile it, as unsharded).
void adamw_update_each_run(const Tensor& values, const Tensor& grads, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const std::vector<AdamWRun>& runs,
                           const ops::AdamWParams& params, const Tensor& copy, ValuesAt values_at) {
  for (const AdamWRun& r : runs) {
    const Shape shape{r.numel};
    Tensor p = values.slice_flat(values_at == ValuesAt::kGradients ? r.grads_at() : r.offset, shape);
    Tensor g = grads.slice_flat(r.grads_at(), shape);
    Tensor m = exp_avg.slice_flat(r.offset, shape);
    Tensor v = exp_avg_sq.slice_flat(r.offset, shape);
    ops::AdamWParams run_params = params;
    run_params.weight_decay = r.decay ? params.weight_decay : 0.0f;
    ops::adamw_update(p, g, m, v, run_params);
  }
  if (!copy.defined()) return;
  for (size_t i = 0; i < runs.size();) {
    const int64_t begin = runs[i].offset, copy_begin = runs[i].grads_at();
    int64_t n = runs[i].numel;
    for (++i; i < runs.size() && runs[i].offset == begin + n && runs[i].grads_at() == copy_begin + n; ++i)
      n += runs[i].numel;
    Tensor dst = copy.slice_flat(copy_begin, {n});
    ops::cast(values.slice_flat(begin, {n}), dst);
  }
}

}  // namespace

void adamw_update_runs(const Tensor& values, const Tensor& grads, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                       const std::vector<AdamWRun>& runs, const AdamWHyper& hyper, double lr, int64_t step,
                       float grad_scale, const Tensor& copy, ValuesAt values_at) {
  const bool values_at_grads = values_at == ValuesAt::kGradients;
  LATTICE_CHECK(!(values_at_grads && copy.defined()),
                "adamw_update_runs: values beside the gradients take no copy (the copy would be the values)");
  LATTICE_CHECK(exp_avg.numel() == exp_avg_sq.numel(), "adamw_update_runs: moments {} and {} differ in size",
                exp_avg.describe(), exp_avg_sq.describe());
  std::vector<AdamWRun> nonempty;
  for (const AdamWRun& r : runs) {
    if (r.numel == 0) continue;
    LATTICE_CHECK(r.offset >= 0 && r.numel > 0 && r.offset + r.numel <= exp_avg.numel(),
                  "adamw_update_runs: run [{}, {}) outside the moments of {} elements", r.offset, r.offset + r.numel,
                  exp_avg.numel());
    const int64_t value_at = values_at_grads ? r.grads_at() : r.offset;
    LATTICE_CHECK(value_at + r.numel <= values.numel(),
                  "adamw_update_runs: run's values [{}, {}) outside the {} values", value_at, value_at + r.numel,
                  values.numel());
    LATTICE_CHECK(r.grads_at() + r.numel <= grads.numel(),
                  "adamw_update_runs: run's gradients [{}, {}) outside the {} gradients", r.grads_at(),
                  r.grads_at() + r.numel, grads.numel());
    nonempty.push_back(r);
  }
  const ops::AdamWParams params{
      .lr = static_cast<float>(lr),
      .beta1 = static_cast<float>(hyper.beta1),
      .beta2 = static_cast<float>(hyper.beta2),
      .eps = static_cast<float>(hyper.eps),
      .weight_decay = static_cast<float>(hyper.weight_decay),
      .step = step,
      .grad_scale = grad_scale,
  };
  if (copy.defined()) {
    LATTICE_CHECK(copy.numel() == grads.numel() && copy.device() == values.device() &&
                      (copy.dtype() == DType::kF32 || copy.dtype() == DType::kBF16),
                  "adamw_update_runs: the copy {} must be f32 or bf16 with the {} elements of the gradients {}",
                  copy.describe(), grads.numel(), grads.describe());
  }
  const Backend& be = backend_for("adamw_update_runs", {&values, &grads, &exp_avg, &exp_avg_sq});
  if (be.adamw_update_runs == nullptr || nonempty.empty()) {
    adamw_update_each_run(values, grads, exp_avg, exp_avg_sq, nonempty, params, copy, values_at);
    return;
  }
  check_adamw_operands("adamw_update_runs", values, grads, exp_avg, exp_avg_sq, step, /*by_runs=*/true);
  int64_t numel = 0;
  for (const AdamWRun& r : nonempty) numel += r.numel;
  // Values and both moments read and written back, the gradient read, the copy written.
  const double copy_bytes = copy.defined() ? static_cast<double>(dtype_size(copy.dtype())) : 0.0;
  const OpScope timed("adamw_update_runs", {&values, &grads, &exp_avg, &exp_avg_sq},
                      {.bytes = static_cast<double>(numel) * (2.0 * 3.0 * 4.0 + 4.0 + copy_bytes)});
  be.adamw_update_runs(values.f32(), grads.f32(), exp_avg.f32(), exp_avg_sq.f32(), nonempty.data(), nonempty.size(),
                       params, DataOut{copy.defined() ? copy.raw() : nullptr, copy.dtype() == DType::kBF16},
                       values_at_grads);
}

}  // namespace lattice
