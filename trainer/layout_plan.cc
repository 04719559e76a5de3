// Layout enumeration and step-time prediction for `lattice plan` (see layout_plan.h).
#include "trainer/layout_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "parallel/schedule.h"
#include "parallel/schedule_simulator.h"
#include "trainer/memory_plan.h"
#include "trainer/model_stats.h"

namespace lattice {
namespace {

// Interleaved layouts are tried with at most this many virtual stages: each more adds p2p hops per
// micro-batch for an ever smaller cut in the bubble.
constexpr int kMaxVirtualStages = 8;
// Micro-batches simulated: beyond 4·p the 1F1B steady state repeats, so each further micro-batch adds
// the busiest rank's forward + backward (the closed-form tail).
constexpr int kSimulatedMicroBatchesPerStage = 4;
// Past the returned rows, this many more are simulated so that the re-ranking after simulation
// can promote a layout the closed form placed lower.
constexpr int kExtraSimulated = 24;

double peak_flops_for(const Config& c, const GpuSpec& gpu) {
  if (c.training.precision == Precision::kBf16) return gpu.peak_bf16_flops;
  return c.training.tf32 ? gpu.peak_tf32_flops : gpu.peak_fp32_flops;
}

// Ring collectives over n ranks of `bytes` each: 2(n-1) steps of α, and the bytes on the link.
double all_reduce_s(double bytes, int n, double alpha, double beta) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / beta;
}
double reduce_scatter_s(double bytes, int n, double alpha, double beta) {
  if (n <= 1) return 0;
  return (n - 1) * alpha + double(n - 1) / n * bytes / beta;
}

// What a layout costs, before the pipeline is timed.
struct LayoutCosts {
  std::vector<std::vector<double>> fwd, bwd;  // [pp rank][chunk], one micro-batch
  double p2p_s = 0;                           // one activation or gradient between stages
  double tp_comm_per_mb_busiest = 0;          // TP collectives of one micro-batch on the busiest rank
  std::vector<double> dp_exposed_after_last_backward;  // per pp rank
  double optimizer_s = 0;
  double param_gather_exposed_s = 0;
};

struct Planner {
  const Config& base;
  const GpuSpec& gpu;
  PlanOptions opt;
  ModelStats stats;
  double peak = 0;
  int gpn = 8;

  Planner(const Config& config, const GpuSpec& g, const PlanOptions& o) : base(config), gpu(g), opt(o) {
    stats = compute_model_stats(config);
    peak = peak_flops_for(config, gpu);
    gpn = o.gpus_per_node > 0 ? o.gpus_per_node : gpu.gpus_per_node;
  }

  // FLOPs of one token through one layer's forward (whole layer, before the TP split).
  double layer_forward_flops_per_token() const {
    const ModelConfig& m = base.model;
    const double h = double(m.hidden_size), qd = double(m.num_attention_heads * m.head_dim()),
                 kvd = double(m.num_kv_heads * m.head_dim());
    const double attn = h * qd + 2 * h * kvd + qd * h;
    const double mlp = (m.activation == Activation::kSwiglu ? 3.0 : 2.0) * h * double(m.ffn_hidden_size);
    // QK^T and PV over the full sequence (the MFU convention of model_stats: not the causal half).
    return 2 * (attn + mlp) + 4.0 * double(m.seq_length) * qd;
  }

