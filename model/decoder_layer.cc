// DecoderLayer forward/backward.
#include "model/decoder_layer.h"

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/ops.h"

namespace lattice {

namespace {

// [.., cols] viewed as a matrix of `cols` columns: the layout ops::matmul expects.
Tensor matrix(const Tensor& t, int64_t cols) { return t.view({t.numel() / cols, cols}); }

}  // namespace

DecoderLayer::DecoderLayer(const ModelConfig& config, const ModelLayout& layout, ParameterStore& params,
                           TensorParallel tp, int64_t index)
    : config_(config), tp_(tp) {
  LATTICE_CHECK(tp.size() == layout.tp_size && tp.rank() == layout.tp_rank &&
                    tp.sequence_parallel == layout.sequence_parallel,
                "tp group (rank {} of {}, sp {}) does not match the layout (rank {} of {}, sp {})", tp.rank(),
                tp.size(), tp.sequence_parallel, layout.tp_rank, layout.tp_size, layout.sequence_parallel);
  LATTICE_CHECK(config.num_attention_heads % tp.size() == 0 && config.num_kv_heads % tp.size() == 0,
                "{} heads / {} kv heads do not split over tp {}", config.num_attention_heads, config.num_kv_heads,
                tp.size());
  const std::string p = fmt::format("layers.{}.", index);
  const float eps = static_cast<float>(config.norm_eps);
  const LinearKind column = tp.size() > 1 ? LinearKind::kColumn : LinearKind::kPlain;
  const LinearKind row = tp.size() > 1 ? LinearKind::kRow : LinearKind::kPlain;
  norm1_ = Norm(params, p + "input_norm", config.norm, eps);
  norm2_ = Norm(params, p + "post_attention_norm", config.norm, eps);
  q_proj_ = Linear(params, p + "attention.q_proj", column, tp);
  k_proj_ = Linear(params, p + "attention.k_proj", column, tp);
  v_proj_ = Linear(params, p + "attention.v_proj", column, tp);
  o_proj_ = Linear(params, p + "attention.o_proj", row, tp);
  if (config.activation == Activation::kSwiglu) gate_proj_ = Linear(params, p + "mlp.gate_proj", column, tp);
  up_proj_ = Linear(params, p + "mlp.up_proj", column, tp);
  down_proj_ = Linear(params, p + "mlp.down_proj", row, tp);
}

void DecoderLayer::enter_region(const Norm& norm, const Tensor& x, Tensor& region_in, NormSaved& stats,
                                LayerScratch& w) const {
  if (!tp_.sequence_parallel) {
    norm.forward(x, region_in, stats);
    copy_to_tp_region_forward(tp_, region_in);  // identity
    return;
  }
  norm.forward(x, w.norm_local, stats);
  gather_tokens_forward(tp_, w.norm_local, region_in);
}

CommHandle DecoderLayer::reduce_region_grad(LayerScratch& w, Tensor& d_norm_out) const {
  if (!tp_.sequence_parallel) {
    d_norm_out = w.d_hidden;
    return copy_to_tp_region_backward_async(tp_, w.d_hidden);
  }
  d_norm_out = w.d_local;
  return gather_tokens_backward_async(tp_, w.d_hidden, w.d_local);
}

void DecoderLayer::forward(LayerActivations& s, LayerScratch& w, Tensor& out) const {
  save_activations(s, w);
  const int64_t H = config_.hidden_size, F = up_proj_.out_features();
  Tensor out2 = matrix(out, H);
  down_proj_.forward_residual(matrix(s.act, F), out2, matrix(s.mid, H), w.partial);
}

void DecoderLayer::recompute(LayerActivations& s, LayerScratch& w, Recompute mode) const {
  LATTICE_CHECK(mode != Recompute::kNone, "recompute called for a layer that keeps its activations");
  if (mode == Recompute::kFull) {
    save_activations(s, w);
    return;
  }
  enter_region(norm1_, s.input, s.norm1_out, s.norm1, w);
  enter_region(norm2_, s.mid, s.norm2_out, s.norm2, w);
  activate(s);
}

void DecoderLayer::activate(LayerActivations& s) const {
  if (config_.activation == Activation::kSwiglu)
    ops::swiglu_forward(s.gate, s.up, s.act);
  else
    ops::gelu_forward(s.up, s.act);
}

void DecoderLayer::project_qkv(const Tensor& x, Tensor& q, Tensor& k, Tensor& v) const {
  const size_t first = q.numel() == k.numel() ? 0 : 1;  // GQA: q alone, then k, v as the group
  if (first == 1) q_proj_.forward(x, q);
  const Linear* layers[] = {&q_proj_, &k_proj_, &v_proj_};
  Tensor ys[] = {q, k, v};
  Linear::forward_group({layers + first, 3 - first}, x, {ys + first, 3 - first});
}

void DecoderLayer::qkv_weight_grads(const Tensor& x, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const size_t first = dq.numel() == dk.numel() ? 0 : 1;
  if (first == 1) q_proj_.backward_weights(x, dq);
  Linear* layers[] = {&q_proj_, &k_proj_, &v_proj_};
  const Tensor dys[] = {dq, dk, dv};
  Linear::backward_weights_group({layers + first, 3 - first}, x, {dys + first, 3 - first});
}

void DecoderLayer::save_activations(LayerActivations& s, LayerScratch& w) const {
  const int64_t qd = q_proj_.out_features(), kvd = k_proj_.out_features();
  const bool rope = config_.position_embedding == PositionEmbedding::kRope;
  const float theta = static_cast<float>(config_.rope_theta);

  // Attention: this rank's heads (local q head j reads local kv head j / (Hq/Hkv), the same
  // grouping as globally because heads are split contiguously).
  enter_region(norm1_, s.input, s.norm1_out, s.norm1, w);
  Tensor q = matrix(s.q, qd), k = matrix(s.k, kvd), v = matrix(s.v, kvd);
  project_qkv(s.norm1_out, q, k, v);
  if (rope) {
    ops::rope_forward(s.q, theta);
    ops::rope_forward(s.k, theta);
  }
  ops::attention_forward(s.q, s.k, s.v, s.attn_out, s.lse);
  o_proj_.forward_residual(matrix(s.attn_out, qd), s.mid, s.input, w.partial);

  // MLP.
  enter_region(norm2_, s.mid, s.norm2_out, s.norm2, w);
  if (config_.activation == Activation::kSwiglu) {
    // In the order of their weights (and of their outputs: model/activations.cc), so one batched GEMM.
    const Linear* layers[] = {&gate_proj_, &up_proj_};
    Tensor ys[] = {s.gate, s.up};
    Linear::forward_group(layers, s.norm2_out, ys);
    activate(s);
  } else {
    up_proj_.forward_gelu(s.norm2_out, s.up, s.act);  // activate(s) as one op with the GEMM
  }
}

void DecoderLayer::backward(const Tensor& d_out, const LayerActivations& s, LayerScratch& g, Tensor& d_x) {
  const int64_t H = config_.hidden_size;
  const int64_t qd = q_proj_.out_features(), kvd = k_proj_.out_features(), F = up_proj_.out_features();
  const bool rope = config_.position_embedding == PositionEmbedding::kRope;
  const float theta = static_cast<float>(config_.rope_theta);
  const bool swiglu = config_.activation == Activation::kSwiglu;

  // MLP branch: out = mid + down(act(up(norm2(mid)))).
  if (swiglu) {
    down_proj_.backward(matrix(s.act, F), matrix(d_out, H), g.d_act, false, g.d_full);
    ops::swiglu_backward(g.d_act, s.gate, s.up, g.d_gate, g.d_up);
    gate_proj_.backward_input(g.d_gate, g.d_hidden);
    up_proj_.backward_input(g.d_up, g.d_hidden, /*accumulate_dx=*/true);
  } else {
    // The GELU's backward with down_proj's input gradient: one op (d_act is not needed).
    down_proj_.backward(matrix(s.act, F), matrix(d_out, H), g.d_up, false, g.d_full, s.up);
    up_proj_.backward_input(g.d_up, g.d_hidden);
  }
  Tensor d_h2;
  {
    // The region input's gradient travels over tp while the weight gradients are computed.
    CommHandle reduce = reduce_region_grad(g, d_h2);
    if (swiglu) {
      Linear* layers[] = {&gate_proj_, &up_proj_};
      const Tensor dys[] = {g.d_gate, g.d_up};
      Linear::backward_weights_group(layers, s.norm2_out, dys);
    } else {
      up_proj_.backward_weights(s.norm2_out, g.d_up);
    }
    reduce.wait_on(tp_.stream);
  }
  norm2_.backward(d_h2, s.mid, s.norm2, g.d_mid, /*residual_grad=*/d_out);

  // Attention branch: mid = input + o_proj(attn(q, k, v)).
  Tensor d_attn = matrix(g.d_attn, qd);
  o_proj_.backward(matrix(s.attn_out, qd), g.d_mid, d_attn, false, g.d_full);
  ops::attention_backward(g.d_attn, s.q, s.k, s.v, s.attn_out, s.lse, g.dq, g.dk, g.dv);
  if (rope) {
    ops::rope_backward(g.dq, theta);
    ops::rope_backward(g.dk, theta);
  }
  const Tensor dq = matrix(g.dq, qd), dk = matrix(g.dk, kvd), dv = matrix(g.dv, kvd);
  q_proj_.backward_input(dq, g.d_hidden);
  k_proj_.backward_input(dk, g.d_hidden, /*accumulate_dx=*/true);
  v_proj_.backward_input(dv, g.d_hidden, /*accumulate_dx=*/true);
  Tensor d_h1;
  {
    CommHandle reduce = reduce_region_grad(g, d_h1);
    qkv_weight_grads(s.norm1_out, dq, dk, dv);
    reduce.wait_on(tp_.stream);
  }
  norm1_.backward(d_h1, s.input, s.norm1, d_x, /*residual_grad=*/g.d_mid);
}

}  // namespace lattice
