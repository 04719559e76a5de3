// The device-agnostic compute API. Every element-level operation of the model, the loss and the
// optimizer is one of these calls; each checks its arguments, then runs the kernel of the backend of
// the tensors' device (kernels/backend.h; CPU now, CUDA later). Tensors of one call share a device.
// Conventions: contiguous row-major; "[N, H]" means any tensor whose elements are N rows of H (leading
// dims are flattened). Functions named *_backward ACCUMULATE (+=) into parameter gradients and
// OVERWRITE (=) activation gradients, unless the comment says otherwise.
// Dtypes: data operands (activations, parameters and their gradients) are f32 or bf16, each on its own
// (bf16 activations accumulating into f32 parameter gradients is the normal mix). A bf16 operand is
// computed in f32: read widened (exact), written rounded to nearest even (kernels/f32_staging.h).
// Statistics stay f32 (norm mean/rstd, attention lse, the loss ops' losses, lse, row_max and sums);
// ids and targets are i32; the optimizer and fill_normal are f32 only; copy and cast take any dtype.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/tensor.h"

namespace lattice {
class Event;  // kernels/stream.h
}  // namespace lattice

namespace lattice::ops {

// ---- elementwise and reductions ----
void fill(Tensor& x, float value);
void copy(const Tensor& src, Tensor& dst);                      // same numel; host <-> device too
// A device tensor into a host one (same dtype and numel) without the host waiting: on a device with
// a copy stream (Backend::copy_to_pinned_async) the copy runs there after the compute stream's work
// so far, and host_dst (pinned: DeviceContext::pinned_empty) holds the data once the returned event
// has completed. Elsewhere (the CPU, a host source) the copy is made before it returns.
Event copy_to_host_async(const Tensor& src, Tensor& host_dst);
void scale(Tensor& x, float alpha);                             // x *= alpha
void axpy(float alpha, const Tensor& x, Tensor& y);             // y += alpha * x
void add(const Tensor& a, const Tensor& b, Tensor& out);        // out = a + b (out may alias a or b)
double sum_squares(const Tensor& x);                            // sum x^2 in double; host value
// Device-side reductions into out[slot] (out: f64 on x's device), for the host to read back in one
// copy (trainer/step_readback.h). sum_to adds left to right in double (a serial loop on the CPU);
// sum_squares_to is sum_squares' kernel, the same bits.
void sum_to(const Tensor& x, Tensor& out, int64_t slot);
void sum_squares_to(const Tensor& x, Tensor& out, int64_t slot);
// dst = src converted to dst's dtype (same numel): f32 -> bf16 rounds to nearest even (NaN stays a
// quiet NaN, ±Inf and overflow give ±Inf), bf16 -> f32 is exact, equal dtypes copy.
void cast(const Tensor& src, Tensor& dst);

// ---- matrix multiply (BLAS / cuBLASLt) ----
// c = alpha * op(a) @ op(b) + beta * c, with a, b, c viewed as 2-D matrices:
// a is [M, K] (or [K, M] when trans_a), b is [K, N] (or [N, K] when trans_b), c is [M, N].
// Leading dims of a, b and c are flattened into rows (so a weight gradient a^T @ dy can take 3-D
// activations for both operands). c must not overlap a or b. a, b and c may each be bf16 (e.g. bf16
// x and dy accumulating into an f32 weight gradient with beta = 1); the product accumulates in f32.
// bf16 a and b run as one bf16 GEMM where the backend has one (CUDA), else through an f32 GEMM.
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha = 1.0f,
            float beta = 0.0f);