  LayoutCosts costs(const Config& c, const ParallelLayout& L, const MemoryPlan& mem) const {
    const ModelConfig& m = c.model;
    const double rate = peak * opt.gemm_efficiency;
    const int t = L.tensor, p = L.pipeline, v = L.virtual_stages, d = L.data;
    const double act_bytes = c.training.precision == Precision::kBf16 ? 2 : 4;
    const double tokens = double(c.training.micro_batch_size) * double(m.seq_length);
    const double layer_fwd_s = tokens * layer_forward_flops_per_token() / t / rate;
    // Two all-reduces per layer and pass (attention and MLP outputs); with sequence parallelism an
    // all-gather + reduce-scatter pair of the same bytes in all.
    const double act = tokens * double(m.hidden_size) * act_bytes;
    const double tp_ar = all_reduce_s(act, t, gpu.intra_node_latency, gpu.intra_node_bandwidth);
    const double head_fwd_s = tokens * 2.0 * double(m.hidden_size) * double(L.padded_vocab_size) / t / rate;
    // Selective recompute redoes the two norms and the MLP activation: memory-bound passes (read the
    // input, write the output) over 2·h + the activation's input columns per token.
    const double selective_elements = 2.0 * double(m.hidden_size) +
                                      (m.activation == Activation::kSwiglu ? 2.0 : 1.0) * double(m.ffn_hidden_size);
    const double selective_s = tokens * selective_elements * 2 * act_bytes / t / gpu.memory_bandwidth;
    LayoutCosts k;
    k.fwd.assign(p, std::vector<double>(v, 0));
    k.bwd.assign(p, std::vector<double>(v, 0));
    double busiest = -1;
    for (int r = 0; r < p; ++r) {
      double rank_total = 0, rank_tp = 0;
      for (int ch = 0; ch < v; ++ch) {
        const int vs = virtual_stage(p, r, ch);
        const double n = double(L.layers_per_stage[vs]);
        double recomputed = 0;
        if (m.recompute == Recompute::kFull)
          recomputed = m.recompute_num_layers > 0 ? std::min(n, double(m.recompute_num_layers)) : n;
        k.fwd[r][ch] = n * (layer_fwd_s + 2 * tp_ar);
        k.bwd[r][ch] = n * (2 * layer_fwd_s + 2 * tp_ar) + recomputed * (layer_fwd_s + 2 * tp_ar);
        if (m.recompute == Recompute::kSelective) k.bwd[r][ch] += n * selective_s;
        rank_tp += (4 * n + 2 * recomputed) * tp_ar;
        if (vs == p * v - 1) {  // the loss head (never recomputed)
          k.fwd[r][ch] += head_fwd_s;
          k.bwd[r][ch] += 2 * head_fwd_s;
        }
        rank_total += k.fwd[r][ch] + k.bwd[r][ch];
      }
      if (rank_total > busiest) {
        busiest = rank_total;
        k.tp_comm_per_mb_busiest = rank_tp;
      }
    }
    // Pipeline p2p: one stage's output (split over TP with sequence parallelism); across nodes once
    // the pipeline spans them.
    const bool pp_cross = int64_t{t} * d * p > gpn;
    const double p2p_bytes = act / (L.tensor > 1 && c.parallel.sequence_parallel ? t : 1);
    k.p2p_s = p > 1 ? (pp_cross ? gpu.inter_node_latency + p2p_bytes / gpu.inter_node_bandwidth
                                : gpu.intra_node_latency + p2p_bytes / gpu.intra_node_bandwidth)
                    : 0;
    // Data parallel: ranks tp + t·dp of one stage span t·d consecutive ranks.
    const bool dp_cross = int64_t{t} * d > gpn;
    const double dp_alpha = dp_cross ? gpu.inter_node_latency : gpu.intra_node_latency;
    const double dp_beta = dp_cross ? gpu.inter_node_bandwidth : gpu.intra_node_bandwidth;
    const double grad_bytes = c.parallel.grad_reduce_dtype == Precision::kBf16 ? 2 : 4;
    const bool sharded = c.parallel.distributed_optimizer && d > 1;
    int64_t max_params = 0;
    k.dp_exposed_after_last_backward.assign(p, 0);
    for (const RankMemoryPlan& r : mem.ranks) {
      max_params = std::max(max_params, r.params);
      const double bytes = double(r.params) * grad_bytes;
      const double reduce = sharded ? reduce_scatter_s(bytes, d, dp_alpha, dp_beta)
                                    : all_reduce_s(bytes, d, dp_alpha, dp_beta);
      double exposed = reduce;
      if (c.parallel.overlap_grad_reduce && gpu.overlap_communication && d > 1) {
        // Buckets reduce while the last micro-batch's backward runs; the last bucket cannot hide.
        double window = 0;
        for (double b : k.bwd[r.pp_rank]) window += b;
        const double bucket = std::min(bytes, c.parallel.bucket_size_mb * 1024 * 1024);
        const double last = sharded ? reduce_scatter_s(bucket, d, dp_alpha, dp_beta)
                                    : all_reduce_s(bucket, d, dp_alpha, dp_beta);
        exposed = std::max(reduce - window, std::min(last, reduce));
      }
      k.dp_exposed_after_last_backward[r.pp_rank] = std::max(k.dp_exposed_after_last_backward[r.pp_rank], exposed);
    }
    k.optimizer_s = double(max_params) / (sharded ? d : 1) * kOptimizerBytesPerParam / gpu.memory_bandwidth;
    if (sharded) {
      const double gather = reduce_scatter_s(double(max_params) * act_bytes, d, dp_alpha, dp_beta);
      // overlap_param_gather hides it behind the next step's first forward.
      k.param_gather_exposed_s = c.parallel.overlap_param_gather && gpu.overlap_communication
                                     ? std::max(0.0, gather - k.fwd[0][0])
                                     : gather;
    }
    return k;
  }

