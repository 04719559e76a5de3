// Filesystem steps of checkpoint commit and resolution.
#include "checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <linux/fs.h>  // RENAME_EXCHANGE
#include <stdio.h>     // renameat2
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/safetensors.h"
#include "kernels/error.h"

namespace lattice {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

std::string read_latest(const std::string& root) {
  const fs::path latest = fs::path(root) / kLatestFile;
  std::error_code ec;
  if (!fs::exists(latest, ec)) return "";
  if (fs::is_directory(latest, ec))
    throw InputError(fmt::format("'{}' is a directory; it should be a file naming a checkpoint directory such as "
                                 "iter_0000100: move the directory away and write the name of a complete "
                                 "checkpoint into the file, or set checkpoint.load to one",
                                 latest.string()));
  std::ifstream in(latest);
  if (!in) throw InputError(fmt::format("cannot read '{}': {}", latest.string(), std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string name = trim(ss.str());
  if (name.empty())
    throw InputError(fmt::format("'{}' is empty; it should name a checkpoint directory such as iter_0000100: write "
                                 "the name of a complete checkpoint into it, or set checkpoint.load to one",
                                 latest.string()));
  return name;
}

namespace {

// (step, name) of the committed iteration directories, ascending by step.
std::vector<std::pair<int64_t, std::string>> committed_dirs(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    const int64_t step = parse_iter_dir_name(name);
    if (step >= 0) dirs.emplace_back(step, name);
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace

std::optional<std::string> find_latest_checkpoint(const std::string& root) {
  std::error_code ec;
  if (fs::exists(fs::path(root) / kLatestFile, ec)) return resolve_checkpoint(root);
  // No `latest`, but complete checkpoints (deleted by hand, or a copy that left it out): a fresh
  // start would overwrite them and keep_last would retire them, so refuse and say how to resume.
  std::string newest;
  for (const auto& [step, name] : committed_dirs(root))
    if (fs::exists(fs::path(root) / name / kMetadataFile, ec)) newest = name;
  if (newest.empty()) return std::nullopt;
  const std::string latest = (fs::path(root) / kLatestFile).string();
  throw InputError(fmt::format(
      "checkpoint.dir '{}' holds committed checkpoints (the newest is {}) but no `{}` file, so checkpoint.load auto "
      "cannot tell which one to resume from, and starting from step 0 would overwrite them. To resume from {}, write "
      "its name into {} (echo {} > {}) or set checkpoint.load={}; to start fresh, give this run another "
      "checkpoint.dir",
      root, newest, kLatestFile, newest, latest, newest, latest, (fs::path(root) / newest).string()));
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_directory(p, ec))
    throw InputError(fmt::format("checkpoint '{}' does not exist (or is not a directory); check checkpoint.load / "
                                 "--checkpoint",
                                 path));
  const std::string name = p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
  if (ends_with(name, kPartialSuffix))
    throw InputError(fmt::format("checkpoint '{}' is a save that never committed ({} directory: a job ended while "
                                 "writing it); load the checkpoint that `latest` names instead",
                                 path, kPartialSuffix));
  if (ends_with(name, kDeletingSuffix))
    throw InputError(fmt::format("checkpoint '{}' was retired by checkpoint.keep_last and is being deleted; load the "
                                 "checkpoint that `latest` names instead",
                                 path));
  if (fs::exists(p / kMetadataFile, ec)) return p.string();
  if (!fs::exists(p / kLatestFile, ec))
    throw InputError(fmt::format("'{}' is not a checkpoint: it holds neither {} (an iteration directory) nor {} (a "
                                 "checkpoint root); check checkpoint.load / --checkpoint",
                                 path, kMetadataFile, kLatestFile));
  const std::string latest = read_latest(path);
  if (latest.find('/') != std::string::npos || ends_with(latest, kPartialSuffix) || ends_with(latest, kDeletingSuffix) ||
      latest == "." || latest == "..")
    throw InputError(fmt::format("'{}' names '{}', which is not a committed checkpoint directory (expected a name "
                                 "like iter_0000100); fix the file or load a checkpoint directory directly",
                                 (p / kLatestFile).string(), latest));
  const fs::path target = p / latest;
  if (!fs::exists(target / kMetadataFile, ec))
    throw InputError(fmt::format("'{}' names '{}', but '{}' does not exist: the checkpoint was moved or deleted; "
                                 "restore it, or point `latest` at (or load) another complete iter_* directory",
                                 (p / kLatestFile).string(), latest, (target / kMetadataFile).string()));
  return target.string();
}

std::vector<int64_t> committed_steps(const std::string& root) {
  std::vector<int64_t> steps;
  for (const auto& [step, name] : committed_dirs(root)) steps.push_back(step);
  return steps;
}

void write_latest(const std::string& root, const std::string& iter_name) {
  write_file_atomically((fs::path(root) / kLatestFile).string(), iter_name + "\n");
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open directory '{}' to fsync it: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("fsync of directory '{}' failed: {}", dir, std::strerror(err)));
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Several ranks create the same directory at once: losing that race is fine.
  if (!fs::is_directory(dir))
    throw Error(fmt::format("cannot create checkpoint directory '{}': {}", dir, ec ? ec.message() : "not a directory"));
}

namespace {

// TEST HOOK (sharded_checkpoint_test): LATTICE_TEST_NO_RENAME_EXCHANGE set makes the exchange fail
// as it does on a filesystem without it (NFS, FUSE without rename2): EINVAL.
int rename_exchange(const std::string& a, const std::string& b) {
  if (std::getenv("LATTICE_TEST_NO_RENAME_EXCHANGE") != nullptr) {
    errno = EINVAL;
    return -1;
  }
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(fmt::format("renaming '{}' to '{}' failed: {}", from, to, std::strerror(errno)));
}

}  // namespace

void publish_directory(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) {
    rename_or_throw(from, to);
  } else if (rename_exchange(from, to) == 0) {
    fsync_directory(parent_of(to));
    fs::remove_all(from, ec);  // the replaced checkpoint, now under the .partial name
  } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP || errno == EOPNOTSUPP) {
    // No atomic exchange on this filesystem: the old checkpoint is retired first (iter_N.deleting
    // is never loaded), then the new one takes its name. Between the two renames iter_N is absent;
    // `latest` never names it then, unless it named the very step being saved again.
    const std::string retired = to + kDeletingSuffix;
    fs::remove_all(retired, ec);
    rename_or_throw(to, retired);
    fsync_directory(parent_of(to));
    rename_or_throw(from, to);
    fsync_directory(parent_of(to));
    fs::remove_all(retired, ec);
  } else {
    throw Error(fmt::format("exchanging '{}' with the existing '{}' failed: {}", from, to, std::strerror(errno)));
  }
  fsync_directory(parent_of(to));
}

std::vector<std::string> retire_checkpoints(const std::string& root, int64_t keep_last,
                                            const std::function<bool(int64_t step)>& on_line) {
  bool changed = false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && name.rfind("iter_", 0) == 0 && ends_with(name, kPartialSuffix)) {
      fs::remove_all(entry.path(), ec);
      changed = true;
    }
  }
  std::vector<std::string> retired;
  if (keep_last > 0) {
    const std::string latest = read_latest(root);
    // Only the current line of training counts: the others belong to a line abandoned by a resume
    // from an older step (maybe the one to go back to), so they are neither counted nor retired;
    // this run overwrites them only when it reaches their step.
    std::vector<std::pair<int64_t, std::string>> dirs;
    for (const auto& dir : committed_dirs(root))
      if (on_line(dir.first)) dirs.push_back(dir);
    const int64_t drop = static_cast<int64_t>(dirs.size()) - keep_last;
    for (int64_t i = 0; i < drop; ++i) {
      const std::string& name = dirs[i].second;
      if (name == latest) continue;
      const fs::path from = fs::path(root) / name;
      const fs::path to = fs::path(root) / (name + kDeletingSuffix);
      fs::remove_all(to, ec);
      if (::rename(from.c_str(), to.c_str()) != 0)
        throw Error(fmt::format("retiring old checkpoint '{}' failed: {}", from.string(), std::strerror(errno)));
      retired.push_back(name);
      changed = true;
    }
  }
  if (changed) fsync_directory(root);
  return retired;
}

void delete_retired(const std::string& root) {
  bool deleted = false;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && name.rfind("iter_", 0) == 0 && ends_with(name, kDeletingSuffix)) {
      fs::remove_all(entry.path(), ec);
      if (ec) throw Error(fmt::format("deleting old checkpoint '{}' failed: {}", entry.path().string(), ec.message()));
      deleted = true;
    }
  }
  if (deleted) fsync_directory(root);
}

}  // namespace lattice
