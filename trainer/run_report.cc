// The run folders' table (see run_report.h).
#include "trainer/run_report.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "checkpoint/checkpoint_lock.h"
#include "kernels/error.h"
#include "trainer/config.h"

namespace lattice {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kAbsent = RunRecord::kAbsent;

json read_config_file(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw InputError(fmt::format("report: '{}' cannot be read; is this a run folder (a run's logging.run_dir)?", file));
  try {
    json j = json::parse(in);
    const bool fits = j.is_object() && j.contains("logging") && j["logging"].is_object() &&
                      j.contains("training") && j["training"].is_object() &&
                      j["training"].contains("train_iters") && j["training"]["train_iters"].is_number_integer();
    if (!fits) throw InputError("");
    // config.json leaves run_dir's default outputs empty (run_dir.cc): place them, as the run did.
    const std::string run_dir = j["logging"].value("run_dir", "");
    for (const RunDirOutput& o : run_dir_outputs()) {
      if (run_dir.empty() || !j.contains(o.section) || !j[o.section].is_object()) continue;
      json& section = j[o.section];
      if (section.value(o.key, "").empty()) section[o.key] = (fs::path(run_dir) / o.name).string();
    }
    return j;
  } catch (const std::exception&) {
    throw InputError(fmt::format("report: '{}' is not a run's resolved config (a JSON object with a logging section "
                                 "and training.train_iters, as logging.run_dir writes it)",
                                 file));
  }
}

// The level of a log record's first line as log.txt writes it ("[2025-01-02 03:04:05] [error] ..."),
// or "" for any other line: one that continues a multi-line message.
std::string record_level(const std::string& line) {
  static const std::string stamp = "[0000-00-00 00:00:00] [";  // '0' stands for any digit
  if (line.size() <= stamp.size()) return "";
  for (size_t i = 0; i < stamp.size(); ++i)
    if (stamp[i] == '0' ? !std::isdigit(static_cast<unsigned char>(line[i])) : line[i] != stamp[i]) return "";
  const size_t end = line.find("] ", stamp.size());
  return end == std::string::npos ? "" : line.substr(stamp.size(), end - stamp.size());
}

// The last record of `file` says the run ended in an error (spdlog's "error" or "critical"). By the
// record, not the last line: an error may span lines ("... holds a different model:", one line per
// field, what to do).
bool log_ends_in_error(const std::string& file) {
  std::ifstream in(file);
  std::string line, last_level;
  while (std::getline(in, line)) {
    const std::string level = record_level(line);
    if (!level.empty()) last_level = level;
  }
  return last_level == "error" || last_level == "critical";
}

double number_or_absent(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : kAbsent;
}

// The metrics file's lines into `r`: the last step's loss, the last validation loss, and the status
// and throughput of the segment after the last run_start.
void read_metrics(const std::string& file, int64_t train_iters, RunRecord& r) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("report: metrics file '{}' cannot be read", file));
  bool started = false;
  int64_t resumed_from = 0;
  json summary;  // null until the last segment has one
  json trained;  // the last summary of a segment that trained a step: the run's throughput
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error&) {
      // A last line without its newline is a write a kill cut off (train drops it when it appends).
      if (in.eof()) break;
      throw InputError(fmt::format("report: metrics file '{}' line {} is not JSON", file, n));
    }
    const auto malformed = [&](const char* what) {
      throw InputError(fmt::format("report: metrics file '{}' line {}: {}", file, n, what));
    };
    if (!j.is_object()) malformed("not a JSON object");
    if (j.contains("run_start")) {
      if (!j["run_start"].is_object()) malformed("a run_start that is not an object");
      started = true;
      resumed_from = j["run_start"].value("resumed_from_step", int64_t{0});
      summary = nullptr;
      r.steps = resumed_from;
    } else if (!started) {
      malformed("comes before any run_start line");
    } else if (j.contains("summary")) {
      summary = j["summary"];
      if (!summary.is_object() || !summary.contains("steps") || !summary["steps"].is_number_integer())
        malformed("a summary without an integer \"steps\"");
      if (summary["steps"].get<int64_t>() > 0) trained = summary;
    } else if (j.contains("step") && j["step"].is_number_integer()) {
      if (j.contains("loss")) {
        r.steps = j["step"].get<int64_t>();
        r.train_loss = number_or_absent(j, "loss");
      }
      if (j.contains("val_loss")) r.val_loss = number_or_absent(j, "val_loss");
    } else {
      malformed("neither a run_start, step, validation nor summary line");
    }
  }
  if (summary.is_null()) {
    r.status = "failed";
    return;
  }
  r.steps = std::max(r.steps, resumed_from + summary["steps"].get<int64_t>());
  r.status = r.steps >= train_iters ? "finished" : "stopped";
  // A segment that trained nothing (a finished run started again) has no throughput of its own.
  const json& figures = trained.is_null() ? summary : trained;
  r.tokens_per_s = number_or_absent(figures, "tokens_per_s");
  r.mfu = number_or_absent(figures, "mfu");
  r.bubble = number_or_absent(figures, "bubble_measured");
  r.dp_comm_hidden = number_or_absent(figures, "dp_comm_hidden");
  r.peak_mem_bytes = number_or_absent(figures, figures.contains("peak_device_bytes") ? "peak_device_bytes"
                                                                                       : "peak_host_bytes");
}

