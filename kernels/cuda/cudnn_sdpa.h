// bf16 causal self-attention (GQA) through cuDNN's SDPA (flash attention) graphs, built with the
// cudnn-frontend 1.32 headers (@cudnn_frontend, --config=cuda only). ops::attention_* on bf16 CUDA
// tensors run through it (the backend table's attention_*_bf16, kernels/cuda/cuda_backend.cc).
//
// Contract, the same as the fp32 kernels (kernels/cuda/attention.h) apart from the element type:
// q [B, T, Hq, D], k/v [B, T, Hkv, D], out [B, T, Hq, D] in our interleaved layout (cuDNN sees them
// as (B, H, S, D) with strides {T*H*D, D, H*D, 1}), bf16 storage, fp32 softmax and accumulation,
// causal (top-left diagonal, right bound 0), scale 1/sqrt(D), and lse [B, Hq, T] fp32 packed: the
// natural-log logsumexp of the scaled, masked scores (cuDNN's "Stats"). Hq must be a multiple of Hkv.
//
// Graph construction and validate() need no GPU: cudnn_sdpa_check() builds and validates the graphs
// for a given SM version on a GPU-less machine (tests/cuda/cudnn_sdpa_test). Only the execution
// functions touch a device; they are written for the GPU path but have not been run on one yet.
// Only kernels/cuda/cudnn_sdpa.cc includes the frontend headers (65-80 s to compile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cudnn.h>

#include "kernels/attention_shape.h"

namespace lattice::cuda {

// Which SDPA graph. The deterministic backward costs cuDNN a dP workspace quadratic in the
// sequence on Hopper before cuDNN 9.25 (b*h*ceil64(T)*ceil128(T)*2 bytes); the plain backward
// accumulates dQ with atomics (results may differ in the last bits from run to run).
enum class SdpaDirection { kForward, kBackward, kBackwardDeterministic };

const char* sdpa_direction_name(SdpaDirection direction);

// Builds the SDPA graph of `direction` for `shape` (bf16 I/O, fp32 compute) targeting
// sm_<sm_version> (90 for Hopper) and runs the frontend's validate(), without a GPU, a cudnnHandle_t
// or the graph cache. Returns "" when cuDNN accepts the graph; otherwise a message naming the
// direction, the shape (batch, seq, q_heads, kv_heads, head_dim) and the SM, followed by cuDNN's own
// error code and message. validate() checks the frontend's support surface (head_dim a multiple of
// 8 and at most 256 on sm_90, strides, GQA ratio, masks), not that an engine exists in the installed
// cuDNN: that is check_support(), which needs a handle (cudnn_sdpa_graph_workspace_bytes below).
std::string cudnn_sdpa_check(const AttentionShape& shape, SdpaDirection direction, int sm_version);
// The forward and both backward graphs; the first failure's message, or "".
std::string cudnn_sdpa_check_all(const AttentionShape& shape, int sm_version);

// "cuDNN 9.10.2 (frontend 1.32.0)": the library this process loaded (the one that chooses the SDPA
// engines and sizes their workspace), and the frontend it was built with.
std::string cudnn_versions();

// ---- Execution: needs a GPU (written, not yet run on one) --------------------------------------

// The process's cuDNN handle, created on first use and bound to compute_stream() (cudnnSetStream).
// Throws lattice::Error when cuDNN cannot create one (no GPU, driver too old).
cudnnHandle_t cudnn_handle();

// The graph of (shape, direction) for this process's device: built, checked against the installed
// cuDNN (check_support) and planned on first use, then cached; returns its workspace size in bytes.
// Throws lattice::Error (the same message as cudnn_sdpa_check) when cuDNN cannot run it.
size_t cudnn_sdpa_graph_workspace_bytes(cudnnHandle_t handle, const AttentionShape& shape, SdpaDirection direction);

// Why this process's cuDNN cannot run the graph of (shape, direction) on its GPU, or "" when it
// can: creates the handle and builds, checks and plans the graph (cached) as the first execution
// would, and returns that failure's message instead of throwing it. The backend asks before it
// executes, so that a shape the installed cuDNN refuses takes the f32 kernels (cuda_backend.cc).
std::string cudnn_sdpa_refusal(const AttentionShape& shape, SdpaDirection direction);

// out and lse overwritten. `workspace` holds at least cudnn_sdpa_graph_workspace_bytes(kForward)
// bytes from lattice::cuda::allocate (may be null when that is 0). Enqueued on the handle's stream.
void cudnn_sdpa_forward(cudnnHandle_t handle, const AttentionShape& shape, const uint16_t* q, const uint16_t* k,
                        const uint16_t* v, uint16_t* out, float* lse, void* workspace);
// dq, dk, dv overwritten (dk/dv at Hkv heads: cuDNN reduces the groups). `direction` is kBackward
// or kBackwardDeterministic; `workspace` as above for that direction.
void cudnn_sdpa_backward(cudnnHandle_t handle, const AttentionShape& shape, SdpaDirection direction,
                         const uint16_t* dout, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         const uint16_t* out, const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                         void* workspace);

// The same, with one shared workspace grown through lattice::cuda::allocate as graphs need more
// (llm.c's approach): for callers that do not manage workspace themselves. A run reserves what its
// shapes need before step 1 (cudnn_sdpa_reserve_workspace), so that its steps allocate nothing.
size_t cudnn_sdpa_workspace_bytes(const AttentionShape& shape, SdpaDirection direction);  // the process's handle
void cudnn_sdpa_reserve_workspace(size_t bytes);  // grows the shared workspace to at least `bytes` now
void cudnn_sdpa_forward(const AttentionShape& shape, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                        uint16_t* out, float* lse);
void cudnn_sdpa_backward(const AttentionShape& shape, SdpaDirection direction, const uint16_t* dout,
                         const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                         const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv);

}  // namespace lattice::cuda
