// cuDNN SDPA graphs for bf16 causal GQA attention (see cudnn_sdpa.h). The only translation unit that
// includes cudnn_frontend.h: it takes 65-80 s to compile, so keep every use of the frontend here.
#include "kernels/cuda/cudnn_sdpa.h"

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cudnn_frontend.h>
#include <fmt/format.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"
#include "kernels/error.h"

namespace lattice::cuda {
namespace {

namespace fe = cudnn_frontend;
using fe::graph::Graph;
using fe::graph::Tensor_attributes;
using TensorPtr = std::shared_ptr<Tensor_attributes>;

// Tensor uids: the variant pack maps these to device pointers.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

std::string describe(const AttentionShape& s) {
  return fmt::format("batch={} seq={} q_heads={} kv_heads={} head_dim={}", s.batch, s.seq, s.q_heads,
                     s.kv_heads, s.head_dim);
}

std::string failure(const AttentionShape& s, SdpaDirection direction, int sm_version, const std::string& why) {
  const std::string sm = sm_version > 0 ? fmt::format("sm_{}", sm_version) : std::string("this GPU");
  return fmt::format("cuDNN SDPA {} (bf16, causal) does not support attention shape {} on {}: {}",
                     sdpa_direction_name(direction), describe(s), sm, why);
}

// What cuDNN said, with a note naming our parameter when it is head_dim that cuDNN refuses (its own
// messages say "hidden_dim", or name a stride).
std::string cudnn_said(fe::error_t& err, const AttentionShape& s) {
  std::ostringstream code;
  code << err.get_code();
  std::string why = fmt::format("{} {}", code.str(), err.get_message());
  if (s.head_dim % 8 != 0 || s.head_dim > 256) {
    why += fmt::format(" (head_dim={}: cuDNN SDPA needs head_dim a multiple of 8 and at most 256)", s.head_dim);
  }
  return why;
}

// Checks our side of the contract before cuDNN sees the shape; "" when fine.
std::string shape_problem(const AttentionShape& s) {
  if (s.batch < 1 || s.seq < 1 || s.q_heads < 1 || s.kv_heads < 1 || s.head_dim < 1) {
    return "every dimension must be at least 1";
  }
  if (s.q_heads % s.kv_heads != 0) {
    return fmt::format("q_heads={} is not a multiple of kv_heads={}", s.q_heads, s.kv_heads);
  }
  return "";
}

// [B, T, H, D] interleaved, seen by cuDNN as (B, H, S, D).
std::vector<int64_t> bshd_dim(const AttentionShape& s, int64_t heads) { return {s.batch, heads, s.seq, s.head_dim}; }
std::vector<int64_t> bshd_stride(const AttentionShape& s, int64_t heads) {
  return {s.seq * heads * s.head_dim, s.head_dim, heads * s.head_dim, 1};
}
// lse [B, Hq, T] packed, as (B, Hq, T, 1).
std::vector<int64_t> stats_dim(const AttentionShape& s) { return {s.batch, s.q_heads, s.seq, 1}; }
std::vector<int64_t> stats_stride(const AttentionShape& s) { return {s.q_heads * s.seq, s.seq, 1, 1}; }

TensorPtr bshd_input(Graph& g, const char* name, Uid uid, const AttentionShape& s, int64_t heads) {
  return g.tensor(Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_data_type(fe::DataType_t::BFLOAT16)
                      .set_dim(bshd_dim(s, heads))
                      .set_stride(bshd_stride(s, heads)));
}

void bshd_output(const TensorPtr& t, Uid uid, const AttentionShape& s, int64_t heads) {
  t->set_output(true)
      .set_uid(uid)
      .set_data_type(fe::DataType_t::BFLOAT16)
      .set_dim(bshd_dim(s, heads))
      .set_stride(bshd_stride(s, heads));
}

// The graph of (shape, direction), not yet validated. sm_version > 0 targets that SM without
// asking a device; 0 leaves the device to the handle at build time.
std::shared_ptr<Graph> make_graph(const AttentionShape& s, SdpaDirection direction, int sm_version) {
  auto g = std::make_shared<Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_version > 0) g->set_sm_version(sm_version);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

