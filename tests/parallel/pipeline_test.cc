// Multi-rank tests of the pipeline executor (run under mpirun -np 2 and -np 4; p = world size):
// a toy stack of L affine+tanh layers split over p ranks × v chunks by the virtual-stage layout,
// run under every schedule, must give every rank the parameter gradients and the loss that a
// single-process pass over all layers gives (computed in this binary on every rank).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "parallel/p2p_order.h"
#include "parallel/pipeline_executor.h"
#include "parallel/schedule.h"
#include "parallel/trace.h"
#include "tests/parallel/mpi_test_main.h"

namespace lattice {
namespace {

using testing::world;

constexpr int kRows = 2;      // micro-batch size
constexpr int kFeatures = 4;  // hidden size
constexpr int kLayersPerStage = 2;

float weight(int layer, int i, int j) { return 0.6f * std::sin(1.3f * layer + 0.7f * i + 0.3f * j + 0.1f); }
float bias(int layer, int i) { return 0.1f * std::cos(1.0f * layer + i); }
float data(int mb, int row, int j) { return std::sin(0.9f * mb + 0.5f * row + 0.21f * j); }

using Mat = std::vector<float>;  // kRows × kFeatures, row-major

// Layers [first_layer, end_layer) of y = tanh(W_l x + b_l); loss = sum of squares of the last output.
class ToyStage : public PipelineStage {
 public:
  ToyStage(int first_layer, int end_layer, int total_layers, int* inflight, int* peak_inflight)
      : first_(first_layer), end_(end_layer), total_(total_layers), inflight_(inflight), peak_(peak_inflight) {
    for (int l = first_; l < end_; ++l) {
      Mat w(kFeatures * kFeatures), b(kFeatures);
      for (int i = 0; i < kFeatures; ++i) {
        b[i] = bias(l, i);
        for (int j = 0; j < kFeatures; ++j) w[i * kFeatures + j] = weight(l, i, j);
      }
      w_.push_back(w);
      b_.push_back(b);
      dw_.emplace_back(kFeatures * kFeatures, 0.f);
      db_.emplace_back(kFeatures, 0.f);
    }
  }

  Shape activation_shape() const override { return {kRows, kFeatures}; }
  DType activation_dtype() const override { return DType::kF32; }

  void forward(int mb, const Tensor& input, Tensor& output) override {
    const bool first = first_ == 0, last = end_ == total_;
    REQUIRE(input.defined() == !first);
    REQUIRE(output.defined() == !last);
    REQUIRE(saved_.count(mb) == 0);
    Mat x(kRows * kFeatures);
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < kFeatures; ++j) x[r * kFeatures + j] = first ? data(mb, r, j) : input.f32()[r * kFeatures + j];
    std::vector<Mat>& acts = saved_[mb];
    acts.push_back(x);
    for (size_t k = 0; k < w_.size(); ++k) {
      Mat y(kRows * kFeatures);
      for (int r = 0; r < kRows; ++r)
        for (int i = 0; i < kFeatures; ++i) {
          float z = b_[k][i];
          for (int j = 0; j < kFeatures; ++j) z += w_[k][i * kFeatures + j] * x[r * kFeatures + j];
          y[r * kFeatures + i] = std::tanh(z);
        }
      acts.push_back(y);
      x = y;
    }
    if (last) {
      for (float e : x) loss += e * e;
    } else {
      for (int e = 0; e < kRows * kFeatures; ++e) output.f32()[e] = x[e];
    }
    *peak_ = std::max(*peak_, ++*inflight_);
  }

