// checkpoint_bench: runs bench_checkpoint for the GPT-2 124M shape and prints its figures.
// Usage: checkpoint_bench [DIR] [ASYNC_SAVES] [STEP_SECONDS]   (DIR: new or empty; what the benchmark wrote
// there is deleted at the end)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "checkpoint/checkpoint_bench.h"
#include "kernels/error.h"

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/lattice_checkpoint_bench";
  const int saves = argc > 2 ? std::atoi(argv[2]) : 3;
  const double step_s = argc > 3 ? std::atof(argv[3]) : 0.1;
  try {
    const auto r = lattice::bench_checkpoint(lattice::gpt2_124m_config(), dir, saves, step_s);
    std::printf("%s", lattice::format_checkpoint_bench(r).c_str());
  } catch (const lattice::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