// Dotted leaf keys of `j` ("optimizer.lr"); arrays are leaves.
void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
  if (!j.is_object()) {
    out[prefix] = j;
    return;
  }
  for (const auto& item : j.items()) flatten(item.value(), prefix.empty() ? item.key() : prefix + "." + item.key(), out);
}

// A run's config with its own folder factored out: a path inside RUN_DIR reads the same for every run.
std::map<std::string, json> comparable(const json& config) {
  std::map<std::string, json> flat;
  flatten(config, "", flat);
  const std::string run_dir = config["logging"].value("run_dir", "");
  flat.erase("logging.run_dir");
  if (run_dir.empty()) return flat;
  const std::string inside = (fs::path(run_dir) / "").string();
  for (auto& [key, value] : flat)
    if (value.is_string() && value.get<std::string>().rfind(inside, 0) == 0)
      value = "RUN_DIR/" + value.get<std::string>().substr(inside.size());
  return flat;
}

std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char ch : s) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

// A path the run's config stores, as this process finds it: one inside the run's own folder
// (logging.run_dir, lexically) is looked for in `dir`, where the folder is now (it may have moved, and
// a relative run_dir was relative to where the run started); any other path as stored.
std::string locate(const std::string& stored, const std::string& run_dir, const std::string& dir) {
  if (stored.empty() || run_dir.empty()) return stored;
  const fs::path path = fs::path(stored).lexically_normal(), folder = fs::path(run_dir).lexically_normal();
  const fs::path inside = path.lexically_relative(folder);
  if (inside.empty() || *inside.begin() == "..") return stored;
  return inside == "." ? dir : (fs::path(dir) / inside).string();
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// The run's metrics file: logging.metrics_file located (see locate), or RUN_DIR/metrics.jsonl when it
// is unset. A relative path that is not found from here (an old run folder stores the path as given,
// relative to the directory the run was started from) falls back to the folder's own default metrics
// file, if there is one; else the stored path is returned and `relative_not_found` set.
std::string metrics_file_of(const json& logging, const std::string& dir, bool& relative_not_found) {
  relative_not_found = false;
  const std::string run_dir = logging.value("run_dir", "");
  const std::string stored = logging.value("metrics_file", "");
  const std::string own = (fs::path(dir) / "metrics.jsonl").string();  // resolve_run_dir's default name
  if (stored.empty()) return own;
  const std::string metrics = locate(stored, run_dir, dir);
  if (exists(metrics) || fs::path(metrics).is_absolute()) return metrics;
  if (exists(own)) return own;
  relative_not_found = true;
  return metrics;
}

// Whether a live process holds the run's checkpoint root (CheckpointLock: an flock on
// ROOT/lattice.lock, which the kernel drops when its holder dies, also across nodes where the
// filesystem supports flock). An empty lock file was released cleanly: not tested. Otherwise a
// non-blocking shared lock is tried and at once dropped; it fails only while a run holds the lock.
// (A run that starts in the microseconds this probe holds it would be refused as "in use".)
bool run_is_live(const json& config, const std::string& dir) {
  if (!config.contains("checkpoint") || !config["checkpoint"].is_object()) return false;
  const std::string root =
      locate(config["checkpoint"].value("dir", ""), config["logging"].value("run_dir", ""), dir);
  if (root.empty()) return false;
  const std::string lock_file = (fs::path(root) / kLockFile).string();
  const int fd = ::open(lock_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no lock file (or not readable here): nothing says a run is live
  struct stat st {};
  bool live = false;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    if (flock(fd, LOCK_SH | LOCK_NB) == 0)
      flock(fd, LOCK_UN);
    else
      live = errno == EWOULDBLOCK;
  }
  ::close(fd);
  return live;
}

}  // namespace

