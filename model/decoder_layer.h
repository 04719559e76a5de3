// DecoderLayer: one pre-norm Transformer block, x + Attn(Norm(x)) then + MLP(Norm(.)), with
// causal (GQA) self-attention, optional RoPE, and a GELU or SwiGLU MLP. Explicit backward.
// Tensor-parallel (Megatron): q/k/v and gate/up are column-parallel (this rank's whole heads and
// F/tp features), o_proj and down_proj row-parallel; each block enters its tensor-parallel
// region after the norm (copy-to-region, or SP gather of the tokens) and leaves it through the
// row-parallel reduction (all-reduce, or SP reduce-scatter of the tokens).
#pragma once

#include "model/activations.h"
#include "model/linear.h"
#include "model/model_config.h"
#include "model/model_layout.h"
#include "model/norm.h"
#include "model/parameter_store.h"
#include "parallel/tensor_parallel.h"

namespace lattice {

class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params, TensorParallel tp,
               int64_t index);

  // saved.input[n, H] -> out[n, H] (the caller writes the layer's input into saved.input,
  // typically as the previous layer's output, so the residual stream is never copied); saves
  // what backward needs in `saved`. out must not alias saved.input.
  void forward(LayerActivations& saved, LayerScratch& scratch, Tensor& out) const;
  // Before backward under activation recomputation: refills what `mode` did not keep from
  // saved's kept tensors (full: everything but the input; selective: the norm outputs and
  // statistics, the MLP activation). Same ops on the same inputs as forward, so bit-identical;
  // under sequence parallelism the norm outputs are gathered again.
  void recompute(LayerActivations& saved, LayerScratch& scratch, Recompute mode) const;
  // d_out[n, H] -> d_x (overwritten; may alias d_out); parameter gradients accumulated.
  void backward(const Tensor& d_out, const LayerActivations& saved, LayerScratch& scratch, Tensor& d_x);

 private:
  // The part of forward that fills `saved` (all but down_proj and the last residual add, which
  // write `out`): what full recomputation reruns.
  void save_activations(LayerActivations& saved, LayerScratch& scratch) const;
  // saved.act from saved.up (and saved.gate).
  void activate(LayerActivations& saved) const;
  // q, k, v [N, .] = projections of the attention input x: one ops::matmul_group where their shapes
  // match (MHA), else q alone and k, v as one group (GQA). And their weight gradients likewise.
  void project_qkv(const Tensor& x, Tensor& q, Tensor& k, Tensor& v) const;
  void qkv_weight_grads(const Tensor& x, const Tensor& dq, const Tensor& dk, const Tensor& dv);
  // norm(x) into the region's input `region_in` [N, H] (SP: norm on the local tokens, gathered).
  void enter_region(const Norm& norm, const Tensor& x, Tensor& region_in, NormSaved& stats,
                    LayerScratch& scratch) const;
  // Starts reducing the region input's gradient d_region [N, H] (partial over tp): all-reduce in
  // place, or SP reduce-scatter into scratch.d_local. Returns the handle and the tensor that will
  // hold the norm output's gradient.
  CommHandle reduce_region_grad(LayerScratch& scratch, Tensor& d_norm_out) const;

  const ModelConfig& config_;
  TensorParallel tp_;
  Norm norm1_, norm2_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  Linear gate_proj_, up_proj_, down_proj_;
};

}  // namespace lattice
