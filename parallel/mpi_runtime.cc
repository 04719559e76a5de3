// MpiRuntime: MPI start-up and shut-down.
#include "parallel/mpi_runtime.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "kernels/error.h"
#include "parallel/mpi_bf16_ops.h"
#include "parallel/mpi_communicator.h"

namespace lattice {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, length);
}

MpiRuntime::MpiRuntime(int* argc, char*** argv, int required_thread_level) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) {
    MPI_CHECK(MPI_Query_thread(&thread_level_));
  } else {
    MPI_CHECK(MPI_Init_thread(argc, argv, required_thread_level, &thread_level_));
    owns_ = true;
  }
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  owns_bf16_ops_ = create_bf16_reduce_ops();
  if (thread_level_ < required_thread_level) {
    spdlog::debug("MPI granted thread level {} (asked for {})", thread_level_, required_thread_level);
  }
}

void MpiRuntime::barrier() const { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

int MpiRuntime::agree_on_setup_failure(const std::optional<SetupFailure>& mine) const {
  int root_code = rank_ == 0 && mine ? mine->exit_code : 0;
  MPI_CHECK(MPI_Bcast(&root_code, 1, MPI_INT, 0, MPI_COMM_WORLD));
  int largest_code = mine ? mine->exit_code : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &largest_code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  const std::string message = agreed_failure_message(rank_, world_size_, root_code != 0, mine ? mine->message : "");
  if (!message.empty()) spdlog::error("{}", message);
  return root_code != 0 ? root_code : largest_code;
}

void MpiRuntime::abort_job(int exit_code) {
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler and broken MPIs
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (owns_bf16_ops_) free_bf16_reduce_ops();
  if (owns_) MPI_Finalize();
}

std::unique_ptr<MpiCommunicator> MpiRuntime::world(std::shared_ptr<Watchdog> watchdog) const {
  return MpiCommunicator::world(std::move(watchdog));
}

}  // namespace lattice