  auto q = bshd_input(*g, "Q", kQ, s, s.q_heads);
  auto k = bshd_input(*g, "K", kK, s, s.kv_heads);
  auto v = bshd_input(*g, "V", kV, s, s.kv_heads);
  if (direction == SdpaDirection::kForward) {
    auto attrs = fe::graph::SDPA_attributes()
                     .set_name("lattice_sdpa_forward")
                     .set_generate_stats(true)
                     .set_attn_scale(scale)
                     .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                     .set_diagonal_band_right_bound(0);
    auto [o, stats] = g->sdpa(q, k, v, std::move(attrs));
    bshd_output(o, kO, s, s.q_heads);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dim(s))
        .set_stride(stats_stride(s));
    return g;
  }
  auto o = bshd_input(*g, "O", kO, s, s.q_heads);
  auto dout = bshd_input(*g, "dO", kDO, s, s.q_heads);
  auto stats = g->tensor(Tensor_attributes()
                             .set_name("Stats")
                             .set_uid(kStats)
                             .set_data_type(fe::DataType_t::FLOAT)
                             .set_dim(stats_dim(s))
                             .set_stride(stats_stride(s)));
  auto attrs = fe::graph::SDPA_backward_attributes()
                   .set_name("lattice_sdpa_backward")
                   .set_attn_scale(scale)
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0)
                   .set_deterministic_algorithm(direction == SdpaDirection::kBackwardDeterministic);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, std::move(attrs));
  bshd_output(dq, kDQ, s, s.q_heads);
  bshd_output(dk, kDK, s, s.kv_heads);
  bshd_output(dv, kDV, s, s.kv_heads);
  return g;
}

// ---- The cache of executable graphs (GPU only) ----

struct Planned {
  std::shared_ptr<Graph> graph;
  int64_t workspace_bytes = 0;
};

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, SdpaDirection>;

std::mutex cache_mutex;
std::map<Key, Planned>& cache() {
  static std::map<Key, Planned> graphs;
  return graphs;
}

// Building plans is the slow part (llm.c: "the VERY SLOW PART"), so it happens once per key.
const Planned& planned(cudnnHandle_t handle, const AttentionShape& s, SdpaDirection direction) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  const Key key{s.batch, s.seq, s.q_heads, s.kv_heads, s.head_dim, direction};
  auto it = cache().find(key);
  if (it != cache().end()) return it->second;

  if (std::string problem = shape_problem(s); !problem.empty()) throw Error(failure(s, direction, 0, problem));
  auto g = make_graph(s, direction, /*sm_version=*/0);
  auto step = [&](fe::error_t err, const char* what) {
    if (err.is_bad()) throw Error(failure(s, direction, 0, fmt::format("{}: {}", what, cudnn_said(err, s))));
  };
  step(g->validate(), "validate");
  step(g->build_operation_graph(handle), "build_operation_graph");
  step(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
  step(g->check_support(handle), "check_support");
  step(g->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
  Planned p;
  p.graph = std::move(g);
  step(p.graph->get_workspace_size(p.workspace_bytes), "get_workspace_size");
  return cache().emplace(key, std::move(p)).first->second;
}

void execute(cudnnHandle_t handle, const AttentionShape& s, SdpaDirection direction,
             std::unordered_map<int64_t, void*>& pack, void* workspace) {
  const Planned& p = planned(handle, s, direction);
  LATTICE_CHECK(p.workspace_bytes == 0 || workspace != nullptr, "cuDNN SDPA {} needs {} bytes of workspace",
                sdpa_direction_name(direction), p.workspace_bytes);
  fe::error_t err = p.graph->execute(handle, pack, workspace);
  if (err.is_bad()) throw Error(failure(s, direction, 0, fmt::format("execute: {}", cudnn_said(err, s))));
}

// One workspace shared by every graph, grown (never shrunk) through the stream-ordered pool.
std::mutex workspace_mutex;
void* shared_workspace(size_t bytes) {
  static void* ptr = nullptr;
  static size_t size = 0;
  std::lock_guard<std::mutex> lock(workspace_mutex);
  if (bytes > size) {
    if (ptr != nullptr) release(ptr);
    ptr = allocate(bytes);
    size = bytes;
  }
  return ptr;
}

void* cast(const void* p) { return const_cast<void*>(p); }

}  // namespace

const char* sdpa_direction_name(SdpaDirection direction) {
  switch (direction) {
    case SdpaDirection::kForward:
      return "forward";
    case SdpaDirection::kBackward:
      return "backward";
    case SdpaDirection::kBackwardDeterministic:
      return "deterministic backward";
  }
  return "?";
}

std::string cudnn_sdpa_check(const AttentionShape& shape, SdpaDirection direction, int sm_version) {
  if (std::string problem = shape_problem(shape); !problem.empty()) {
    return failure(shape, direction, sm_version, problem);
  }
  try {
    auto g = make_graph(shape, direction, sm_version);
    fe::error_t err = g->validate();
    if (err.is_bad()) return failure(shape, direction, sm_version, cudnn_said(err, shape));
  } catch (const std::exception& e) {  // the frontend throws on some bad attributes
    return failure(shape, direction, sm_version, e.what());
  }
  return "";
}

