// LATTICE_CUBLASLT_PROBE=N, a diagnostic (off when unset or 0): whether cuBLASLt's heuristic leaves
// GEMM time on the table. At each GEMM shape's first call, the run's algorithm (the heuristic's
// first) and up to N of the heuristic's candidates are timed on that call's own operands, writing D
// into scratch, so that nothing the run computes changes. A log line per shape gives the times; at
// exit, lines starting "cuBLASLt probe" give the run's GEMM time weighted by each shape's calls with
// the run's algorithms and with the fastest candidates, and the shapes that would save the most.
// The run keeps the heuristic's first algorithm, so its bits are those of an unprobed run. The
// probe's own runs fall in the shape's first step, which `lattice bench` does not time. On the CPU
// emulator (tests/cuda_emu/cublaslt_emu.cc) it runs too, over three algorithms that compute alike.
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

// Times `used` (the run's algorithm) and then each of the `count` heuristic candidates that differs
// from it, on the compute stream, and records them; returns the shape's index for count_call, or -1
// when `used` itself could not be timed (nothing recorded).
int measure(const Call& call, const cublasLtMatmulAlgo_t& used, const cublasLtMatmulHeuristicResult_t* candidates,
            int count);

// One more call of a measured shape (weights the exit summary).
void count_call(int index);

}  // namespace lattice::cuda::probe
