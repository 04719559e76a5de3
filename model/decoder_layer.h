// DecoderLayer: one pre-norm Transformer block, x + Attn(Norm(x)) then + MLP(Norm(.)), with
// causal (GQA) self-attention, optional RoPE, and a GELU or SwiGLU MLP. Explicit backward.
#pragma once

#include "model/activations.h"
#include "model/linear.h"
#include "model/model_config.h"
#include "model/norm.h"
#include "model/parameter_store.h"

namespace lattice {

class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& config, ParameterStore& params, int64_t index);

  // saved.input[B, T, H] -> out[B, T, H] (the caller writes the layer's input into saved.input,
  // typically as the previous layer's output, so the residual stream is never copied); saves
  // what backward needs in `saved`. out must not alias saved.input.
  void forward(LayerActivations& saved, Tensor& out) const;
  // d_out[B, T, H] -> d_x (overwritten; may alias d_out); parameter gradients accumulated.
  void backward(const Tensor& d_out, const LayerActivations& saved, BackwardScratch& scratch, Tensor& d_x);

 private:
  const ModelConfig& config_;
  Norm norm1_, norm2_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  Linear gate_proj_, up_proj_, down_proj_;
};

}  // namespace lattice
