// The CUDA backend's table: kernels/cuda/*.cu kernels, cuBLASLt matmul, the runtime's memory and
// events, and the few entries composed here (index checks that throw, initialization).
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <cublasLt.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/cpu/init.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_gemm.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matmul_autotune.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda_workspace.h"
#include "kernels/error.h"
#include "kernels/f32_staging.h"

namespace lattice::cuda {

namespace {

std::shared_ptr<Storage> allocate_storage(size_t bytes) {
  return std::make_shared<Storage>(Device::kCuda, allocate(bytes), bytes, &release);
}

// Host memory (Device::kCpu), page-locked so that copy_from_pinned is a DMA the host does not wait for.
std::shared_ptr<Storage> allocate_pinned_storage(size_t bytes) {
  return std::make_shared<Storage>(Device::kCpu, allocate_pinned(bytes), bytes, &free_pinned);
}

// The CPU's message, word for word (kernels/cpu/embedding.cc), so errors read the same on both.
void check_indices(const char* op, const char* what, const int32_t* ids, int64_t n, int64_t vocab) {
  int32_t bad_id = 0;
  const int64_t bad = first_bad_index(ids, n, vocab, &bad_id);
  if (bad >= 0) throw Error(fmt::format("{}: {} {} at position {} is outside [0, {})", op, what, bad_id, bad, vocab));
}

// Initialization runs once per parameter: it draws on the host with the CPU kernel and copies,
// so every device and layout starts from bit-identical weights (CUDA's double log/sin/cos are
// not guaranteed to round as glibc's do).
void fill_normal_via_host(float* x, const std::vector<int64_t>& box_shape, const std::vector<int64_t>& global_shape,
                          const std::vector<int64_t>& box_offset, uint64_t seed, uint64_t stream, float std) {
  int64_t n = 1;
  for (const int64_t d : box_shape) n *= d;
  std::vector<float> host(static_cast<size_t>(n));
  cpu::fill_normal(host.data(), box_shape, global_shape, box_offset, seed, stream, std);
  copy_from_host(host.data(), x, n * static_cast<int64_t>(sizeof(float)));
}

// bf16 attention: cuDNN's SDPA (flash attention) with the deterministic backward, so that a run
// gives the same bits every time (training.deterministic_attention false: its plain backward). The
// f32 kernels below take what cuDNN does not: a head dim that is not a multiple of 8 or above 256, a
// graph the installed cuDNN refuses on this GPU (no engine, cuDNN too old for the frontend's graph),
// and LATTICE_CUDA_ATTENTION=flash|gemm (the tests' choice). Either of the first two is logged once
// per shape with the reason, as Transformer Engine falls back from its fused attention;
// LATTICE_CUDA_ATTENTION=cudnn makes them errors.
std::atomic<bool> deterministic_attention{true};
void set_deterministic_attention(bool deterministic) { deterministic_attention = deterministic; }
SdpaDirection backward_direction() {
  return deterministic_attention ? SdpaDirection::kBackwardDeterministic : SdpaDirection::kBackward;
}

bool cudnn_runs(const AttentionShape& s, SdpaDirection direction) {
  const char* forced = std::getenv("LATTICE_CUDA_ATTENTION");
  const bool required = forced != nullptr && std::strcmp(forced, "cudnn") == 0;
  if (forced != nullptr && *forced != '\0' && !required) return false;
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, SdpaDirection>, std::string> refusals;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::tuple{s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, direction};
  auto it = refusals.find(key);
  if (it == refusals.end()) {
    std::string why = s.head_dim % 8 != 0 || s.head_dim > 256
                          ? fmt::format("head_dim={}: cuDNN SDPA needs head_dim a multiple of 8 and at most 256",
                                        s.head_dim)
                          : cudnn_sdpa_refusal(s, direction);
    if (!why.empty() && !required) {
      spdlog::warn("bf16 attention {} takes the f32 attention kernels (slower) for this shape: {}",
                   direction == SdpaDirection::kForward ? "forward" : "backward", why);
    }
    it = refusals.emplace(key, std::move(why)).first;
  }
  if (!it->second.empty() && required) {
    throw Error(fmt::format("LATTICE_CUDA_ATTENTION=cudnn, but {}", it->second));
  }
  return it->second.empty();
}

bool attention_forward_bf16(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                            const AttentionShape& s) {
  if (!cudnn_runs(s, SdpaDirection::kForward)) return false;
  cudnn_sdpa_forward(s, q, k, v, out, lse);
  return true;
}

bool attention_backward_bf16(const uint16_t* dout, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                             const uint16_t* out, const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                             const AttentionShape& s) {
  const SdpaDirection direction = backward_direction();
  if (!cudnn_runs(s, direction)) return false;
  cudnn_sdpa_backward(s, direction, dout, q, k, v, out, lse, dq, dk, dv);
  return true;
}

// cuDNN's workspace for the forward and the backward (backward_direction()) of shape s; nullopt for
// a direction cuDNN refuses (the f32 kernels run it).
struct SdpaWorkspaces {
  std::optional<size_t> forward, backward;
  size_t shared() const { return std::max(forward.value_or(0), backward.value_or(0)); }  // one buffer serves both
};
SdpaWorkspaces sdpa_workspaces(const AttentionShape& s) {
  const auto bytes = [&](SdpaDirection d) -> std::optional<size_t> {
    if (!cudnn_runs(s, d)) return std::nullopt;
    return cudnn_sdpa_workspace_bytes(s, d);
  };
  return {bytes(SdpaDirection::kForward), bytes(backward_direction())};
}

// What bf16 attention of shape s takes beside its operands: cuDNN's shared workspace (cuDNN before
// 9.25 holds the deterministic backward's dP in it on Hopper); and for a direction cuDNN refuses,
// the f32 kernels' scratch and the f32 copies of its operands that F32Staging keeps (4 forward, 8
// backward, each at most q's size).
int64_t attention_bf16_workspace_bytes(const AttentionShape& s) {
  const SdpaWorkspaces w = sdpa_workspaces(s);
  const int64_t staged = !w.backward ? F32Staging::kMaxStaged : !w.forward ? 4 : 0;
  const int64_t cudnn = static_cast<int64_t>(w.shared());
  if (staged == 0) return cudnn;
  const int64_t q_bytes = s.batch * s.seq * s.q_heads * s.head_dim * int64_t{sizeof(float)};
  return cudnn + f32_attention_workspace_bytes(s) + staged * q_bytes;
}

// cuDNN's workspace for shape s allocated now (a run's steps then allocate nothing; the f32
// fallback's staging still grows at its first call).
void reserve_attention_bf16_workspace(const AttentionShape& s) {
  const SdpaWorkspaces w = sdpa_workspaces(s);
  cudnn_sdpa_reserve_workspace(w.shared());
  spdlog::info("cuDNN SDPA workspace: {:.1f} MiB, allocated before step 1 (forward {}, {} {}; batch {}, seq {}, "
               "heads {}/{}, head dim {})",
               w.shared() / 1048576.0, w.forward ? fmt::format("{:.1f} MiB", *w.forward / 1048576.0) : "f32 kernels",
               deterministic_attention ? "deterministic backward" : "backward",
               w.backward ? fmt::format("{:.1f} MiB", *w.backward / 1048576.0) : "f32 kernels", s.batch, s.seq,
               s.q_heads, s.kv_heads, s.head_dim);
}

// The device line, with the libraries that choose the GEMM algorithms and the attention engines:
// what two runs' speeds, or a bug report, need to name.
std::string select_device_naming_libraries(int local_rank, int local_size) {
  const size_t lt = cublasLtGetVersion();  // major·10000 + minor·100 + patch
  return fmt::format("{}, cuBLASLt {}.{}.{}, {}", select_device(local_rank, local_size), lt / 10000, lt / 100 % 100,
                     lt % 100, cudnn_versions());
}

// Attention: the GEMM path (cuBLAS speed, tensor cores with TF32) when its [T, T] score buffers
// fit, else the flash kernel (O(T) memory). LATTICE_CUDA_ATTENTION=flash|gemm forces one, so the
// tests check both against the CPU.
bool use_attention_gemm(const AttentionShape& s) {
  const char* forced = std::getenv("LATTICE_CUDA_ATTENTION");
  if (forced != nullptr && std::strcmp(forced, "flash") == 0) return false;
  if (forced != nullptr && std::strcmp(forced, "gemm") == 0) return true;
  return attention_gemm_fits(s);
}

void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                       const AttentionShape& s) {
  if (use_attention_gemm(s)) {
    attention_forward_gemm(q, k, v, out, lse, s);
  } else {
    attention_forward_flash(q, k, v, out, lse, s);
  }
}

void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, float* dq, float* dk, float* dv, const AttentionShape& s) {
  if (use_attention_gemm(s)) {
    attention_backward_gemm(dout, q, k, v, out, lse, dq, dk, dv, s);
  } else {
    attention_backward_flash(dout, q, k, v, out, lse, dq, dk, dv, s);
  }
}