  // Times the pipeline: simulated (with the closed-form tail past 4·p micro-batches) or closed form.
  void time_pipeline(const ParallelLayout& L, const LayoutCosts& k, bool simulate, LayoutPrediction& out) const {
    const int p = L.pipeline, v = L.virtual_stages, m = static_cast<int>(L.micro_batches);
    std::vector<double> per_mb(p, 0);
    for (int r = 0; r < p; ++r)
      for (int ch = 0; ch < v; ++ch) per_mb[r] += k.fwd[r][ch] + k.bwd[r][ch];
    const double busiest = *std::max_element(per_mb.begin(), per_mb.end());
    double makespan = 0, busy_sum = 0;
    std::vector<double> last_backward_end(p, 0);
    if (simulate) {
      const int m_sim = m <= kSimulatedMicroBatchesPerStage * p ? m : kSimulatedMicroBatchesPerStage * p;
      SimulatorOptions so;
      so.chunk_forward_cost = k.fwd;
      so.chunk_backward_cost = k.bwd;
      so.p2p_latency = k.p2p_s;
      const SimulationResult sim = simulate_schedules(make_all_schedules(L.schedule, p, v, m_sim), v, m_sim, so);
      LATTICE_CHECK(sim.ok(), "the {} schedule (p {}, v {}, m {}) did not simulate: {}", schedule_kind_name(L.schedule),
                    p, v, m_sim, sim.error_text());
      const double tail = double(m - m_sim) * busiest;
      makespan = sim.makespan + tail;
      for (int r = 0; r < p; ++r) {
        for (const TimedAction& a : sim.timeline[r])
          if (a.action.type == ActionType::kBackward) last_backward_end[r] = std::max(last_backward_end[r], a.end);
        last_backward_end[r] += tail;
      }
      out.simulated = true;
    } else {
      // Warm-up and cool-down: p - 1 stage passes of a chunk, each with a p2p hop both ways.
      double mean = 0;
      for (double x : per_mb) mean += x / p;
      makespan = m * busiest + (p - 1) * (mean / v + 2 * k.p2p_s);
      last_backward_end.assign(p, makespan);
    }
    for (double x : per_mb) busy_sum += m * x;
    double end = makespan;
    for (int r = 0; r < p; ++r) end = std::max(end, last_backward_end[r] + k.dp_exposed_after_last_backward[r]);
    out.compute_s = m * busiest;
    out.bubble_s = std::max(0.0, makespan - out.compute_s);  // without a pipeline: rounding only
    out.bubble = p > 1 ? 1 - busy_sum / (p * makespan) : 0;
    out.dp_exposed_s = end - makespan;
    out.optimizer_s = k.optimizer_s + k.param_gather_exposed_s;
    out.tp_comm_s = m * k.tp_comm_per_mb_busiest;
    out.step_s = end + out.optimizer_s;
  }

