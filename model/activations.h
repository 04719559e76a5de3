// Memory a decoder layer keeps between forward and backward (one set per micro-batch slot), and
// the scratch its backward uses (shared by all layers). Both are allocated once, when the model
// is built, never inside a step.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"
#include "model/model_config.h"
#include "model/norm.h"

namespace lattice {

struct LayerActivations {
  Tensor input;          // [B, T, H] residual stream entering the layer
  Tensor norm1_out;      // [B, T, H]
  NormSaved norm1;
  Tensor q, k, v;        // [B, T, Hq|Hkv, D], after RoPE
  Tensor attn_out;       // [B, T, Hq, D]
  Tensor lse;            // [B, Hq, T]
  Tensor mid;            // [B, T, H] residual stream after attention
  Tensor norm2_out;      // [B, T, H]
  NormSaved norm2;
  Tensor up;             // [B, T, F] first MLP projection (pre-activation)
  Tensor gate;           // [B, T, F] SwiGLU gate projection
  Tensor act;            // [B, T, F] activation output

  void allocate(const ModelConfig& c, int64_t batch);
};

struct BackwardScratch {
  Tensor d_hidden;       // [B, T, H] gradient of a norm output
  Tensor d_mid;          // [B, T, H]
  Tensor d_attn;         // [B, T, Hq, D]
  Tensor dq, dk, dv;     // [B, T, Hq|Hkv, D]
  Tensor d_act, d_up, d_gate;  // [B, T, F]

  void allocate(const ModelConfig& c, int64_t batch);
};

}  // namespace lattice