  void backward(int mb, const Tensor& grad_output, Tensor& grad_input) override {
    const bool first = first_ == 0, last = end_ == total_;
    REQUIRE(grad_output.defined() == !last);
    REQUIRE(grad_input.defined() == !first);
    REQUIRE(saved_.count(mb) == 1);
    std::vector<Mat> acts = std::move(saved_[mb]);
    saved_.erase(mb);
    Mat g(kRows * kFeatures);
    for (int e = 0; e < kRows * kFeatures; ++e) g[e] = last ? 2.f * acts.back()[e] : grad_output.f32()[e];
    for (int k = static_cast<int>(w_.size()) - 1; k >= 0; --k) {
      const Mat& x = acts[k];
      const Mat& y = acts[k + 1];
      Mat dz(kRows * kFeatures), dx(kRows * kFeatures, 0.f);
      for (int e = 0; e < kRows * kFeatures; ++e) dz[e] = g[e] * (1.f - y[e] * y[e]);
      for (int r = 0; r < kRows; ++r)
        for (int i = 0; i < kFeatures; ++i) {
          const float d = dz[r * kFeatures + i];
          db_[k][i] += d;
          for (int j = 0; j < kFeatures; ++j) {
            dw_[k][i * kFeatures + j] += d * x[r * kFeatures + j];
            dx[r * kFeatures + j] += w_[k][i * kFeatures + j] * d;
          }
        }
      g = dx;
    }
    if (!first) {
      for (int e = 0; e < kRows * kFeatures; ++e) grad_input.f32()[e] = g[e];
    }
    --*inflight_;
  }

  int first_layer() const { return first_; }
  int num_layers() const { return end_ - first_; }
  const Mat& dw(int k) const { return dw_[k]; }
  const Mat& db(int k) const { return db_[k]; }
  bool idle() const { return saved_.empty(); }
  float loss = 0;

