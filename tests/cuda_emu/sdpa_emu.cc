// The bf16 attention entries of kernels/cuda/cudnn_sdpa.h that the CUDA backend calls, for the
// emulated backend: cuDNN cannot run here, so q, k, v (and dout, out) are widened exactly, the
// emulated f32 flash kernels run, and out, dq, dk, dv are rounded once to bf16 (lse stays f32).
// Each call is one item of the compute stream, as a cuDNN graph's execution is. That checks the
// backend's bf16 attention plumbing and dtypes, not cuDNN's kernels.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/cast.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cudnn_sdpa.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda_workspace.h"
#include "tests/cuda_emu/streams.h"

namespace lattice::cuda {
namespace {

std::vector<float> widen(const uint16_t* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  cpu::bf16_to_f32(p, out.data(), n);
  return out;
}

void round_into(const std::vector<float>& f, uint16_t* p) {
  cpu::f32_to_bf16(f.data(), p, static_cast<int64_t>(f.size()));
}

int64_t q_elements(const AttentionShape& s) { return s.batch * s.seq * s.q_heads * s.head_dim; }
int64_t kv_elements(const AttentionShape& s) { return s.batch * s.seq * s.kv_heads * s.head_dim; }

}  // namespace

// cuDNN's refusal of a graph, injected: LATTICE_EMU_CUDNN_REFUSES=all refuses every graph,
// =backward only the backward ones (the forward's lse then feeds the f32 backward kernels).
std::string cudnn_sdpa_refusal(const AttentionShape& s, SdpaDirection direction) {
  const char* refuses = std::getenv("LATTICE_EMU_CUDNN_REFUSES");
  if (refuses == nullptr) return "";
  const std::string which = refuses;
  if (which == "all" || (which == "backward" && direction != SdpaDirection::kForward)) {
    return fmt::format("cuDNN SDPA refused batch={} seq={} (emulated: LATTICE_EMU_CUDNN_REFUSES={})", s.batch, s.seq,
                       which);
  }
  return "";
}

std::string cudnn_versions() { return "cuDNN: the emulator's stand-in"; }

// The workspace, sized as cuDNN before 9.25 sizes the deterministic backward's on Hopper (its dP),
// and held as the real shared one is: grown through the pool (so the memory plan must count it),
// never shrunk.
size_t cudnn_sdpa_workspace_bytes(const AttentionShape& s, SdpaDirection direction) {
  return direction == SdpaDirection::kBackwardDeterministic ? static_cast<size_t>(cudnn_sdpa_workspace_estimate(s)) : 0;
}

void cudnn_sdpa_reserve_workspace(size_t bytes) {
  static void* ptr = nullptr;
  static size_t size = 0;
  if (bytes <= size) return;
  release(ptr);
  ptr = allocate(bytes);
  size = bytes;
}

void cudnn_sdpa_forward(const AttentionShape& s, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                        float* lse) {
  emu::run_on(nullptr, [=] {
    const std::vector<float> fq = widen(q, q_elements(s)), fk = widen(k, kv_elements(s)), fv = widen(v, kv_elements(s));
    std::vector<float> fo(static_cast<size_t>(q_elements(s)));
    attention_forward_flash(fq.data(), fk.data(), fv.data(), fo.data(), lse, s);
    round_into(fo, out);
  });
}

void cudnn_sdpa_backward(const AttentionShape& s, SdpaDirection direction, const uint16_t* dout, const uint16_t* q,
                         const uint16_t* k, const uint16_t* v, const uint16_t* out, const float* lse, uint16_t* dq,
                         uint16_t* dk, uint16_t* dv) {
  cudnn_sdpa_reserve_workspace(cudnn_sdpa_workspace_bytes(s, direction));
  emu::run_on(nullptr, [=] {
    const std::vector<float> fdo = widen(dout, q_elements(s)), fq = widen(q, q_elements(s)),
                             fk = widen(k, kv_elements(s)), fv = widen(v, kv_elements(s)),
                             fo = widen(out, q_elements(s));
    std::vector<float> fdq(static_cast<size_t>(q_elements(s))), fdk(static_cast<size_t>(kv_elements(s))),
        fdv(static_cast<size_t>(kv_elements(s)));
    attention_backward_flash(fdo.data(), fq.data(), fk.data(), fv.data(), fo.data(), lse, fdq.data(), fdk.data(),
                             fdv.data(), s);
    round_into(fdq, dq);
    round_into(fdk, dk);
    round_into(fdv, dv);
  });
}

}  // namespace lattice::cuda
