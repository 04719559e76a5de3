#include "kernels/cuda/matmul_probe.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/runtime.h"

namespace lattice::cuda::probe {

namespace {

struct Shape {
  std::string name;
  double first_us = 0.0;  // the run's algorithm
  double best_us = 0.0;   // the fastest of it and the candidates
  int best = -1;          // its place in the heuristic's order; -1: the run's own
  std::string best_config;
  long long calls = 0;
};

std::mutex mutex;
std::vector<Shape> shapes;

template <class T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS) {
    return T{};
  }
  return value;
}

bool launch(const Call& c, void* d, const cublasLtMatmulAlgo_t& algo) {
  return cublasLtMatmul(c.handle, c.op, &c.alpha, c.a, c.a_layout, c.b, c.b_layout, &c.beta, c.c, c.c_layout, d,
                        c.c_layout, &algo, c.workspace, c.workspace_bytes, compute_stream()) == CUBLAS_STATUS_SUCCESS;
}

// Microseconds per call of `algo`, on the compute stream; negative where cuBLASLt refuses to run it.
double time_us(const Call& c, void* d, const cublasLtMatmulAlgo_t& algo, cudaEvent_t start, cudaEvent_t stop) {
  if (!launch(c, d, algo)) {  // also the warm-up
    (void)cudaGetLastError();   // a launch error it left must not surface at our next kernel's check
    return -1.0;
  }
  auto timed = [&](int reps) {
    LATTICE_CUDA_CHECK(cudaEventRecord(start, compute_stream()));
    for (int i = 0; i < reps; ++i) launch(c, d, algo);
    LATTICE_CUDA_CHECK(cudaEventRecord(stop, compute_stream()));
    LATTICE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    LATTICE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return 1000.0 * ms / reps;
  };
  const double once = timed(1);
  // About 2 ms of calls, so that event resolution and launch jitter stay small against the time.
  const int reps = static_cast<int>(std::clamp(2000.0 / std::max(once, 1.0), 3.0, 50.0));
  return timed(reps);
}

double tflops(double flops, double us) { return flops / (us * 1e-6) / 1e12; }

// At exit: the run's GEMM time, each shape weighted by its calls, with the run's
// algorithms and with the fastest candidates; then the shapes where the difference is largest.
void summarize() {
  std::unique_lock<std::mutex> lock(mutex, std::try_to_lock);
  if (!lock.owns_lock() || shapes.empty()) return;
  double first = 0.0, best = 0.0;
  for (const Shape& s : shapes) {
    first += s.first_us * static_cast<double>(s.calls);
    best += s.best_us * static_cast<double>(s.calls);
  }
  std::printf("cuBLASLt probe: %zu GEMM shapes, up to %d candidates each; weighted by their calls, the run's "
              "algorithms take %.1f ms, the fastest candidates %.1f ms (%+.1f%%)\n",
              shapes.size(), candidates(), first / 1000.0, best / 1000.0,
              first > 0.0 ? 100.0 * (best - first) / first : 0.0);
  std::vector<const Shape*> order;
  for (const Shape& s : shapes) order.push_back(&s);
  auto saved = [](const Shape* s) { return (s->first_us - s->best_us) * static_cast<double>(s->calls); };
  std::sort(order.begin(), order.end(), [&](const Shape* x, const Shape* y) { return saved(x) > saved(y); });
  for (size_t i = 0; i < order.size() && i < 8 && saved(order[i]) > 0.0; ++i) {
    const Shape& s = *order[i];
    std::printf("cuBLASLt probe:   %s: %lld calls, %.1f -> %.1f us (%+.1f%%) with candidate #%d (%s)\n", s.name.c_str(),
                s.calls, s.first_us, s.best_us, 100.0 * (s.best_us - s.first_us) / s.first_us, s.best,
                s.best_config.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int candidates() {
  static const int n = [] {
    const char* v = std::getenv("LATTICE_CUBLASLT_PROBE");
    return v == nullptr ? 0 : std::clamp(std::atoi(v), 0, 64);
  }();
  return n;
}

std::string describe(const cublasLtMatmulAlgo_t& algo) {
  return fmt::format("algo {}, tile {}, stages {}, split-K {}, reduction {}",
                     config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID), config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                     config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                     config<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                     config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
}

Timing time_candidates(const Call& call, const cublasLtMatmulAlgo_t& used,
                       const cublasLtMatmulHeuristicResult_t* candidates, int count) {
  void* d = allocate(std::max<size_t>(call.d_bytes, 1));
  cudaEvent_t start = nullptr, stop = nullptr;
  LATTICE_CUDA_CHECK(cudaEventCreate(&start));
  LATTICE_CUDA_CHECK(cudaEventCreate(&stop));
  Timing t;
  t.used_us = time_us(call, d, used, start, stop);
  double candidate_us = -1.0;
  for (int i = 0; i < count && t.used_us > 0.0; ++i) {
    const bool same = std::memcmp(&candidates[i].algo, &used, sizeof(used)) == 0;
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS || same) continue;
    const double us = time_us(call, d, candidates[i].algo, start, stop);
    if (us > 0.0 && (candidate_us < 0.0 || us < candidate_us)) {
      candidate_us = us;
      t.best = i;
    }
  }
  // `used` again, last, its time the better of the two: timed only first, it would be the one that
  // ran while the clocks may still have been rising, which would favour any candidate over it.
  if (t.used_us > 0.0 && t.best >= 0) {
    const double again = time_us(call, d, used, start, stop);
    if (again > 0.0) t.used_us = std::min(t.used_us, again);
  }
  t.best_us = t.used_us;
  if (t.best >= 0 && candidate_us < t.used_us) {
    t.best_us = candidate_us;
  } else {
    t.best = -1;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  release(d);
  return t;
}

int measure(const Call& call, const cublasLtMatmulAlgo_t& used, const cublasLtMatmulHeuristicResult_t* candidates,
            int count) {
  const Timing t = time_candidates(call, used, candidates, count);
  if (t.used_us <= 0.0) {
    spdlog::warn("cuBLASLt probe: {}: the run's algorithm did not run alone; shape not probed", call.shape);
    return -1;
  }
  Shape shape{call.shape, t.used_us, t.best_us, t.best, describe(t.best < 0 ? used : candidates[t.best].algo)};
  spdlog::info("cuBLASLt probe: {}: the run's algorithm {:.1f} us ({:.0f} TFLOP/s; {}); fastest of {} candidates: "
               "{:.1f} us ({:.0f} TFLOP/s, {:+.1f}%; {})",
               call.shape, shape.first_us, tflops(call.flops, shape.first_us), describe(used), count,
               shape.best_us, tflops(call.flops, shape.best_us),
               100.0 * (shape.best_us - shape.first_us) / shape.first_us,
               shape.best < 0 ? "the run's own" : fmt::format("#{}, {}", shape.best, shape.best_config));
  std::lock_guard<std::mutex> lock(mutex);
  if (shapes.empty()) std::atexit(summarize);
  shapes.push_back(std::move(shape));
  return static_cast<int>(shapes.size()) - 1;
}

void count_call(int index) {
  std::lock_guard<std::mutex> lock(mutex);
  if (index >= 0 && index < static_cast<int>(shapes.size())) ++shapes[static_cast<size_t>(index)].calls;
}

}  // namespace lattice::cuda::probe
