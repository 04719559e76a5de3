// DecoderLayer forward/backward.
#include "model/decoder_layer.h"

#include <fmt/format.h>

#include "kernels/ops.h"

namespace lattice {

namespace {

// [.., cols] viewed as a matrix of `cols` columns: the layout ops::matmul expects.
Tensor matrix(const Tensor& t, int64_t cols) { return t.view({t.numel() / cols, cols}); }

}  // namespace

DecoderLayer::DecoderLayer(const ModelConfig& config, ParameterStore& params, int64_t index) : config_(config) {
  const std::string p = fmt::format("layers.{}.", index);
  const float eps = static_cast<float>(config.norm_eps);
  norm1_ = Norm(params, p + "input_norm", config.norm, eps);
  norm2_ = Norm(params, p + "post_attention_norm", config.norm, eps);
  q_proj_ = Linear(params, p + "attention.q_proj");
  k_proj_ = Linear(params, p + "attention.k_proj");
  v_proj_ = Linear(params, p + "attention.v_proj");
  o_proj_ = Linear(params, p + "attention.o_proj");
  if (config.activation == Activation::kSwiglu) gate_proj_ = Linear(params, p + "mlp.gate_proj");
  up_proj_ = Linear(params, p + "mlp.up_proj");
  down_proj_ = Linear(params, p + "mlp.down_proj");
}

void DecoderLayer::forward(LayerActivations& s, Tensor& out) const {
  const int64_t H = config_.hidden_size, F = config_.ffn_hidden_size;
  const int64_t qd = q_proj_.out_features(), kvd = k_proj_.out_features();
  const bool rope = config_.position_embedding == PositionEmbedding::kRope;
  const float theta = static_cast<float>(config_.rope_theta);

  norm1_.forward(s.input, s.norm1_out, s.norm1);
  Tensor h1 = matrix(s.norm1_out, H);
  Tensor q = matrix(s.q, qd), k = matrix(s.k, kvd), v = matrix(s.v, kvd);
  q_proj_.forward(h1, q);
  k_proj_.forward(h1, k);
  v_proj_.forward(h1, v);
  if (rope) {
    ops::rope_forward(s.q, theta);
    ops::rope_forward(s.k, theta);
  }
  ops::attention_forward(s.q, s.k, s.v, s.attn_out, s.lse);
  Tensor mid = matrix(s.mid, H);
  o_proj_.forward(matrix(s.attn_out, qd), mid);
  ops::add(s.mid, s.input, s.mid);

  norm2_.forward(s.mid, s.norm2_out, s.norm2);
  Tensor h2 = matrix(s.norm2_out, H);
  Tensor up = matrix(s.up, F);
  up_proj_.forward(h2, up);
  if (config_.activation == Activation::kSwiglu) {
    Tensor gate = matrix(s.gate, F);
    gate_proj_.forward(h2, gate);
    ops::swiglu_forward(s.gate, s.up, s.act);
  } else {
    ops::gelu_forward(s.up, s.act);
  }
  Tensor out2 = matrix(out, H);
  down_proj_.forward(matrix(s.act, F), out2);
  ops::add(out, s.mid, out);
}

void DecoderLayer::backward(const Tensor& d_out, const LayerActivations& s, BackwardScratch& g, Tensor& d_x) {
  const int64_t H = config_.hidden_size, F = config_.ffn_hidden_size;
  const int64_t qd = q_proj_.out_features(), kvd = k_proj_.out_features();
  const bool rope = config_.position_embedding == PositionEmbedding::kRope;
  const float theta = static_cast<float>(config_.rope_theta);

  // MLP branch: out = mid + down(act(up(norm2(mid)))).
  Tensor d_act = matrix(g.d_act, F);
  down_proj_.backward(matrix(s.act, F), matrix(d_out, H), d_act);
  Tensor h2 = matrix(s.norm2_out, H);
  Tensor d_h2 = matrix(g.d_hidden, H);
  if (config_.activation == Activation::kSwiglu) {
    ops::swiglu_backward(g.d_act, s.gate, s.up, g.d_gate, g.d_up);
    gate_proj_.backward(h2, matrix(g.d_gate, F), d_h2);
    up_proj_.backward(h2, matrix(g.d_up, F), d_h2, /*accumulate_dx=*/true);
  } else {
    ops::gelu_backward(g.d_act, s.up, g.d_up);
    up_proj_.backward(h2, matrix(g.d_up, F), d_h2);
  }
  norm2_.backward(g.d_hidden, s.mid, s.norm2, g.d_mid);
  ops::add(g.d_mid, d_out, g.d_mid);  // residual path

  // Attention branch: mid = input + o_proj(attn(q, k, v)).
  Tensor d_attn = matrix(g.d_attn, qd);
  o_proj_.backward(matrix(s.attn_out, qd), matrix(g.d_mid, H), d_attn);
  ops::attention_backward(g.d_attn, s.q, s.k, s.v, s.attn_out, s.lse, g.dq, g.dk, g.dv);
  if (rope) {
    ops::rope_backward(g.dq, theta);
    ops::rope_backward(g.dk, theta);
  }
  Tensor h1 = matrix(s.norm1_out, H);
  Tensor d_h1 = matrix(g.d_hidden, H);
  q_proj_.backward(h1, matrix(g.dq, qd), d_h1);
  k_proj_.backward(h1, matrix(g.dk, kvd), d_h1, /*accumulate_dx=*/true);
  v_proj_.backward(h1, matrix(g.dv, kvd), d_h1, /*accumulate_dx=*/true);
  norm1_.backward(g.d_hidden, s.input, s.norm1, d_x);
  ops::add(d_x, g.d_mid, d_x);
}

}  // namespace lattice
