// The CPU backend's table: each entry is the kernels/cpu/ function of the same name.
#include "kernels/cpu/cpu_backend.h"

#include "kernels/cpu/activation.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cast.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/init.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"

namespace lattice::cpu {

namespace {

// Host memory is the device memory: copies to and from the host are plain copies.
constexpr Backend kCpuBackend{
    .device = Device::kCpu,
    .allocate = &Storage::host,
    .zero = &zero,
    .copy = &copy,
    .copy_to_host = &copy,
    .copy_from_host = &copy,
    .allocate_pinned = &Storage::host,
    .copy_from_pinned = &copy,
    .fill = &fill,
    .scale = &scale,
    .axpy = &axpy,
    .add = &add,
    .sum_squares = &sum_squares,
    .sum_to = &sum_to,
    .sum_squares_to = &sum_squares_to,
    .add_bias = &add_bias,
    .bias_backward = &bias_backward,
    .f32_to_bf16 = &f32_to_bf16,
    .bf16_to_f32 = &bf16_to_f32,
    .sgemm = &sgemm,
    // No bf16 GEMM to call: Debian's OpenBLAS 0.3.21 declares cblas_sbgemm in cblas.h, but
    // libopenblas.so is built without BUILD_BFLOAT16 and does not export it (nm -D). So bf16
    // matmuls are staged through sgemm (tests/kernels/bf16_matmul_bench measures the cost).
    .gemm_bf16 = nullptr,
    .check_indices = &check_indices,
    .embedding_forward = &embedding_forward,
    .embedding_backward = &embedding_backward,
    .add_position_embedding = &add_position_embedding,
    .position_embedding_backward = &position_embedding_backward,
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
    .attention_forward = &attention_forward,
    .attention_backward = &attention_backward,
    .cross_entropy_forward = &cross_entropy_forward,
    .cross_entropy_backward = &cross_entropy_backward,
    .cross_entropy_shard_max = &cross_entropy_shard_max,
    .cross_entropy_shard_sums = &cross_entropy_shard_sums,
    .cross_entropy_shard_loss = &cross_entropy_shard_loss,
    .cross_entropy_shard_backward = &cross_entropy_shard_backward,
    .fill_normal = &fill_normal,
    .adamw_update = &adamw_update,
};

}  // namespace

const Backend& backend() { return kCpuBackend; }

}  // namespace lattice::cpu
