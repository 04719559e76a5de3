// The watchdog over NCCL, end to end on the emulated NCCL: under mpirun with 2 ranks, rank 0 enters an
// all_reduce of a CUDA tensor on an NCCL communicator and waits for it; rank 1 never enters it. The
// watchdog (timeout from argv[1], seconds) must end the job with exit code 3 and a message naming
// the rank, the group and the operation, as on the MPI path.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "kernels/cuda/runtime.h"
#include "kernels/device_context.h"
#include "parallel/mpi_communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/nccl_communicator.h"
#include "parallel/watchdog.h"
#include "trainer/logging_setup.h"

int main(int argc, char** argv) {
  using namespace lattice;
  MpiRuntime mpi(&argc, &argv);
  const double timeout_s = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto watchdog = std::make_shared<Watchdog>(timeout_s);
  auto world = mpi.world(watchdog);
  setup_logging(mpi.rank(), 0, 0, mpi.rank());
  cuda::select_device(mpi.rank(), mpi.world_size());
  const DeviceContext gpu(Device::kCuda);
  NcclCommunicator nccl(world->split(0, mpi.rank(), "nccl-hang", "rank 1 never joins"));
  world->barrier();
  if (mpi.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // the job must end before this returns
    spdlog::error("rank 1 woke up: the watchdog did not end the job");
    return 0;
  }
  Tensor t = gpu.to_device(Tensor::zeros({1024}));
  nccl.all_reduce_async(t).wait();
  spdlog::error("rank 0 passed the all_reduce: the watchdog did not end the job");
  return 0;
}