  // One candidate: `c` is base with the layout's keys, L its validated layout.
  LayoutPrediction predict(const Config& c, const ParallelLayout& L, bool simulate) const {
    LayoutPrediction out;
    out.tensor = L.tensor;
    out.pipeline = L.pipeline;
    out.data = L.data;
    out.virtual_stages = L.virtual_stages;
    out.schedule = L.schedule;
    out.micro_batch_size = c.training.micro_batch_size;
    out.micro_batches = L.micro_batches;
    out.global_batch_size = c.training.global_batch_size;
    out.sequence_parallel = c.parallel.sequence_parallel;
    out.distributed_optimizer = c.parallel.distributed_optimizer;
    out.recompute = c.model.recompute;
    // The memory of the machine planned for: on GPUs no bf16 operand staging and no MPI temporaries.
    Config on_target = c;
    on_target.device = gpu.name == "cpu" ? "cpu" : "cuda";
    const MemoryPlan mem = plan_memory(on_target, L);
    out.memory_bytes = mem.peak_bytes;
    out.fits = double(mem.peak_bytes) <= gpu.memory_bytes * gpu.usable_memory_fraction;
    const LayoutCosts k = costs(c, L, mem);
    time_pipeline(L, k, simulate, out);
    out.tokens_per_s = double(c.training.global_batch_size) * double(c.model.seq_length) / out.step_s;
    out.mfu = stats.flops_per_token * out.tokens_per_s / (double(L.world_size) * peak);
    out.model_tflops_per_gpu = stats.flops_per_token * out.tokens_per_s / double(L.world_size) / 1e12;
    return out;
  }

};

Config candidate_config(const Config& base, int t, int p, int d, int v, int64_t mbs, int64_t gb, bool sp, bool dist,
                        Recompute rc) {
  Config c = base;
  c.parallel.tensor = t;
  c.parallel.pipeline = p;
  c.parallel.data = d;
  c.parallel.virtual_stages = v;
  c.parallel.schedule = v > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
  c.parallel.layers_per_stage.clear();
  c.parallel.sequence_parallel = sp;
  c.parallel.distributed_optimizer = dist;
  c.parallel.overlap_param_gather = dist;
  c.training.micro_batch_size = mbs;
  c.training.global_batch_size = gb;
  c.model.recompute = rc;
  c.model.recompute_num_layers = 0;
  return c;
}

// Fitting layouts by tokens/s; the others after them, the nearest to fitting first.
bool better(const LayoutPrediction& a, const LayoutPrediction& b) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits && a.memory_bytes != b.memory_bytes) return a.memory_bytes < b.memory_bytes;
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  return a.memory_bytes < b.memory_bytes;
}

std::vector<int> divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) out.push_back(static_cast<int>(i));
  return out;
}

}  // namespace

std::vector<std::string> layout_overrides(const LayoutPrediction& l, const Config* base) {
  const Config* b = base;
  const auto tf = [](bool x) { return x ? "true" : "false"; };
  std::vector<std::string> s;
  // Each key unless `base` already has the value (layers_per_stage and recompute_num_layers must be
  // their defaults for the even split and whole-chunk recompute the plan assumed).
  const auto add = [&](bool same, std::string text) {
    if (!same) s.push_back(std::move(text));
  };
  add(b && b->parallel.tensor == l.tensor, fmt::format("parallel.tensor={}", l.tensor));
  add(b && b->parallel.pipeline == l.pipeline, fmt::format("parallel.pipeline={}", l.pipeline));
  add(b && b->parallel.data == l.data, fmt::format("parallel.data={}", l.data));
  add(b && b->parallel.schedule == l.schedule, fmt::format("parallel.schedule={}", schedule_kind_name(l.schedule)));
  add(b && b->parallel.virtual_stages == l.virtual_stages, fmt::format("parallel.virtual_stages={}", l.virtual_stages));
  add(b && b->parallel.layers_per_stage.empty(), "parallel.layers_per_stage=[]");
  add(b && b->parallel.sequence_parallel == l.sequence_parallel,
      fmt::format("parallel.sequence_parallel={}", tf(l.sequence_parallel)));
  add(b && b->parallel.distributed_optimizer == l.distributed_optimizer,
      fmt::format("parallel.distributed_optimizer={}", tf(l.distributed_optimizer)));
  add(b && b->parallel.overlap_param_gather == l.distributed_optimizer,
      fmt::format("parallel.overlap_param_gather={}", tf(l.distributed_optimizer)));
  add(b && b->training.micro_batch_size == l.micro_batch_size,
      fmt::format("training.micro_batch_size={}", l.micro_batch_size));
  add(b && b->training.global_batch_size == l.global_batch_size,
      fmt::format("training.global_batch_size={}", l.global_batch_size));
  add(b && b->model.recompute == l.recompute, fmt::format("model.recompute={}", recompute_name(l.recompute)));
  add(b && b->model.recompute_num_layers == 0, "model.recompute_num_layers=0");
  return s;
}

