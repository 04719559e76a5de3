// The checkpoint root on disk: resolving what to load (an iteration directory, or `latest`), and
// the durable steps of a commit (fsync of directories, atomic `latest`, directory swap, retention).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lattice {

// The iteration directory `path` names: a directory holding metadata.json (iter_*), or a root whose
// `latest` names one. InputError (exit 2) saying what to do otherwise: a `.partial` directory (a
// save that never committed), `latest` naming a missing or incomplete directory, nothing there.
std::string resolve_checkpoint(const std::string& path);

// For checkpoint.load = auto: the directory root/latest names, or nullopt when root does not exist
// or holds neither `latest` nor a complete iter_* directory (a fresh start; .partial and .deleting
// directories do not count). `latest` naming nothing complete, or complete checkpoints without a
// `latest`, is an InputError, not a fresh start: silently restarting from step 0 would overwrite a
// run's progress.
std::optional<std::string> find_latest_checkpoint(const std::string& root);

// Steps of the committed iteration directories under root (iter_NNNNNNN, no suffix), ascending.
std::vector<int64_t> committed_steps(const std::string& root);

// The content of root/latest (a directory name), or "" when there is none.
std::string read_latest(const std::string& root);

// Points root/latest at `iter_name` atomically (temp file, fsync, rename, fsync of root).
void write_latest(const std::string& root, const std::string& iter_name);

// Makes a directory entry change (create, rename, unlink) inside `dir` durable.
void fsync_directory(const std::string& dir);

// Creates `dir` (and missing parents); an existing directory is fine.
void make_directories(const std::string& dir);

// Moves the complete directory `from` to `to` in one step: rename(2), or, when `to` exists (a step
// saved again), an atomic exchange (renameat2 RENAME_EXCHANGE) after which the old one is deleted —
// at no moment does `to` hold anything but a complete checkpoint. Where the filesystem has no
// exchange (NFS), the old one is renamed to its .deleting name first, then `from` to `to`: `to` is
// briefly absent, never incomplete. fsyncs the parent.
void publish_directory(const std::string& from, const std::string& to);

// Retention after a commit (call only when no save is in flight): deletes every iter_*.partial
// directory (leftovers of killed jobs; usually none), and of the committed directories on the
// current line of training (`on_line(step)`) retires those beyond the `keep_last` newest (0 = keep
// all), never the one `latest` names. The others (left by a line abandoned when a run resumed from
// an older step) are neither counted nor retired. A retired directory is renamed to iter_*.deleting
// at once, so nothing lists or loads it any more, for delete_retired() to remove. Returns the names
// retired.
std::vector<std::string> retire_checkpoints(const std::string& root, int64_t keep_last,
                                            const std::function<bool(int64_t step)>& on_line);

// Deletes every iter_*.deleting directory under root (seconds for big checkpoints: the writer runs
// it on a background thread; leftovers of a killed job go with the next call).
void delete_retired(const std::string& root);

}  // namespace lattice
