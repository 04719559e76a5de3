// Output paths probed before training (see output_paths.h).
#include "trainer/output_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kernels/error.h"
#include "parallel/trace.h"

namespace lattice {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& path, const std::string& problem) {
  throw InputError(fmt::format("{} '{}' is not writable: {}; give a path this user can write (every output path is "
                               "checked before training starts)",
                               field, path, problem));
}

// `dir` created and probed for `field`, whose value is `path` (the directory itself, or a file in it).
void probe_directory(const std::string& field, const std::string& path, const std::string& dir) {
  const std::string which = dir == path ? "the directory" : fmt::format("its directory '{}'", dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) refuse(field, path, fmt::format("cannot create {}: {}", which, ec.message()));
  if (!fs::is_directory(dir, ec)) refuse(field, path, fmt::format("{} exists and is not a directory", which));
  std::string probe = (fs::path(dir) / ".lattice-write-probe-XXXXXX").string();
  const int fd = mkstemp(probe.data());
  if (fd < 0) refuse(field, path, fmt::format("cannot create a file in {}: {}", which, std::strerror(errno)));
  const bool written = ::write(fd, "x", 1) == 1;
  const int write_errno = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written) refuse(field, path, fmt::format("cannot write a file in {}: {}", which, std::strerror(write_errno)));
}

// A path this machine cannot write, where validate runs: the job may run elsewhere (a login node
// lacks the compute nodes' scratch mounts, another user's permissions), so a warning, not a refusal.
void warn_unwritable(const std::string& field, const std::string& path, const std::string& problem) {
  spdlog::warn("{} '{}' is not writable from here: {}; `lattice train` refuses it unless the job's machines can "
               "write it",
               field, path, problem);
}

// `dir` for `field` without writing anything (lattice validate): the directory, or the nearest of
// its ancestors that exists (what create_directories would start from), is a directory (else an
// InputError), one this user may write in (else a warning).
void inspect_directory(const std::string& field, const std::string& path, const std::string& dir) {
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec);
  while (!fs::exists(existing, ec) && existing.has_relative_path()) existing = existing.parent_path();
  if (!fs::is_directory(existing, ec))
    refuse(field, path, fmt::format("'{}' exists and is not a directory", existing.string()));
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    warn_unwritable(field, path, fmt::format("cannot create files in '{}': {}", existing.string(), std::strerror(errno)));
}

std::string directory_of(const std::string& file) {
  const fs::path parent = fs::path(file).parent_path();
  return parent.empty() ? "." : parent.string();
}

void check_directory(OutputCheck mode, const std::string& field, const std::string& path, const std::string& dir) {
  if (mode == OutputCheck::kProbe)
    probe_directory(field, path, dir);
  else
    inspect_directory(field, path, dir);
}

// `file`'s directory checked; an existing `file` must open for appending (it is not changed).
void check_writable_file(OutputCheck mode, const std::string& field, const std::string& file) {
  check_directory(mode, field, file, directory_of(file));
  std::error_code ec;
  if (fs::is_directory(file, ec)) refuse(field, file, "it is a directory, not a file");
  if (!fs::exists(file, ec)) return;
  if (mode == OutputCheck::kInspect) {
    if (::access(file.c_str(), W_OK) != 0)
      warn_unwritable(field, file, fmt::format("cannot append to it: {}", std::strerror(errno)));
    return;
  }
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND);
  if (fd < 0) refuse(field, file, fmt::format("cannot open it for appending: {}", std::strerror(errno)));
  ::close(fd);
}

// The two paths name the same folder, however spelled ("runs/a", "./runs/a/", a symlink to it).
bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  if (fs::exists(a, ec_a) && fs::exists(b, ec_b) && fs::equivalent(a, b, ec_a)) return true;
  const auto normal = [](const std::string& p) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(p, ec);
    fs::path n = fs::weakly_canonical(absolute, ec);
    if (ec) n = absolute.lexically_normal();
    return n.has_filename() ? n : n.parent_path();  // "runs/a/" is "runs/a"
  };
  return normal(a) == normal(b);
}

}  // namespace

void check_output_paths(const Config& c, const std::string& export_dir, int rank, OutputCheck mode) {
  // Both hold a config.json (Hugging Face's, the run's): in one folder each would overwrite the other.
  if (!export_dir.empty() && !c.logging.run_dir.empty() && same_directory(export_dir, c.logging.run_dir))
    throw InputError(fmt::format("--export '{}' is the run folder logging.run_dir '{}': the exported config.json "
                                 "and the run's config.json would overwrite each other; give --export another "
                                 "folder (such as {}/hf)",
                                 export_dir, c.logging.run_dir, c.logging.run_dir));
  // (Training opens the run folder itself, before this: open_run_dir.)
  if (mode == OutputCheck::kInspect && !c.logging.run_dir.empty())
    check_directory(mode, "logging.run_dir", c.logging.run_dir, c.logging.run_dir);
  if (!c.checkpoint.dir.empty()) check_directory(mode, "checkpoint.dir", c.checkpoint.dir, c.checkpoint.dir);
  if (!c.training.gemm_autotune_dir.empty() && c.device != "cpu") {  // every rank writes its choices there
    check_directory(mode, "training.gemm_autotune_dir", c.training.gemm_autotune_dir, c.training.gemm_autotune_dir);
  }
  if (!c.logging.trace_file.empty()) {  // written as PATH.tmp, then renamed: its directory must be writable
    const std::string file = Tracer::trace_path_for_rank(c.logging.trace_file, rank);
    check_directory(mode, "logging.trace_file", file, directory_of(file));
  }
  if (rank != 0) return;
  if (!export_dir.empty()) check_directory(mode, "--export", export_dir, export_dir);
  if (!c.logging.metrics_file.empty()) check_writable_file(mode, "logging.metrics_file", c.logging.metrics_file);
  if (!c.logging.tensorboard_dir.empty())
    check_directory(mode, "logging.tensorboard_dir", c.logging.tensorboard_dir, c.logging.tensorboard_dir);
}

}  // namespace lattice