// c = op(a) op(b) + bias, bias[N] added to every row of c[M, N]: a linear layer's forward. matmul
// then add_bias, which a device may fuse (CUDA: cuBLASLt's bias epilogue, one pass over c instead
// of three; a bf16 c is then rounded once, not after the product and again after the bias).
void matmul_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, Tensor& c);
// c = op(a) op(b) (+ bias) + residual: a linear layer's output added to the residual stream
// (residual [M, N] as c, bias[N] or undefined). As written matmul_bias (matmul without a bias) into c,
// then add(c, residual, c): bit for bit those ops, unless the device fuses them (CUDA: cuBLASLt
// reading the residual as its C with beta 1 and writing c as its D, the bias in the epilogue; one
// pass over c instead of four, and a bf16 c rounded once; the f32 epilogue adds the three terms in
// its own order). residual must not overlap c.
void matmul_residual(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                     const Tensor& residual, Tensor& c);
// A GELU MLP's two GEMMs, each with its GELU (pre, out and dx [M, N] of one dtype; bias[N] or
// undefined). As written they are matmul_bias (matmul without a bias) then gelu_forward, and matmul
// into dx then gelu_backward in place: bit for bit those ops, on every device, unless
// training.gelu_fusion lets the device fuse them (CUDA: cuBLASLt's GELU_AUX(_BIAS) and DGELU
// epilogues, one pass over the [M, N] matrices less each). Fused, the GELU is cuBLASLt's, applied to
// the f32 result rather than to a pre already rounded to bf16, so a bf16 run differs from the unfused
// one by rounding, and a selective recompute of out from pre no longer repeats it bit for bit.
// pre = op(a) op(b) + bias, out = gelu(pre).
void matmul_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias, Tensor& pre,
                      Tensor& out);
// dx = gelu'(pre) * (op(a) op(b)) elementwise (overwrite): the gradient of the GELU's input, from
// the product that gives the gradient of its output.
void matmul_gelu_backward(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& pre, Tensor& dx);
// A linear layer's parameter gradients from one micro-batch: dweight[O, I] += dy^T x (dy [N, O], x
// [N, I], beta 1) and dbias[O] += the column sums of dy. As written matmul(dy, true, x, false,
// dweight, 1, 1) then bias_backward(dy, dbias): bit for bit those ops, unless
// training.bias_grad_fusion lets the device fuse them (CUDA: cuBLASLt's BGRADB epilogue sums dy's
// columns in the GEMM that reads dy anyway, in that GEMM algorithm's order, into a scratch vector
// then added to dbias; Transformer Engine's weight-gradient GEMM does the same). dbias must not
// overlap dy, x or dweight.
void linear_weight_grad(const Tensor& dy, const Tensor& x, Tensor& dweight, Tensor& dbias);
// Products of one shape that share an operand, c[i] = alpha op(a[i]) op(b[i]) + beta c[i], or with
// biases (alpha 1, beta 0) c[i] = op(a[i]) op(b[i]) + bias[i]: the q, k and v projections of one
// input, and their weight gradients. a or b may hold a single tensor, shared by every product; bias
// is empty or holds one tensor per product. As written it is matmul (matmul_bias) for each i in
// order, bit for bit, unless the device runs them as one batched GEMM (CUDA: cuBLASLt's strided
// batch), which it does where each operand's tensors lie at one stride apart in memory (slices of
// one buffer, as the flat parameter buffers and model/activations.cc lay them out). No c may
// overlap another c or any input.
void matmul_group(std::span<const Tensor> a, bool trans_a, std::span<const Tensor> b, bool trans_b,
                  std::span<const Tensor> bias, std::span<Tensor> c, float alpha = 1.0f, float beta = 0.0f);

// y[N, F] += bias[F] (broadcast over rows).
void add_bias(Tensor& y, const Tensor& bias);
// dbias[F] += column sums of dy[N, F].
void bias_backward(const Tensor& dy, Tensor& dbias);
// bias_backward(dys[i], dbiases[i]) for each i, bit for bit, as one launch where the device has one
// and the dys share a shape (CUDA: the q, k and v bias gradients). No dbias may overlap a dy or
// another dbias.
void bias_backward_group(std::span<const Tensor> dys, std::span<Tensor> dbiases);

