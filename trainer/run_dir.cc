// The run folder's own files: config.json and log.txt (see run_dir.h).
#include "trainer/run_dir.h"

#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "data/file_io.h"
#include "kernels/error.h"

namespace lattice {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw InputError(fmt::format("logging.run_dir: cannot write '{}': {}; give a folder this user can write", path,
                               problem));
}

// Rank 0's log lines also go to `path`, flushed at once: a run that dies still leaves its last line.
void copy_log_to(const std::string& path) {
  static std::shared_ptr<spdlog::sinks::sink> file_sink;  // one per process: a second run replaces it
  auto& sinks = spdlog::default_logger()->sinks();
  if (file_sink) std::erase(sinks, file_sink);
  try {
    file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  } catch (const spdlog::spdlog_ex& e) {
    refuse(path, e.what());
  }
  file_sink->set_pattern("[%Y-%m-%d %H:%M:%S] [%l] %v");  // no colour codes, the date for long runs
  sinks.push_back(file_sink);
  spdlog::default_logger()->flush_on(spdlog::level::info);
}

std::string config_file_of(const Config& config) { return (fs::path(config.logging.run_dir) / "config.json").string(); }

// config.json: every path absolute (report, export and generate read it from other directories),
// except the output paths that are logging.run_dir's defaults, stored empty as a config that leaves
// them to run_dir: a copy reused with another run_dir writes into that folder, not into this one.
nlohmann::json run_config_json(const Config& config) {
  Config stored = with_absolute_paths(config);
  for (const RunDirOutput& o : run_dir_outputs()) {
    std::string& path = o.field(stored);
    if (path == (fs::path(stored.logging.run_dir) / o.name).string()) path.clear();
  }
  return config_to_json(stored);
}

}  // namespace

void open_run_dir(const Config& config, int rank) {
  const std::string& dir = config.logging.run_dir;
  if (dir.empty() || rank != 0) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) refuse(dir, ec.message());
  copy_log_to((fs::path(dir) / "log.txt").string());
  if (!fs::exists(config_file_of(config), ec)) write_run_config(config, rank);
  spdlog::info("run folder {}: config.json, log.txt", dir);
}

void write_run_config(const Config& config, int rank) {
  if (config.logging.run_dir.empty() || rank != 0) return;
  const std::string config_file = config_file_of(config);
  // Replaced whole: a failed write (a full disk) leaves the previous config.json, not half of the new one.
  try {
    replace_file(config_file, run_config_json(config).dump(2) + "\n");
  } catch (const Error& e) {
    refuse(config_file, e.what());
  }
}

}  // namespace lattice