RunRecord read_run_folder(const std::string& dir) {
  RunRecord r;
  r.dir = dir;
  const std::string config_file = (fs::path(dir) / "config.json").string();
  r.config = read_config_file(config_file);
  bool relative_not_found = false;
  const std::string metrics = metrics_file_of(r.config["logging"], dir, relative_not_found);
  const bool errored = log_ends_in_error((fs::path(dir) / "log.txt").string());
  const bool live = !errored && run_is_live(r.config, dir);
  if (!exists(metrics) && (errored || live)) {  // failed before, or not yet at, its metrics file
    r.status = errored ? "failed" : "running";
    return r;
  }
  if (relative_not_found)
    throw InputError(fmt::format(
        "report: metrics file '{}' (logging.metrics_file in '{}') is not found: it is a relative path, relative to "
        "the directory the run was started from, and '{}' holds no metrics.jsonl of its own; cd to the directory the "
        "run was started from and run the report there",
        metrics, config_file, dir));
  read_metrics(metrics, r.config["training"]["train_iters"].get<int64_t>(), r);
  // An error after a summary that reaches train_iters is a later start that was refused (or an
  // export that failed): the run itself finished.
  if (errored && r.status != "finished") r.status = "failed";
  // No summary yet and the run still holds its checkpoint root: training, not failed.
  else if (r.status == "failed" && live) r.status = "running";
  return r;
}

std::vector<std::string> differing_keys(const std::vector<RunRecord>& runs) {
  std::vector<std::map<std::string, json>> flats;
  std::set<std::string> all;
  for (const RunRecord& r : runs) {
    flats.push_back(comparable(r.config));
    for (const auto& item : flats.back()) all.insert(item.first);
  }
  std::vector<std::string> keys;
  for (const std::string& key : all) {
    std::set<std::string> values;
    for (const auto& flat : flats) values.insert(flat.contains(key) ? flat.at(key).dump() : "(unset)");
    if (values.size() > 1) keys.push_back(key);
  }
  return keys;
}

std::string format_run_report(const std::vector<RunRecord>& runs, bool csv) {
  const std::vector<std::string> keys = differing_keys(runs);
  std::vector<std::string> header{"run"};
  header.insert(header.end(), keys.begin(), keys.end());
  for (const char* h : {"status", "steps", "train_loss", "val_loss", "tokens_per_s", "mfu", "bubble", "dp_comm_hidden",
                        "peak_mem_gib"})
    header.push_back(h);
  // Full precision in the CSV (it is read back by programs), rounded in the table (read by people).
  const auto number = [&](double v, const char* table_format) {
    if (std::isnan(v)) return std::string(csv ? "" : "-");
    return csv ? fmt::format("{}", v) : fmt::format(fmt::runtime(table_format), v);
  };
  std::vector<std::vector<std::string>> rows{header};
  for (const RunRecord& r : runs) {
    const std::map<std::string, json> flat = comparable(r.config);
    std::vector<std::string> row{r.dir};
    for (const std::string& key : keys) row.push_back(flat.contains(key) ? value_text(flat.at(key)) : "");
    row.push_back(r.status);
    row.push_back(std::to_string(r.steps));
    row.push_back(number(r.train_loss, "{:.4f}"));
    row.push_back(number(r.val_loss, "{:.4f}"));
    row.push_back(number(r.tokens_per_s, "{:.1f}"));
    row.push_back(number(r.mfu, "{:.4f}"));
    row.push_back(number(r.bubble, "{:.3f}"));
    row.push_back(number(r.dp_comm_hidden, "{:.3f}"));
    row.push_back(number(r.peak_mem_bytes / double(1 << 30), "{:.2f}"));
    rows.push_back(std::move(row));
  }
  std::string out;
  if (csv) {
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
      out += '\n';
    }
    return out;
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  const size_t first_number = 1 + keys.size() + 1;  // run, keys, status are text; the rest numbers
  for (size_t n = 0; n < rows.size(); ++n) {
    std::string line;
    for (size_t i = 0; i < rows[n].size(); ++i) {
      const std::string& cell = rows[n][i];
      line += i ? "  " : "";
      line += i >= first_number ? fmt::format("{:>{}}", cell, width[i]) : fmt::format("{:<{}}", cell, width[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
    if (n == 0) {
      size_t total = 0;
      for (size_t w : width) total += w;
      out += std::string(total + 2 * (width.size() - 1), '-') + '\n';
    }
  }
  return out;
}

}  // namespace lattice
