// MpiRuntime: MPI_Init_thread / MPI_Finalize as RAII, this process's world rank and size, and the
// MPI_CHECK macro. Launch: `mpirun -np N lattice ...` (as root add --allow-run-as-root, and
// --oversubscribe for more ranks than cores), or under Slurm `srun --mpi=pmix -n N lattice ...`
// (OpenMPI built with PMIx; one task per accelerator). Without a launcher it runs as one rank.
#pragma once

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "kernels/error.h"

// Calls an MPI function; on failure throws lattice::Error naming file:line, the call and MPI's
// error text. Communicators made here use MPI_ERRORS_RETURN so that errors reach this macro.
#define MPI_CHECK(call)                                                              \
  do {                                                                               \
    int mpi_check_rc_ = (call);                                                      \
    if (mpi_check_rc_ != MPI_SUCCESS) {                                              \
      throw ::lattice::Error(::fmt::format("{}:{}: {} failed: {}", __FILE__, __LINE__, \
                                           #call, ::lattice::mpi_error_string(mpi_check_rc_))); \
    }                                                                                \
  } while (0)

namespace lattice {

class MpiCommunicator;
class Watchdog;

std::string mpi_error_string(int code);

class MpiRuntime {
 public:
  // Initializes MPI unless it already is (then leaves finalizing to whoever initialized it), and
  // creates the bf16 reduction ops (parallel/mpi_bf16_ops.h) unless they exist; the destructor frees
  // the ops it created. Asks for MPI_THREAD_MULTIPLE by default so that background threads may
  // communicate; thread_level() says what the library granted.
  MpiRuntime(int* argc, char*** argv, int required_thread_level = MPI_THREAD_MULTIPLE);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int thread_level() const { return thread_level_; }

  // A communicator over all ranks (a duplicate of MPI_COMM_WORLD), named "world".
  std::unique_ptr<MpiCommunicator> world(std::shared_ptr<Watchdog> watchdog) const;

  // Waits for every rank, without the watchdog's timeout: for setup work of unbounded length on one
  // rank (rank 0 reading a new dataset's token ids) before the watched communicators exist.
  void barrier() const;

  // For an error in the job's set-up (reading the config, checking the layout), before the ranks
  // communicate: every rank reads the same config, so one message from rank 0 says it, not one per
  // rank. Collective: each rank passes its own failure or nullopt. Returns 0 when no rank failed, else
  // the exit code every rank returns (rank 0's, or the largest of the others'), having printed rank 0's
  // message if it failed, else each failing rank's own, with its rank.
  struct SetupFailure {
    std::string message;
    int exit_code = 0;
  };
  int agree_on_setup_failure(const std::optional<SetupFailure>& mine) const;

  // Ends every rank of the job now with `exit_code` (MPI_Abort): for an error on one rank, which
  // would otherwise leave the others blocked in their next collective until the watchdog fires.
  [[noreturn]] static void abort_job(int exit_code);

 private:
  bool owns_ = false;
  bool owns_bf16_ops_ = false;  // this runtime created them, so it frees them
  int rank_ = 0;
  int world_size_ = 1;
  int thread_level_ = MPI_THREAD_SINGLE;
};

}  // namespace lattice
