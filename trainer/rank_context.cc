// The training run's groups: the job's, or LocalCommunicator stand-ins for one process.
#include "trainer/rank_context.h"

#include "kernels/error.h"
#include "parallel/local_communicator.h"

namespace lattice {

RankContext make_rank_context(const TrainOptions& o) {
  RankContext r;
  if (o.grid != nullptr) {
    LATTICE_CHECK(o.groups != nullptr && o.world != nullptr, "a parallel job needs its process groups and world");
    r.grid = *o.grid;
    r.world = o.world;
    r.tp = o.groups->tp.get();
    r.dp = o.groups->dp.get();
    r.pp = o.groups->pp.get();
    r.embedding = o.groups->embedding.get();
    return r;
  }
  for (const char* name : {"world", "tp", "dp", "pp", "embedding"}) r.owned.push_back(std::make_unique<LocalCommunicator>(name));
  r.world = r.owned[0].get();
  r.tp = r.owned[1].get();
  r.dp = r.owned[2].get();
  r.pp = r.owned[3].get();
  r.embedding = r.owned[4].get();
  return r;
}

}  // namespace lattice