Config apply_layout(const Config& config, const LayoutPrediction& l) {
  return candidate_config(config, l.tensor, l.pipeline, l.data, l.virtual_stages, l.micro_batch_size,
                          l.global_batch_size, l.sequence_parallel, l.distributed_optimizer, l.recompute);
}

LayoutPrediction predict_layout(const Config& config, const GpuSpec& gpu, const PlanOptions& options) {
  const Planner planner(config, gpu, options);
  const ParallelLayout L = validate_layout(config, options.gpus);
  return planner.predict(config, L, /*simulate=*/true);
}

PlanResult plan_layouts(const Config& config, const GpuSpec& gpu, const PlanOptions& options) {
  const int n = options.gpus;
  if (n < 1) throw InputError(fmt::format("--gpus {}: give the number of GPUs to plan for (1 or more)", n));
  const Planner planner(config, gpu, options);
  const ModelConfig& m = config.model;
  const int64_t gb = options.global_batch > 0 ? options.global_batch : config.training.global_batch_size;
  PlanResult result;
  result.peak_flops = planner.peak;
  result.gpus_per_node = planner.gpn;
  std::vector<LayoutPrediction> all;
  std::string first_reason;
  for (int t : divisors(std::min(planner.gpn, n))) {
    if (n % t != 0 || m.num_attention_heads % t || m.num_kv_heads % t || m.ffn_hidden_size % t) continue;
    for (int p : divisors(n / t)) {
      if (m.num_layers % p != 0) continue;
      const int d = n / (t * p);
      std::vector<int> vs = {1};
      if (p > 1)
        for (int v = 2; v <= kMaxVirtualStages && p * v <= m.num_layers; ++v)
          if (m.num_layers % (p * v) == 0) vs.push_back(v);
      for (int64_t mbs = 1; mbs * d <= gb; mbs *= 2) {
        if (gb % (mbs * d) != 0) continue;
        for (int v : vs) {
          for (bool sp : {false, true}) {
            if (sp && t == 1) continue;
            for (bool dist : {false, true}) {
              if (dist && d == 1) continue;
              for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                const Config c = candidate_config(config, t, p, d, v, mbs, gb, sp, dist, rc);
                try {
                  all.push_back(planner.predict(c, validate_layout(c, n), /*simulate=*/false));
                } catch (const InputError& e) {  // not a layout this model accepts
                  if (first_reason.empty()) first_reason = e.what();
                }
              }
            }
          }
        }
      }
    }
  }
  result.candidates = static_cast<int64_t>(all.size());
  if (all.empty())
    throw InputError(fmt::format(
        "--gpus {}: no layout of this model uses {} GPUs (tensor must divide --gpus-per-node {} and the heads, "
        "kv heads and FFN size; pipeline must divide model.num_layers {}; data = GPUs / (tensor × pipeline) must "
        "divide the global batch {}){}; choose another --gpus or --global-batch",
        n, n, planner.gpn, m.num_layers, gb, first_reason.empty() ? "" : fmt::format(" (for example: {})", first_reason)));
  std::sort(all.begin(), all.end(), better);
  // Simulate the leading rows (and some behind them), re-rank, keep the requested number.
  const size_t keep = options.top > 0 ? std::min(all.size(), size_t(options.top)) : all.size();
  const size_t refine = std::min(all.size(), keep + kExtraSimulated);
  for (size_t i = 0; i < refine; ++i) {
    const Config c = apply_layout(config, all[i]);
    all[i] = planner.predict(c, validate_layout(c, n), /*simulate=*/true);
    ++result.simulated;
  }
  std::sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(refine), better);
  all.resize(keep);
  result.layouts = std::move(all);
  return result;
}

}  // namespace lattice
