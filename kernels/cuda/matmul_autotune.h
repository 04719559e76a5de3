// training.gemm_autotune_dir: cuBLASLt's algorithm for each GEMM shape chosen by timing, as PyTorch's
// TunableOp does, instead of taking the heuristic's first. At a shape's first call matmul.cc times
// the heuristic's candidates on that call's operands (D into scratch: nothing the run computes
// changes) and keeps the fastest, if it beats the heuristic's first by kAutotuneMargin. A choice
// depends on timing, so two fresh runs may choose differently, and algorithms may differ in their
// bits (split K): every choice is therefore written at once to DIR/rank-NNNNN.json (replaced whole,
// never half-written), and a run given the same DIR reads its choices and times nothing it finds
// there. A resumed run, or a repeated one, with the same DIR computes the same bits.
#pragma once

#include <cublasLt.h>

#include <optional>
#include <string>

namespace lattice::cuda::autotune {

// A candidate replaces the heuristic's first only when at least this much faster: timing noise
// must not decide between equals.
constexpr double kAutotuneMargin = 0.02;

// Autotuning on, choices in DIR/rank-NNNNN.json for this rank (read now when the file exists), or
// off (dir empty). InputError naming training.gemm_autotune_dir when the file cannot be read or was
// written for another GPU model or cuBLASLt version: its algorithms are not this machine's.
void configure(const std::string& dir, int rank);
bool enabled();

// The algorithm the file holds for the shape, if any.
std::optional<cublasLtMatmulAlgo_t> saved(const std::string& shape);

// A choice made by timing: kept in memory and the file rewritten. `candidate`: its place in the
// heuristic's order (0: the heuristic's first).
struct Choice {
  cublasLtMatmulAlgo_t algo;
  int candidate;
  double heuristic_us, chosen_us;
  std::string config;  // probe::describe's words, for a reader of the file
};
void record(const std::string& shape, const Choice& choice);

// The file's path (for messages).
std::string file();

// The shape's choice (saved or recorded), counted for the exit summary: at exit a line starting
// "cuBLASLt autotune:" gives the run's GEMM time, each shape weighted by its calls, with the
// heuristic's first algorithms and with the chosen ones, as timed when each was chosen. Returns the
// index count_call takes.
int track(const std::string& shape, bool timed_now);
void count_call(int index);

}  // namespace lattice::cuda::autotune