std::string cudnn_sdpa_check_all(const AttentionShape& shape, int sm_version) {
  for (SdpaDirection d :
       {SdpaDirection::kForward, SdpaDirection::kBackward, SdpaDirection::kBackwardDeterministic}) {
    if (std::string error = cudnn_sdpa_check(shape, d, sm_version); !error.empty()) return error;
  }
  return "";
}

std::string cudnn_versions() {
  const size_t v = cudnnGetVersion();  // major·10000 + minor·100 + patch since cuDNN 9
  return fmt::format("cuDNN {}.{}.{} (frontend {}.{}.{})", v / 10000, v / 100 % 100, v % 100,
                     CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION);
}

cudnnHandle_t cudnn_handle() {
  static cudnnHandle_t handle = [] {
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t created = cudnnCreate(&h);
    if (created != CUDNN_STATUS_SUCCESS) fail("cudnnCreate(&h)", cudnnGetErrorString(created), __FILE__, __LINE__);
    const cudnnStatus_t bound = cudnnSetStream(h, compute_stream());
    if (bound != CUDNN_STATUS_SUCCESS) {
      fail("cudnnSetStream(h, compute_stream())", cudnnGetErrorString(bound), __FILE__, __LINE__);
    }
    return h;
  }();
  return handle;
}

size_t cudnn_sdpa_graph_workspace_bytes(cudnnHandle_t handle, const AttentionShape& shape, SdpaDirection direction) {
  return static_cast<size_t>(planned(handle, shape, direction).workspace_bytes);
}

std::string cudnn_sdpa_refusal(const AttentionShape& shape, SdpaDirection direction) {
  try {
    cudnn_sdpa_graph_workspace_bytes(cudnn_handle(), shape, direction);
  } catch (const std::exception& e) {  // lattice::Error, or the frontend's own on bad attributes
    return e.what();
  }
  return "";
}

void cudnn_sdpa_forward(cudnnHandle_t handle, const AttentionShape& shape, const uint16_t* q, const uint16_t* k,
                        const uint16_t* v, uint16_t* out, float* lse, void* workspace) {
  std::unordered_map<int64_t, void*> pack{{kQ, cast(q)}, {kK, cast(k)},   {kV, cast(v)},
                                          {kO, out},     {kStats, lse}};
  execute(handle, shape, SdpaDirection::kForward, pack, workspace);
}

void cudnn_sdpa_backward(cudnnHandle_t handle, const AttentionShape& shape, SdpaDirection direction,
                         const uint16_t* dout, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                         const uint16_t* out, const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                         void* workspace) {
  LATTICE_CHECK(direction != SdpaDirection::kForward, "cudnn_sdpa_backward takes a backward direction");
  std::unordered_map<int64_t, void*> pack{{kQ, cast(q)},      {kK, cast(k)},    {kV, cast(v)},
                                          {kO, cast(out)},    {kDO, cast(dout)}, {kStats, cast(lse)},
                                          {kDQ, dq},          {kDK, dk},        {kDV, dv}};
  execute(handle, shape, direction, pack, workspace);
}

size_t cudnn_sdpa_workspace_bytes(const AttentionShape& shape, SdpaDirection direction) {
  return cudnn_sdpa_graph_workspace_bytes(cudnn_handle(), shape, direction);
}

void cudnn_sdpa_reserve_workspace(size_t bytes) { shared_workspace(bytes); }

void cudnn_sdpa_forward(const AttentionShape& shape, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                        uint16_t* out, float* lse) {
  cudnnHandle_t h = cudnn_handle();
  void* ws = shared_workspace(cudnn_sdpa_graph_workspace_bytes(h, shape, SdpaDirection::kForward));
  cudnn_sdpa_forward(h, shape, q, k, v, out, lse, ws);
}

void cudnn_sdpa_backward(const AttentionShape& shape, SdpaDirection direction, const uint16_t* dout,
                         const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                         const float* lse, uint16_t* dq, uint16_t* dk, uint16_t* dv) {
  cudnnHandle_t h = cudnn_handle();
  void* ws = shared_workspace(cudnn_sdpa_graph_workspace_bytes(h, shape, direction));
  cudnn_sdpa_backward(h, shape, direction, dout, q, k, v, out, lse, dq, dk, dv, ws);
}

}  // namespace lattice::cuda
