// LATTICE_CUBLASLT_PROBE=N, a diagnostic (off when unset or 0): whether cuBLASLt's heuristic leaves
// GEMM time on the table. At each GEMM shape's first call, the run's algorithm (the heuristic's
// first, or training.gemm_autotune_dir's choice: matmul_autotune.h, which times candidates with
// time_candidates below) and up to N of the heuristic's candidates are timed on that call's own
// operands, writing D into scratch, so that nothing the run computes changes. A log line per shape
// gives the times; at exit, lines starting "cuBLASLt probe" give the run's GEMM time weighted by
// each shape's calls with the run's algorithms and with the fastest candidates, and the shapes that
// would save the most. The run keeps its algorithm, so its bits are those of an unprobed run. The
// probe's own runs fall in the shape's first step, which `lattice bench` does not time. On the CPU
// emulator (tests/cuda_emu/cublaslt_emu.cc) it runs too, over its three algorithms.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <string>

namespace lattice::cuda::probe {

// N from LATTICE_CUBLASLT_PROBE (0: off), read once.
int candidates();

// One cublasLtMatmul call as the run makes it, but for D: the probe writes D into scratch (C is
// only read, so beta != 0 reads the run's C unchanged).
struct Call {
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a_layout, b_layout, c_layout;
  float alpha, beta;
  const void* a;
  const void* b;
  const void* c;
  void* workspace;
  size_t workspace_bytes;
  size_t d_bytes;  // the extent of D under c_layout
  double flops;    // 2 m n k per product, for the log's TFLOP/s
  std::string shape;  // for the log
};

// `used` (the run's algorithm) and the fastest of the `count` heuristic candidates that differ from
// it, timed on the compute stream (microseconds per call; used_us < 0: `used` did not run alone).
// `used` is timed first and again after the candidates, and keeps the better of its two times.
struct Timing {
  double used_us = -1.0;
  double best_us = -1.0;
  int best = -1;  // the fastest's index among the candidates; -1: `used` itself
};
Timing time_candidates(const Call& call, const cublasLtMatmulAlgo_t& used,
                       const cublasLtMatmulHeuristicResult_t* candidates, int count);

// What tells one algorithm from another in a log: its kernel, tile, stages and split of K.
std::string describe(const cublasLtMatmulAlgo_t& algo);

// time_candidates, logged and recorded for the exit summary; returns the shape's index for
// count_call, or -1 when `used` itself could not be timed (nothing recorded).
int measure(const Call& call, const cublasLtMatmulAlgo_t& used, const cublasLtMatmulHeuristicResult_t* candidates,
            int count);

// One more call of a measured shape (weights the exit summary).
void count_call(int index);

}  // namespace lattice::cuda::probe