std::shared_ptr<void> record_event() { return record_on(compute_stream()); }

void compute_wait(void* event) {
  LATTICE_CUDA_CHECK(cudaStreamWaitEvent(compute_stream(), static_cast<cudaEvent_t>(event), 0));
}

// On the copy stream after the compute stream's work so far: the snapshot reads the values that
// work leaves, while the next step's kernels run beside it. The source must stay allocated until
// the returned event completes.
std::shared_ptr<void> copy_to_pinned_async(const void* src, void* pinned_dst, int64_t bytes) {
  const std::shared_ptr<void> after = record_event();
  LATTICE_CUDA_CHECK(cudaStreamWaitEvent(copy_stream(), static_cast<cudaEvent_t>(after.get()), 0));
  if (bytes > 0) {
    LATTICE_CUDA_CHECK(cudaMemcpyAsync(pinned_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost,
                                       copy_stream()));
  }
  return record_on(copy_stream());
}

bool event_query(void* event) {
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it so the next launch check does not see it
    return false;
  }
  LATTICE_CUDA_CHECK(err);
  return true;
}

void event_synchronize(void* event) { LATTICE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event))); }

double event_seconds(void* start, void* end) {
  // Both must have completed; the later one (end) implies the earlier.
  LATTICE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(start)));
  LATTICE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end)));
  float ms = 0;
  LATTICE_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return ms / 1e3;
}

