// The process's device from the config and the launcher's local rank.
#include "trainer/device_selection.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/backend.h"
#include "kernels/error.h"
#include "trainer/launcher_env.h"
#include "trainer/model_builder.h"

namespace lattice {

namespace {

// The oldest GPUs the CUDA kernels are built for: SASS for sm_80 (which sm_86 and sm_89 run too) and
// sm_90a, PTX for compute_90 that later GPUs compile (kernels/cuda/BUILD.bazel). On an older GPU the
// first kernel would fail with CUDA's "no kernel image is available for execution on the device".
constexpr int kOldestComputeCapability = 80;

// "X.Y" from major * 10 + minor.
std::string capability_text(int compute_capability) {
  return fmt::format("{}.{}", compute_capability / 10, compute_capability % 10);
}

void check_compute_capability(const Backend& backend, int compute_capability) {
  if (compute_capability <= 0 || compute_capability >= kOldestComputeCapability) return;  // 0: not known
  throw InputError(fmt::format(
      "GPU '{}' has compute capability {}, and lattice's CUDA kernels need {} or later (built for sm_80, sm_90a "
      "and compute_90: A100, A10, L4, L40, H100, H200 and newer); run on such a GPU, or set device to \"cpu\"",
      backend.device_model != nullptr ? backend.device_model() : "?", capability_text(compute_capability),
      capability_text(kOldestComputeCapability)));
}

}  // namespace

void check_device_built(const Config& config) {
  const Device device = config_device(config);
  if (device != Device::kCpu && !has_backend(device)) {
    throw InputError("device: \"cuda\" but this binary was built without CUDA: build with --config=cuda "
                     "(bazel build --config=cuda //trainer:lattice), or set device to \"cpu\"");
  }
}

void select_training_device(const Config& config) {
  // Once per process: `lattice bench` selects before it measures the GEMM peak, then its training
  // session asks again for the same config; the device, TF32 and the log lines stay the first call's.
  static bool selected = false;
  if (selected) return;
  const Device device = config_device(config);
  if (device == Device::kCpu) {
    if (config.training.tf32) spdlog::warn("training.tf32 has no effect on the CPU: its matmuls are exact f32");
    if (config.training.gelu_fusion == Fusion::kOn) {
      spdlog::warn("training.gelu_fusion has no effect on the CPU: it has no fused GEMMs");
    }
    if (config.training.bias_grad_fusion == Fusion::kOn) {
      spdlog::warn("training.bias_grad_fusion has no effect on the CPU: it has no fused GEMMs");
    }
    if (!config.training.deterministic_attention) {
      spdlog::warn("training.deterministic_attention has no effect on the CPU: its attention is deterministic");
    }
    if (!config.training.gemm_autotune_dir.empty()) {
      spdlog::warn("training.gemm_autotune_dir has no effect on the CPU: its GEMM has one algorithm");
    }
    return;
  }
  check_device_built(config);
  const LauncherPlacement placement = launcher_placement();
  const Backend& backend = backend_for("select_training_device", device);
  spdlog::info("{}", backend.select_device(placement.local_rank, placement.local_size));
  backend.set_tf32(config.training.tf32);
  spdlog::info("matmul precision: {}", config.training.tf32 ? "TF32 tensor cores (training.tf32)" : "exact f32");
  const int compute_capability =
      backend.device_compute_capability != nullptr ? backend.device_compute_capability() : 0;
  check_compute_capability(backend, compute_capability);
  const FusionChoice gelu = gelu_fusion_choice(config, compute_capability);
  if (backend.set_gelu_fusion != nullptr) backend.set_gelu_fusion(gelu.on);
  if (config.model.activation == Activation::kGelu) {
    spdlog::info("{} (training.gelu_fusion {}: {})",
                 gelu.on ? "GELU in the MLP's GEMM epilogues" : "GELU in its own kernels, not in GEMM epilogues",
                 fusion_name(config.training.gelu_fusion), gelu.why);
  }
  const FusionChoice bias_grad = bias_grad_fusion_choice(config, compute_capability);
  if (backend.set_bias_grad_fusion != nullptr) backend.set_bias_grad_fusion(bias_grad.on);
  if (config.model.bias) {
    spdlog::info("{} (training.bias_grad_fusion {}: {})",
                 bias_grad.on ? "bias gradients in the weight-gradient GEMMs' epilogues"
                              : "bias gradients in their own kernel, not in GEMM epilogues",
                 fusion_name(config.training.bias_grad_fusion), bias_grad.why);
  }
  if (backend.set_deterministic_attention != nullptr) {
    backend.set_deterministic_attention(config.training.deterministic_attention);
    if (config.training.precision == Precision::kBf16 && !config.training.deterministic_attention) {
      spdlog::warn("bf16 attention backward: cuDNN's plain backward, dQ summed by atomics "
                   "(training.deterministic_attention false): runs no longer repeat bit for bit, resume included");
    }
  }
  selected = true;
}

namespace {
// The rule both fusion keys' "auto" ends with: the bf16 recipe on a GPU of compute capability 9.0
// and later. `what` names the fused kernels' own versions in the f32 reason.
FusionChoice bf16_from_hopper(const Config& config, int compute_capability, const std::string& what) {
  if (config.training.precision != Precision::kBf16) return {false, "f32 keeps our own " + what + ", within 1e-5 of the CPU"};
  if (compute_capability <= 0) return {false, "the device's compute capability is not known"};
  const std::string cc = "compute capability " + capability_text(compute_capability);
  if (compute_capability < 90) return {false, cc + ": cuBLASLt's fused epilogues pay from 9.0 (llm.c's default)"};
  return {true, "bf16 on " + cc};
}
}  // namespace

FusionChoice gelu_fusion_choice(const Config& config, int compute_capability) {
  if (config.training.gelu_fusion != Fusion::kAuto) return {config.training.gelu_fusion == Fusion::kOn, "as set"};
  if (config.training.precision == Precision::kBf16 && config.model.recompute == Recompute::kSelective) {
    return {false, "selective recompute repeats the GELU with our own kernel, so the forward uses it too"};
  }
  return bf16_from_hopper(config, compute_capability, "GELU kernels");
}

FusionChoice bias_grad_fusion_choice(const Config& config, int compute_capability) {
  if (config.training.bias_grad_fusion != Fusion::kAuto) {
    return {config.training.bias_grad_fusion == Fusion::kOn, "as set"};
  }
  return bf16_from_hopper(config, compute_capability, "bias-gradient kernel");
}

void start_gemm_autotune(const Config& config, int rank) {
  const Device device = config_device(config);
  if (device == Device::kCpu) return;
  const Backend& backend = backend_for("start_gemm_autotune", device);
  if (backend.set_gemm_autotune != nullptr) backend.set_gemm_autotune(config.training.gemm_autotune_dir, rank);
}

}  // namespace lattice
