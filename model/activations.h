// Memory a decoder layer keeps between forward and backward (one set per micro-batch slot), and
// the scratch its forward and backward use (shared by all layers of a chunk). With activation
// recomputation a slot holds only some groups of LayerActivations and the rest lives in one set
// per chunk that backward refills layer by layer (model.recompute). All are allocated
// once, when the model is built, never inside a step. Shapes are this rank's: N = B·T tokens
// inside the tensor-parallel regions, n = N (or N/tp with sequence parallelism) on the residual
// stream, Hq/tp and Hkv/tp heads, F/tp MLP features.
#pragma once

#include <cstdint>

#include "kernels/device_context.h"
#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/norm.h"

namespace lattice {

struct LayerActivations {
  // Groups of the tensors below, a bit mask. kCheap is what selective recomputation redoes
  // (norms and the MLP activation: no GEMM); kCore the GEMM and attention outputs.
  static constexpr unsigned kInput = 1, kCheap = 2, kCore = 4, kAll = kInput | kCheap | kCore;

  Tensor input;          // [n, H] residual stream entering the layer
  Tensor norm1_out;      // [N, H] attention input (all tokens: gathered under SP)
  NormSaved norm1;       // [n]
  Tensor q, k, v;        // [B, T, Hq/tp|Hkv/tp, D], after RoPE
  Tensor attn_out;       // [B, T, Hq/tp, D]
  Tensor lse;            // [B, Hq/tp, T]
  Tensor mid;            // [n, H] residual stream after attention
  Tensor norm2_out;      // [N, H] MLP input (gathered under SP)
  NormSaved norm2;       // [n]
  Tensor up;             // [N, F/tp] first MLP projection (pre-activation)
  Tensor gate;           // [N, F/tp] SwiGLU gate projection
  Tensor act;            // [N, F/tp] activation output

  // The tensors of `groups`, activations in `dtype` (the parameters' compute dtype), the
  // statistics (lse, norm mean/rstd) in f32; the others stay undefined.
  void allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout, int64_t batch, DType dtype,
                unsigned groups);
  // Points the tensors of `groups` at those of `from` (no copy).
  void share(const LayerActivations& from, unsigned groups);
};

struct LayerScratch {
  // Backward.
  Tensor d_hidden;       // [N, H] gradient of a norm output (partial over tp before its reduction)
  Tensor d_mid;          // [n, H]
  Tensor d_attn;         // [B, T, Hq/tp, D]
  Tensor dq, dk, dv;     // [B, T, Hq/tp|Hkv/tp, D]
  Tensor d_act, d_up, d_gate;  // [N, F/tp]; d_act and d_gate for SwiGLU only
  // Sequence parallelism only (undefined otherwise).
  Tensor norm_local;     // [n, H] forward: a norm's output before it is gathered
  Tensor partial;        // [N, H] forward: row-parallel partial sums before the reduce-scatter
  Tensor d_full;         // [N, H] backward: gathered gradient of a row-parallel output
  Tensor d_local;        // [n, H] backward: reduce-scattered gradient of a norm output

  void allocate(const DeviceContext& ctx, const ModelConfig& c, const ModelLayout& layout, int64_t batch, DType dtype);
};

}  // namespace lattice
