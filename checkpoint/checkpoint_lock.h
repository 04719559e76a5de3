// CheckpointLock: one run at a time writes a checkpoint root. An flock(2) on ROOT/lattice.lock, whose
// content names the holder (host, pid); the kernel drops the lock when its holder dies.
#pragma once

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace lattice {

inline constexpr const char* kLockFile = "lattice.lock";

class CheckpointLock {
 public:
  // Locks the existing directory `dir`. Another live holder: InputError naming it (host, pid). A
  // lock file that still names a holder but is not locked was left by a run that ended without
  // releasing it (killed): taken over, with a warning naming that run. A filesystem without flock
  // support: a warning that nothing keeps a second run out, and no lock.
  explicit CheckpointLock(const std::string& dir);
  // Empties the file (a clean release), then unlocks.
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;

  // The job's lock: world rank 0 takes it and every rank learns whether it could (one all-reduce
  // over `world`; nullptr = one process), so a refusal is an InputError on every rank, not a hang.
  // nullptr on the other ranks.
  static std::unique_ptr<CheckpointLock> acquire_for_job(const std::string& dir, Communicator* world);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace lattice
