// The checkpoint root's lock file (see checkpoint_lock.h).
#include "checkpoint/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"
#include "kernels/tensor.h"

namespace lattice {

namespace {

std::string this_holder() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  return fmt::format("host {}, pid {}", host, getpid());
}

// The holder a lock file names ("" when it names none: never locked, or released cleanly).
std::string read_holder(int fd) {
  std::string text;
  char buf[256];
  ssize_t n;
  off_t offset = 0;
  while ((n = pread(fd, buf, sizeof(buf), offset)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

CheckpointLock::CheckpointLock(const std::string& dir)
    : path_((std::filesystem::path(dir) / kLockFile).string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(fmt::format("checkpoint.dir: cannot open the lock file '{}': {}", path_, std::strerror(errno)));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = read_holder(fd_);
      ::close(fd_);
      fd_ = -1;
      throw InputError(fmt::format(
          "checkpoint.dir '{}' is in use by another run ({}; lock file {}): two runs saving into one directory "
          "would overwrite each other's checkpoints and `latest`. Wait for that run to end, stop it, or give this "
          "run its own checkpoint.dir",
          dir, holder.empty() ? "it did not say which" : holder, path_));
    }
    spdlog::warn("checkpoint.dir '{}': cannot lock '{}' ({}): this filesystem does not support flock, so nothing "
                 "keeps a second run from saving into the same directory",
                 dir, path_, std::strerror(err));
    ::close(fd_);
    fd_ = -1;
    return;
  }
  const std::string stale = read_holder(fd_);
  if (!stale.empty())
    spdlog::warn("checkpoint.dir '{}': took over the stale lock left by {} (that run ended without releasing it: "
                 "killed or crashed)",
                 dir, stale);
  const std::string holder = this_holder() + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()))
    throw InputError(fmt::format("checkpoint.dir: cannot write the lock file '{}': {}", path_, std::strerror(errno)));
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0) return;
  if (ftruncate(fd_, 0) != 0)  // an empty file: released cleanly, no stale-lock warning next time
    spdlog::warn("cannot empty the lock file '{}': {}", path_, std::strerror(errno));
  ::close(fd_);  // releases the flock
}

std::unique_ptr<CheckpointLock> CheckpointLock::acquire_for_job(const std::string& dir, Communicator* world) {
  const bool job = world != nullptr && world->size() > 1;
  const bool rank0 = !job || world->rank() == 0;
  std::unique_ptr<CheckpointLock> lock;
  std::exception_ptr failure;
  if (rank0) {
    try {
      lock = std::make_unique<CheckpointLock>(dir);
    } catch (const Error&) {
      failure = std::current_exception();
    }
  }
  if (job) {
    const bool failed = world->host().any(failure != nullptr, "checkpoint.dir lock result");
    if (failed && !rank0)
      throw InputError(fmt::format("checkpoint.dir '{}' could not be locked for this job (rank 0 says why)", dir));
  }
  if (failure) std::rethrow_exception(failure);
  return lock;
}

}  // namespace lattice
