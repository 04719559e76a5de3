// lattice::Error and the LATTICE_CHECK macro: the one way code reports a failure.
// An Error carries an exit code so that main() can map bad input (2) and runtime failure (1).
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lattice {

// Process exit codes: 0 ok, 1 runtime failure, 2 bad input (config, file, flag), 3 a collective
// that did not complete within parallel.timeout_s (the watchdog ended the job).
enum class ExitCode : int { kOk = 0, kRuntime = 1, kBadInput = 2, kHungCollective = 3 };

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, ExitCode code = ExitCode::kRuntime)
      : std::runtime_error(std::move(message)), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Bad user input: a config field, a file, a flag. Exits with code 2.
class InputError : public Error {
 public:
  explicit InputError(std::string message) : Error(std::move(message), ExitCode::kBadInput) {}
};

// A failure the ranks of a job agreed on, each having seen every rank's verdict: the rank with
// something to say carries the message, the others an empty one, so that it is printed once; every
// rank ends with the same exit code, without MPI_Abort (none is left waiting).
class AgreedFailure : public Error {
 public:
  AgreedFailure(std::string message, ExitCode code) : Error(std::move(message), code) {}
  bool quiet() const { return what()[0] == '\0'; }
};

// What this rank prints of a failure the job agreed on (`mine` empty: this rank did not fail): rank
// 0's own message when rank 0 failed (the ranks read one config and usually one filesystem, so it
// speaks for all), else each failing rank's own, naming it; nothing from the others.
inline std::string agreed_failure_message(int rank, int world_size, bool rank0_failed, const std::string& mine) {
  if (rank0_failed) return rank == 0 ? mine : std::string();
  return mine.empty() ? std::string() : ::fmt::format("rank {} of {}: {}", rank, world_size, mine);
}

}  // namespace lattice

// Internal invariant; on failure throws lattice::Error naming file:line and the condition.
#define LATTICE_CHECK(cond, ...)                                                          \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      throw ::lattice::Error(::fmt::format("{}:{}: check failed: {}: {}", __FILE__,       \
                                           __LINE__, #cond, ::fmt::format(__VA_ARGS__))); \
    }                                                                                     \
  } while (0)
