// This rank's grid position and process groups during training: the job's (mpirun/srun), or
// one-process groups when there is no job.
#pragma once

#include <memory>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/grid.h"
#include "trainer/train_loop.h"

namespace lattice {

struct RankContext {
  RankGrid grid{1, 0, 1, 1, 1};
  Communicator* world = nullptr;
  Communicator* tp = nullptr;
  Communicator* dp = nullptr;
  Communicator* pp = nullptr;
  Communicator* embedding = nullptr;  // nullptr on middle pipeline stages
  std::vector<std::unique_ptr<Communicator>> owned;  // the one-process groups
};

// The groups of options.grid, or one-process groups when options.grid is nullptr.
RankContext make_rank_context(const TrainOptions& options);

}  // namespace lattice