 private:
  int first_, end_, total_;
  int* inflight_;
  int* peak_;
  std::vector<Mat> w_, b_, dw_, db_;
  std::map<int, std::vector<Mat>> saved_;
};

void check_close(const Mat& got, const Mat& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (size_t e = 0; e < got.size(); ++e) {
    INFO(what << " element " << e << ": got " << got[e] << ", want " << want[e]);
    CHECK(std::abs(got[e] - want[e]) <= 1e-6f * std::max(1.f, std::abs(want[e])));
  }
}

struct Config {
  ScheduleKind kind;
  int v;
  int m;
};

// Runs `kind` with v chunks and m micro-batches on `group` (p = its size) and checks gradients and
// loss against the one-process reference. Returns the step stats of the (last) step.
PipelineStepStats run_and_check(Communicator& group, const Config& cfg, Tracer& tracer, int steps = 1,
                                bool ordered_p2p = false) {
  const int p = group.size(), rank = group.rank(), v = cfg.v, m = cfg.m;
  const int total_layers = kLayersPerStage * p * v;
  INFO("schedule " << schedule_kind_name(cfg.kind) << " p=" << p << " v=" << v << " m=" << m << " rank " << rank);

  int ref_inflight = 0, ref_peak = 0;
  ToyStage reference(0, total_layers, total_layers, &ref_inflight, &ref_peak);
  for (int step = 0; step < steps; ++step) {
    for (int mb = 0; mb < m; ++mb) {
      Tensor none;
      reference.forward(mb, none, none);
      reference.backward(mb, none, none);
    }
  }

  int inflight = 0, peak = 0;
  std::vector<std::unique_ptr<ToyStage>> stages;
  std::vector<PipelineStage*> chunks;
  for (int c = 0; c < v; ++c) {
    const int vs = virtual_stage(p, rank, c);
    stages.push_back(std::make_unique<ToyStage>(vs * kLayersPerStage, (vs + 1) * kLayersPerStage, total_layers,
                                                &inflight, &peak));
    chunks.push_back(stages.back().get());
  }
  const std::vector<Action> actions = make_schedule(cfg.kind, p, v, m, rank);
  PipelineExecutor executor(group, tracer, host_context(), ordered_p2p);
  PipelineStepStats stats;
  for (int step = 0; step < steps; ++step) {
    stats = executor.run(actions, chunks).stats();
    CHECK(stats.forwards == m * v);
    CHECK(stats.backwards == m * v);
    if (step > 0) CHECK(stats.buffers_allocated == 0);  // the pool is reused
  }
  CHECK(peak <= max_inflight_bound(cfg.kind, p, v, m, rank));
  for (int c = 0; c < v; ++c) {
    const ToyStage& s = *stages[c];
    CHECK(s.idle());
    for (int k = 0; k < s.num_layers(); ++k) {
      const int layer = s.first_layer() + k;
      check_close(s.dw(k), reference.dw(layer), "dW of layer " + std::to_string(layer));
      check_close(s.db(k), reference.db(layer), "db of layer " + std::to_string(layer));
    }
    if (virtual_stage(p, rank, c) == p * v - 1) {
      INFO("loss " << s.loss << " vs reference " << reference.loss);
      CHECK(std::abs(s.loss - reference.loss) <= 1e-6f * std::abs(reference.loss));
    } else {
      CHECK(s.loss == 0.f);
    }
  }
  return stats;
}

std::vector<Config> configs_for(int p) {
  std::vector<Config> out;
  for (int m : {p, 2 * p}) {
    out.push_back({ScheduleKind::kGPipe, 1, m});
    out.push_back({ScheduleKind::kOneFOneB, 1, m});
    out.push_back({ScheduleKind::kInterleaved, 1, m});
    out.push_back({ScheduleKind::kInterleaved, 2, m});
  }
  return out;
}

TEST_CASE("every schedule gives the one-process gradients and loss") {
  auto& w = world();
  Tracer tracer("", w.rank());
  for (const Config& cfg : configs_for(w.size())) {
    run_and_check(w, cfg, tracer);
  }
}

// NCCL's matching on MPI: no tags (all 0) and each lane its own group, so a transfer issued out of
// order would be received as another micro-batch's tensor and the gradients would differ.
TEST_CASE("ordered point-to-point on lanes gives the one-process gradients and loss for every schedule") {
  auto& w = world();
  Tracer tracer("", w.rank());
  for (const Config& cfg : configs_for(w.size())) {
    run_and_check(w, cfg, tracer, 2, /*ordered_p2p=*/true);
  }
}

// What the executor hands a transport, in order: "send <group>" / "recv <group>" on the lanes'
// groups, and "compute" for each forward or backward (logged by LoggedStage).
using IssueLog = std::vector<std::string>;

class RecordingCommunicator : public Communicator {
 public:
  RecordingCommunicator(std::unique_ptr<Communicator> owned, Communicator& inner, IssueLog& log)
      : Communicator(inner.watchdog_ptr()), owned_(std::move(owned)), inner_(inner), log_(log) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  const std::vector<int>& world_ranks() const override { return inner_.world_ranks(); }
  std::string describe() const override { return inner_.describe(); }
  CommHandle all_reduce_async(const Tensor& t, ReduceOp op) override { return inner_.all_reduce_async(t, op); }
  CommHandle reduce_scatter_async(const Tensor& in, const Tensor& out) override {
    return inner_.reduce_scatter_async(in, out);
  }
  CommHandle all_gather_async(const Tensor& in, const Tensor& out) override { return inner_.all_gather_async(in, out); }
  CommHandle broadcast_async(const Tensor& t, int root) override { return inner_.broadcast_async(t, root); }
  CommHandle send_async(const Tensor& in, int dst, int tag) override {
    log_.push_back("send " + name());
    return inner_.send_async(in, dst, tag);
  }
  CommHandle recv_async(const Tensor& out, int src, int tag) override {
    log_.push_back("recv " + name());
    return inner_.recv_async(out, src, tag);
  }
  CommHandle all_to_all_async(const Tensor& in, const Tensor& out) override { return inner_.all_to_all_async(in, out); }
  CommHandle barrier_async() override { return inner_.barrier_async(); }
  std::unique_ptr<Communicator> split(int color, int key, std::string name, std::string detail) override {
    std::unique_ptr<Communicator> g = inner_.split(color, key, std::move(name), std::move(detail));
    if (g == nullptr) return nullptr;
    Communicator& ref = *g;
    return std::make_unique<RecordingCommunicator>(std::move(g), ref, log_);
  }
  HostChannel& host() override { return inner_.host(); }

