// The CPU's bf16 matmul against its f32 sgemm at GPT-2 124M sizes (micro-batch 8 x seq 1024 tokens,
// hidden 768): ops::matmul with bf16 a and b and an f32 or bf16 c runs as widen, sgemm, round
// (kernels/f32_staging.h; OpenBLAS here exports no sbgemm). Prints GFLOP/s of each, from the best of
// `reps` timed runs after a warm-up, and bf16 / f32. Usage: bf16_matmul_bench [reps (default 3)].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kernels/blas_runtime.h"
#include "kernels/ops.h"

namespace lattice {
namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor f32 = Tensor::empty(shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < f32.numel(); ++i) f32.f32()[i] = dist(gen);
  Tensor t = Tensor::empty(shape, dtype);
  ops::cast(f32, t);
  return t;
}

// Best seconds of each run over `reps` rounds after one warm-up round (first touch, the staging's
// scratch). Each round times every run once, so a load change on a shared machine hits them alike.
std::vector<double> best_seconds(int reps, const std::vector<std::function<void()>>& runs) {
  for (const auto& run : runs) run();
  std::vector<double> best(runs.size(), 1e30);
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      runs[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  return best;
}

struct Problem {
  const char* name;
  Shape a, b;
  bool trans_a, trans_b;
  Shape c;
  float beta;
};

}  // namespace
}  // namespace lattice

int main(int argc, char** argv) {
  using namespace lattice;
  ensure_fast_blas(argc, argv);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  std::printf("%s, best of %d\n", blas_kernel_description().c_str(), reps);
  const Problem problems[] = {
      {"qkv   x[8192,768] @ W[768,2304]", {8192, 768}, {768, 2304}, false, false, {8192, 2304}, 0.0f},
      {"fc    x[8192,768] @ W[3072,768]^T", {8192, 768}, {3072, 768}, false, true, {8192, 3072}, 0.0f},
      {"wgrad dW[768,3072] += x^T @ dy, beta 1", {8192, 768}, {8192, 3072}, true, false, {768, 3072}, 1.0f},
  };
  std::printf("%-40s %12s %18s %18s %11s %11s\n", "problem", "f32 GFLOP/s", "bf16->f32 GFLOP/s", "bf16->bf16 GFLOP/s",
              "ratio f32c", "ratio bf16c");
  for (const Problem& p : problems) {
    const double m = p.c[0], n = p.c[1], k = p.trans_a ? p.a[0] : p.a[1];
    // f32 in and out; bf16 in, f32 out; bf16 in and out.
    const DType dtypes[3][2] = {{DType::kF32, DType::kF32}, {DType::kBF16, DType::kF32}, {DType::kBF16, DType::kBF16}};
    std::vector<Tensor> a, b, c;
    std::vector<std::function<void()>> runs;
    for (const auto& [in, out] : dtypes) {
      a.push_back(random_tensor(p.a, in, 1));
      b.push_back(random_tensor(p.b, in, 2));
      c.push_back(random_tensor(p.c, out, 3));
      runs.push_back([&, i = runs.size()] { ops::matmul(a[i], p.trans_a, b[i], p.trans_b, c[i], 1.0f, p.beta); });
    }
    const std::vector<double> seconds = best_seconds(reps, runs);
    double gflops[3];
    for (int i = 0; i < 3; ++i) gflops[i] = 2 * m * n * k / seconds[i] / 1e9;
    std::printf("%-40s %12.1f %18.1f %18.1f %11.2f %11.2f\n", p.name, gflops[0], gflops[1], gflops[2],
                gflops[1] / gflops[0], gflops[2] / gflops[0]);
  }
  return 0;
}