// ---- token ids ----
// Whether an op with token ids or targets checks them against the vocabulary. On a GPU the check
// reads a value back, a host synchronization, so the model's ops take ids its callers checked on
// the host when they filled them (the trainer's micro-batches, the generator's window): kChecked.
enum class Ids { kCheck, kChecked };

// ---- embeddings ----
// out[N, H] = table[ids[n], :] (ids: i32[N]); ids out of [0, V) is an error.
void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out, Ids ids_check = Ids::kCheck);
// dtable[ids[n], :] += dout[n, :].
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable, Ids ids_check = Ids::kCheck);
// Learned positions: x[B, T, H] += table[t, :] for t < T.
void add_position_embedding(Tensor& x, const Tensor& table);
// dtable[t, :] += sum over b of dx[b, t, :].
void position_embedding_backward(const Tensor& dx, Tensor& dtable);
// Vocab-parallel (tensor parallelism): `table` [rows, H] holds vocabulary rows [first_row,
// first_row + rows). out[N, H] = table[ids[n] - first_row, :] for the ids in that range, else 0
// (summed over the tp ranks this is the full lookup). ids outside [0, vocab_size) are an error.
void embedding_forward_shard(const Tensor& ids, const Tensor& table, int64_t first_row, int64_t vocab_size,
                             Tensor& out, Ids ids_check = Ids::kCheck);
// dtable[ids[n] - first_row, :] += dout[n, :] for the ids in the shard's range; other rows untouched.
void embedding_backward_shard(const Tensor& ids, const Tensor& dout, int64_t first_row, int64_t vocab_size,
                              Tensor& dtable, Ids ids_check = Ids::kCheck);
// Learned positions of a run of flattened tokens (sequence parallelism: a rank holds tokens
// [first_token, first_token + N) of the [B·T] token dimension): x[N, H] += table[(first_token + i)
// mod seq_length, :]. table is [P >= seq_length, H].
void add_position_embedding(Tensor& x, const Tensor& table, int64_t seq_length, int64_t first_token);
// dtable[(first_token + i) mod seq_length, :] += dx[i, :].
void position_embedding_backward(const Tensor& dx, int64_t seq_length, int64_t first_token, Tensor& dtable);

// ---- normalization (rows of length H) ----
// y = (x - mean) * rstd * gamma + beta; beta may be undefined (no bias). Saves mean[N], rstd[N].
void layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                       Tensor& mean, Tensor& rstd);
// dx = ...(overwrite); dgamma += ...; dbeta += ... (dbeta may be undefined).
// residual_grad defined (a pre-norm block's residual path): dx = the norm's input gradient +
// residual_grad, with the bits of this op without it followed by add(dx, residual_grad, dx) — one
// pass on a device with typed kernels. It must not overlap dx.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                        const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const Tensor& residual_grad = Tensor());
// y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps). Saves rstd[N].
void rmsnorm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y, Tensor& rstd);
// residual_grad: as layernorm_backward's.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                      Tensor& dgamma, const Tensor& residual_grad = Tensor());

// ---- activations ----
// GELU, tanh approximation (as GPT-2): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx);
// SwiGLU: y = silu(gate) * up, all [N, F].
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y);
void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup);

// ---- rotary position embedding, Hugging Face rotate-half convention ----
// x[B, T, heads, D] rotated in place at positions 0..T-1:
//   x1 = x[..., :D/2], x2 = x[..., D/2:]; out = x * cos + rotate_half(x) * sin,
//   rotate_half(x) = cat(-x2, x1), cos/sin[t, i] = cos/sin(t * theta^(-2(i mod D/2)/D)).
void rope_forward(Tensor& x, float theta);
// The inverse rotation, applied in place to a gradient dx[B, T, heads, D].
void rope_backward(Tensor& dx, float theta);

// ---- causal self-attention ----
// q[B, T, Hq, D], k/v[B, T, Hkv, D] with Hq a multiple of Hkv (GQA: q head h reads kv head
// h / (Hq/Hkv)); scale = 1/sqrt(D). out[B, T, Hq, D]; lse[B, Hq, T] = logsumexp of each score row,
// saved so backward recomputes probabilities instead of storing [T, T] per head.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out, Tensor& lse);
// dq, dk, dv are overwritten.
void attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, Tensor& dq, Tensor& dk, Tensor& dv);