 private:
  std::unique_ptr<Communicator> owned_;  // a split's group (the world is not owned)
  Communicator& inner_;
  IssueLog& log_;
};

class LoggedStage : public PipelineStage {
 public:
  LoggedStage(PipelineStage& stage, IssueLog& log) : stage_(stage), log_(log) {}
  Shape activation_shape() const override { return stage_.activation_shape(); }
  DType activation_dtype() const override { return stage_.activation_dtype(); }
  void forward(int mb, const Tensor& input, Tensor& output) override {
    log_.push_back("compute");
    stage_.forward(mb, input, output);
  }
  void backward(int mb, const Tensor& grad_output, Tensor& grad_input) override {
    log_.push_back("compute");
    stage_.backward(mb, grad_output, grad_input);
  }

 private:
  PipelineStage& stage_;
  IssueLog& log_;
};

// The device models of check_ordered_p2p take each rank's host issue order from p2p_host_order; the
// proof holds for the executor only if it issues exactly that: every compute and every transfer, on
// the lane's group, in that order.
TEST_CASE("on lanes the executor issues computes and transfers in p2p_host_order, the order the proof models") {
  auto& w = world();
  const int p = w.size(), r = w.rank();
  // The lane groups PipelineLanes names: activations go from k to k + 1, gradients from k + 1 to k.
  auto group_of = [&](P2pLane lane) {
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    switch (lane) {
      case P2pLane::kSendActivation: return fmt::format("send pp activations {}->{}", r, next);
      case P2pLane::kRecvActivation: return fmt::format("recv pp activations {}->{}", prev, r);
      case P2pLane::kSendGrad: return fmt::format("send pp gradients {}->{}", r, prev);
      case P2pLane::kRecvGrad: return fmt::format("recv pp gradients {}->{}", next, r);
    }
    return std::string();
  };
  for (const Config& cfg : configs_for(p)) {
    INFO("schedule " << schedule_kind_name(cfg.kind) << " p=" << p << " v=" << cfg.v << " m=" << cfg.m
                     << " rank " << r);
    IssueLog log;
    RecordingCommunicator recording(nullptr, w, log);
    Tracer tracer("", r);
    PipelineExecutor executor(recording, tracer, host_context(), /*ordered_p2p=*/true);
    // Made with the executor: one connecting transfer on each of the four lanes.
    std::vector<std::string> connected = log, lanes;
    for (P2pLane lane : {P2pLane::kSendActivation, P2pLane::kRecvActivation, P2pLane::kSendGrad, P2pLane::kRecvGrad})
      lanes.push_back(group_of(lane));
    std::sort(connected.begin(), connected.end());
    std::sort(lanes.begin(), lanes.end());
    CHECK(connected == lanes);
    log.clear();

    const int total_layers = kLayersPerStage * p * cfg.v;
    int inflight = 0, peak = 0;
    std::vector<std::unique_ptr<ToyStage>> stages;
    std::vector<std::unique_ptr<LoggedStage>> logged;
    std::vector<PipelineStage*> chunks;
    for (int c = 0; c < cfg.v; ++c) {
      const int vs = virtual_stage(p, r, c);
      stages.push_back(std::make_unique<ToyStage>(vs * kLayersPerStage, (vs + 1) * kLayersPerStage, total_layers,
                                                  &inflight, &peak));
      logged.push_back(std::make_unique<LoggedStage>(*stages.back(), log));
      chunks.push_back(logged.back().get());
    }
    const std::vector<Action> actions = make_schedule(cfg.kind, p, cfg.v, cfg.m, r);
    executor.run(actions, chunks);
    IssueLog want;
    for (size_t i : p2p_host_order(actions, r))
      want.push_back(is_compute(actions[i].type) ? "compute" : group_of(p2p_lane(actions[i].type)));
    CHECK(log == want);
  }
}

TEST_CASE("a second step reuses the buffer pool and accumulates like two reference passes") {
  auto& w = world();
  Tracer tracer("", w.rank());
  run_and_check(w, {ScheduleKind::kInterleaved, 2, 2 * w.size()}, tracer, 2);
  run_and_check(w, {ScheduleKind::kOneFOneB, 1, 2 * w.size()}, tracer, 2);
}

TEST_CASE("p = 1 with virtual stages hands activations over locally") {
  auto& w = world();
  // Each rank alone in its own pp group of size 1.
  auto solo = w.split(w.rank(), 0, "pp", "solo");
  REQUIRE(solo->size() == 1);
  Tracer tracer("", w.rank());
  for (int m : {1, 3}) {
    run_and_check(*solo, {ScheduleKind::kInterleaved, 3, m}, tracer);
    run_and_check(*solo, {ScheduleKind::kOneFOneB, 1, m}, tracer);
  }
}

TEST_CASE("the trace shows forward/backward per micro-batch and chunk and the receive waits") {
  auto& w = world();
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/pipeline_trace_{rank}.json";
  std::string file;
  {
    Tracer tracer(path, w.rank());
    run_and_check(w, {ScheduleKind::kInterleaved, 2, w.size()}, tracer);
    tracer.flush();
    file = tracer.path();
  }
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  CHECK(text.find("\"forward\"") != std::string::npos);
  CHECK(text.find("\"backward\"") != std::string::npos);
  CHECK(text.find("\"chunk\":1") != std::string::npos);
  CHECK(text.find("\"microbatch\"") != std::string::npos);
  CHECK(text.find(w.rank() == 0 ? "\"recv_grad\"" : "\"recv_activation\"") != std::string::npos);
}

TEST_CASE("a schedule that names the wrong peer is rejected before it can hang") {
  auto& w = world();
  Tracer tracer("", w.rank());
  int inflight = 0, peak = 0;
  ToyStage stage(0, 1, 1, &inflight, &peak);
  std::vector<Action> actions = make_schedule(ScheduleKind::kOneFOneB, w.size(), 1, w.size(), w.rank());
  for (Action& a : actions) {
    if (a.peer >= 0) a.peer = (a.peer + 1) % w.size() == w.rank() ? (a.peer + 2) % w.size() : (a.peer + 1) % w.size();
  }
  PipelineExecutor executor(w, tracer, host_context());
  if (w.size() > 2) {
    CHECK_THROWS_WITH(executor.run(actions, {&stage}), Catch::Contains("the layout says"));
  }
}

TEST_CASE("measured bubble (printed next to theory)") {
  auto& w = world();
  Tracer tracer("", w.rank());
  const int p = w.size();
  for (const Config& cfg : {Config{ScheduleKind::kOneFOneB, 1, 2 * p}, Config{ScheduleKind::kInterleaved, 2, 2 * p}}) {
    PipelineStepStats stats = run_and_check(w, cfg, tracer, 2);
    const double bubble = measured_bubble(stats, w);
    CHECK(bubble >= 0.0);
    CHECK(bubble <= 1.0);
    if (w.rank() == 0) {
      std::printf("p=%d %s v=%d m=%d: measured bubble %.3f (theory %.3f), rank 0 idle %.3f, buffers %lld\n", p,
                  schedule_kind_name(cfg.kind), cfg.v, cfg.m, bubble, theoretical_bubble(cfg.kind, p, cfg.v, cfg.m),
                  stats.idle_fraction(), static_cast<long long>(stats.buffers));
    }
  }
}

}  // namespace
}  // namespace lattice