// The data-operand kernels: every one loads and stores f32 or bf16 itself, so bf16 training reads
// and writes bf16 activations without F32Staging's scratch passes (kernels/typed_kernels.h).
constexpr TypedKernels kCudaTyped{
    .fill = &fill,
    .scale = &scale,
    .axpy = &axpy,
    .add = &add,
    .add_bias = &add_bias,
    .bias_backward = &bias_backward,
    .bias_backward_group = &bias_backward_group,
    .embedding_forward_shard = &embedding_forward_shard,
    .embedding_backward_shard = &embedding_backward_shard,
    .add_position_embedding_tokens = &add_position_embedding_tokens,
    .position_embedding_backward_tokens = &position_embedding_backward_tokens,
    .layernorm_forward = &layernorm_forward,
    .layernorm_backward = &layernorm_backward,
    .rmsnorm_forward = &rmsnorm_forward,
    .rmsnorm_backward = &rmsnorm_backward,
    .gelu_forward = &gelu_forward,
    .gelu_backward = &gelu_backward,
    .swiglu_forward = &swiglu_forward,
    .swiglu_backward = &swiglu_backward,
    .rope = &rope,
    .cross_entropy_forward = &cross_entropy_forward,
    .cross_entropy_shard_max = &cross_entropy_shard_max,
    .cross_entropy_shard_sums = &cross_entropy_shard_sums,
    .cross_entropy_shard_backward = &cross_entropy_shard_backward,
    .cross_entropy_forward_backward = &cross_entropy_forward_backward,
};

// The f32 entries of the ops kCudaTyped covers stay null: ops.cc calls the typed ones for every dtype.
constexpr Backend kCudaBackend{
    .device = Device::kCuda,
    .allocate = &allocate_storage,
    .zero = &zero,
    .copy = &copy,
    .copy_to_host = &copy_to_host,
    .copy_from_host = &copy_from_host,
    .allocate_pinned = &allocate_pinned_storage,
    .copy_from_pinned = &copy_from_pinned,
    .copy_to_pinned_async = &copy_to_pinned_async,
    .synchronize = &synchronize,
    .record_event = &record_event,
    .event_query = &event_query,
    .event_synchronize = &event_synchronize,
    .compute_wait = &compute_wait,
    .event_seconds = &event_seconds,
    .select_device = &select_device_naming_libraries,
    .device_model = &device_model,
    .device_compute_capability = &device_compute_capability,
    .device_uuid = &device_uuid,
    .device_memory_bytes = &device_memory_bytes,
    .peak_memory_bytes = &pool_peak_bytes,
    .memory_outside_pool_bytes = &used_outside_pool_bytes,
    .set_tf32 = &set_tf32,
    .set_gelu_fusion = &set_gelu_fusion,
    .set_bias_grad_fusion = &set_bias_grad_fusion,
    .set_deterministic_attention = &set_deterministic_attention,
    .set_gemm_autotune = &autotune::configure,
    .set_profiler_capture = &set_profiler_capture,
    .sum_squares = &sum_squares,
    .sum_to = &sum_to,
    .sum_squares_to = &sum_squares_to,
    .f32_to_bf16 = &f32_to_bf16,
    .bf16_to_f32 = &bf16_to_f32,
    .sgemm = &sgemm,
    .gemm_bf16 = &gemm_bf16,
    .gemm_bias = &gemm_bias,
    .gemm_batched = &gemm_batched,
    .gemm_residual = &gemm_residual,
    .gemm_bias_grad = &gemm_bias_grad,
    .gemm_gelu = &gemm_gelu,
    .gemm_dgelu = &gemm_dgelu,
    .check_indices = &check_indices,
    .attention_forward = &attention_forward,
    .attention_backward = &attention_backward,
    .attention_forward_bf16 = &attention_forward_bf16,
    .attention_backward_bf16 = &attention_backward_bf16,
    .attention_bf16_workspace_bytes = &attention_bf16_workspace_bytes,
    .reserve_attention_bf16_workspace = &reserve_attention_bf16_workspace,
    .cross_entropy_shard_loss = &cross_entropy_shard_loss,
    .fill_normal = &fill_normal_via_host,
    .adamw_update = &adamw_update,
    .adamw_update_runs = &adamw_update_runs,
    .typed = &kCudaTyped,
};

// Registered when the binary starts: set_backend only stores the pointer.
[[maybe_unused]] const bool kRegistered = (set_backend(Device::kCuda, &kCudaBackend), true);

}  // namespace

const Backend& backend() { return kCudaBackend; }

}  // namespace lattice::cuda