// ---- loss ----
// Softmax cross-entropy over rows of logits[N, V] against targets i32[N]. losses[N] gets each
// row's -log p(target); lse[N] is saved for backward. Targets outside [0, V) are an error.
void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses, Tensor& lse,
                           Ids ids_check = Ids::kCheck);
// dlogits = (softmax(logits) - onehot(target)) * grad_scale, written in place of `logits` is
// allowed (dlogits may alias logits).
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, float grad_scale,
                            Tensor& dlogits, Ids ids_check = Ids::kCheck);

// Training's fused classifier (llm.c's): cross_entropy_forward, then cross_entropy_backward with
// the lse it saved, in one call, with the results of those two. A device may do both in one pass
// over the logits (CUDA reads them from memory once instead of three times). dlogits may alias
// logits, which are then gone: the forward-only uses of the logits (evaluation, sampling) call
// cross_entropy_forward.
void cross_entropy_forward_backward(const Tensor& logits, const Tensor& targets, float grad_scale, Tensor& losses,
                                    Tensor& lse, Tensor& dlogits, Ids ids_check = Ids::kCheck);

// ---- vocab-parallel loss (tensor parallelism: each tp rank holds some vocabulary columns) ----
// logits[N, Vl] are global vocab columns [first_col, first_col + Vl); only the first `valid_cols`
// are real vocabulary (the rest is padding and never affects the loss). The tp ranks combine:
//   row_max = max over the shard's valid columns (-inf when none)   -> all-reduce max
//   sums[0, :] = sum exp(x - row_max), sums[1, :] = target logit when the shard owns the target,
//   else 0                                                          -> all-reduce sum
//   losses = row_max + log(sums[0]) - sums[1], lse = row_max + log(sums[0]).
void cross_entropy_shard_max(const Tensor& logits, int64_t valid_cols, Tensor& row_max);
// row_max must already be the global max. sums is f32[2, N]. targets outside [0, vocab_size) are
// an error.
void cross_entropy_shard_sums(const Tensor& logits, const Tensor& targets, const Tensor& row_max, int64_t first_col,
                              int64_t valid_cols, int64_t vocab_size, Tensor& sums, Ids ids_check = Ids::kCheck);
void cross_entropy_shard_loss(const Tensor& row_max, const Tensor& sums, Tensor& losses, Tensor& lse);
// dlogits = (softmax(logits) - onehot(target)) * grad_scale on the valid columns (with the global
// lse), 0 on padding columns; dlogits may alias logits.
void cross_entropy_shard_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, float grad_scale,
                                  int64_t first_col, int64_t valid_cols, int64_t vocab_size, Tensor& dlogits,
                                  Ids ids_check = Ids::kCheck);

// ---- optimizer (f32 only: it owns the fp32 main parameters and moments) ----
struct AdamWParams {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;  // decoupled: param -= lr * weight_decay * param, before the Adam update
  int64_t step;        // 1-based, for bias correction
  float grad_scale;    // gradients are multiplied by this first (global-norm clipping)
};
// AdamW with bias correction on flat param/grad/m/v of equal size.
void adamw_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamWParams& p);

}  // namespace lattice::ops

namespace lattice::ops {

// ---- initialization ----
// Counter-based normal(0, std) init (x f32), so any sharding yields the weights one process would hold:
// x holds the box of a tensor of `global_shape` that starts at `box_offset`; element with global
// row-major index g gets normal_from_counter(seed, stream, g) * std (Philox-style hashing of
// (seed, stream, g), Box-Muller). `stream` is a hash of the parameter name.
void fill_normal(Tensor& x, const Shape& global_shape, const Shape& box_offset, uint64_t seed, uint64_t stream,
                 float std);

}  // namespace lattice::ops
