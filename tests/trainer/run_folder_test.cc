// Run folders without training: `lattice report`'s status from a log.txt whose last record spans
// several lines, the metrics file's torn last line dropped when a run appends to it, a failed metrics
// write naming the system's reason, and --export refused when it is the run folder.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "tests/input_error_testing.h"
#include "tests/log_capture.h"
#include "trainer/config.h"
#include "trainer/metrics.h"
#include "trainer/output_paths.h"
#include "trainer/run_report.h"

namespace lattice {
namespace {

namespace fs = std::filesystem;
using testing::temp_path;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

const char* kRunStart = R"({"run_start": {"config_hash": "0123456789abcdef", "resumed_from_step": 0}, "time": 1})";

// A run folder stopped at step 4 of 8 (a summary short of train_iters), whose log.txt is `log`.
std::string stopped_run_folder(const std::string& name, const std::string& log) {
  const std::string dir = temp_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file(dir + "/config.json",
             nlohmann::json{{"logging", {{"run_dir", dir}}}, {"training", {{"train_iters", 8}}}}.dump());
  write_file(dir + "/metrics.jsonl", std::string(kRunStart) + "\n" +
                                         R"({"step": 4, "loss": 5.5, "time": 2})" "\n"
                                         R"({"summary": {"steps": 4}, "time": 3})" "\n");
  write_file(dir + "/log.txt", log);
  return dir;
}

TEST_CASE("report: a run whose last log record is an error failed, however many lines it spans") {
  const std::string info = "[2025-01-02 03:04:05] [info] step      4/8 | loss 5.5000\n";
  CHECK(read_run_folder(stopped_run_folder("stopped", info)).status == "stopped");
  CHECK(read_run_folder(stopped_run_folder("one_line", info + "[2025-01-02 03:04:06] [error] checkpoint.dir "
                                                                 "'x' is not writable\n"))
            .status == "failed");
  // The refused resume's error: its last line is not a record of its own.
  const std::string model_mismatch =
      "[2025-01-02 03:04:06] [error] checkpoint 'c/iter_0000004' holds a different model than the config:\n"
      "  model.hidden_size: checkpoint 32, config 64\n"
      "set these fields to the checkpoint's values, or set checkpoint.load to \"none\" (or another checkpoint) to "
      "start without it\n";
  CHECK(read_run_folder(stopped_run_folder("multi_line", info + model_mismatch)).status == "failed");
  CHECK(read_run_folder(stopped_run_folder("critical", info + "[2025-01-02 03:04:06] [critical] out of memory:\n"
                                                                  "  more\n"))
            .status == "failed");
  // An error that a later run's records follow is history, not the end.
  CHECK(read_run_folder(stopped_run_folder("error_then_info", model_mismatch + info)).status == "stopped");
}

using testing::captured_log;

TEST_CASE("report: a finished run started again keeps the throughput of the segment that trained") {
  const std::string dir = temp_path("rerun_finished");
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file(dir + "/config.json",
             nlohmann::json{{"logging", {{"run_dir", dir}}}, {"training", {{"train_iters", 8}}}}.dump());
  write_file(dir + "/metrics.jsonl",
             std::string(kRunStart) + "\n" + R"({"step": 8, "loss": 5.5, "time": 2})" "\n" +
                 R"({"summary": {"steps": 8, "tokens_per_s": 1234.5, "peak_host_bytes": 1e9}, "time": 3})" "\n" +
                 R"({"run_start": {"config_hash": "0123456789abcdef", "resumed_from_step": 8}, "time": 4})" "\n" +
                 R"({"summary": {"steps": 0, "tokens_per_s": 0, "peak_host_bytes": 5e8}, "time": 5})" "\n");
  write_file(dir + "/log.txt", "[2025-01-02 03:04:05] [info] nothing left to train\n");
  const RunRecord r = read_run_folder(dir);
  CHECK(r.status == "finished");
  CHECK(r.steps == 8);
  CHECK(r.tokens_per_s == 1234.5);
  CHECK(r.peak_mem_bytes == 1e9);
}

TEST_CASE("metrics file: a torn last line is dropped before a run appends, with a warning") {
  const std::string path = temp_path("torn.jsonl");
  const std::string whole = std::string(kRunStart) + "\n" + R"({"step": 1, "loss": 5.5, "time": 2})" "\n";
  const std::string torn = R"({"step": 2, "loss": 5.4, "gra)";  // a write cut off by a full disk
  write_file(path, whole + torn);
  const std::string log = captured_log([&] {
    MetricsWriter writer(path);
    writer.write_run_start({"fedcba9876543210", 1, 1, 8, "fp32", "fp32"});
  });
  CHECK_THAT(log, Catch::Contains("[warning]") && Catch::Contains(path) &&
                      Catch::Contains(fmt::format("dropped its last {} byte(s)", torn.size())));
  const std::string after = read_file(path);
  REQUIRE(after.rfind(whole, 0) == 0);  // the whole lines are kept as they were
  std::istringstream lines(after);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) CHECK_NOTHROW(nlohmann::json::parse(line));
  CHECK(n == 3);
  CHECK(nlohmann::json::parse(after.substr(whole.size()))["run_start"]["resumed_from_step"] == 1);

  // A file that is one torn line and nothing else is emptied; a whole file is not changed.
  write_file(path, torn);
  CHECK_THAT(captured_log([&] { MetricsWriter writer(path); }),
             Catch::Contains(fmt::format("dropped its last {} byte(s)", torn.size())));
  CHECK(read_file(path).empty());
  write_file(path, whole);
  CHECK(captured_log([&] { MetricsWriter writer(path); }).empty());
  CHECK(read_file(path) == whole);
}

TEST_CASE("metrics file: a failed write names the system's reason") {
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full here: skipped");
    return;
  }
  MetricsWriter writer("/dev/full");  // every write fails with ENOSPC
  try {
    writer.write_run_start({"0123456789abcdef", 0, 1, 8, "fp32", "fp32"});
    FAIL("no Error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("logging.metrics_file") && Catch::Contains("/dev/full") &&
                             Catch::Contains(std::strerror(ENOSPC)));
  }
}

TEST_CASE("output paths: --export may not be the run folder, however spelled") {
  const std::string base = temp_path("export_vs_run_dir");
  fs::remove_all(base);
  Config c;
  c.logging.run_dir = base + "/runs/a";
  const std::vector<std::string> parts{"--export", "logging.run_dir", "config.json", "give --export another folder"};
  // Before anything exists, and after: a trailing slash, "..", a symlink to it.
  testing::require_input_error([&] { check_output_paths(c, base + "/runs/a/", 0); }, parts);
  testing::require_input_error([&] { check_output_paths(c, base + "/runs/b/../a", 1); }, parts);
  fs::create_directories(c.logging.run_dir);
  fs::create_directory_symlink(c.logging.run_dir, base + "/link");
  testing::require_input_error([&] { check_output_paths(c, base + "/link", 0); }, parts);
  testing::require_input_error([&] { check_output_paths(c, base + "/./runs/a", 0); }, parts);
  testing::require_input_error([&] { check_output_paths(c, fs::relative(c.logging.run_dir).string(), 0); }, parts);
  // A folder inside the run folder, or beside it, is fine.
  CHECK_NOTHROW(check_output_paths(c, base + "/runs/a/hf", 0));
  CHECK_NOTHROW(check_output_paths(c, base + "/runs/hf", 0));
}

}  // namespace
}  // namespace lattice
