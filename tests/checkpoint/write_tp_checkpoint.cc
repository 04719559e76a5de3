// write_tp_checkpoint CONFIG DIR: under mpirun -np T, saves the config's seeded initialization as
// a TP-T checkpoint (hand-built tensor-parallel specs) with the real parallel CheckpointWriter, for
// the CLI export test to compare against `lattice export --config`.
#include <cstdio>
#include <memory>

#include "checkpoint/checkpoint_writer.h"
#include "kernels/error.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/watchdog.h"
#include "tests/checkpoint/sharded_test_util.h"
#include "trainer/config.h"

int main(int argc, char** argv) {
  using namespace lattice;
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_tp_checkpoint CONFIG DIR\n");
    return 2;
  }
  MpiRuntime mpi(&argc, &argv);
  try {
    auto world = mpi.world(std::make_shared<Watchdog>(60.0));
    const Config c = load_config(argv[1]);
    ParameterStore store(testing::tp_shard_specs(c.model, world->rank(), world->size()), host_context());
    store.initialize(c.training.seed);
    CheckpointLayout layout;
    layout.world_size = layout.tensor = world->size();
    CheckpointWriter writer({argv[2], /*async=*/true, 0, 1}, {world.get(), nullptr}, config_to_json(c), layout);
    CheckpointState state;
    state.step = 10;
    state.seed = c.training.seed;
    writer.save(store, {&store.flat_values()}, state);
    writer.finish();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
