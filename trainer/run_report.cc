// The run folders' table (see run_report.h).
#include "trainer/run_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "kernels/error.h"

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

}  // namespace

RunRecord read_run_folder(const std::string& dir) {
  RunRecord r;
  r.dir = dir;
  r.config = read_config_file((fs::path(dir) / "config.json").string());
  const json& logging = r.config["logging"];
  const std::string run_dir = logging.value("run_dir", "");
  std::string metrics = logging.value("metrics_file", "");
  // The folder may have moved since the run: its default metrics file is looked for in `dir`.
  if (metrics.empty() || metrics == (fs::path(run_dir) / "metrics.jsonl").string())
    metrics = (fs::path(dir) / "metrics.jsonl").string();
  const bool errored = log_ends_in_error((fs::path(dir) / "log.txt").string());
  std::error_code ec;
  if (!fs::exists(metrics, ec) && errored) {
    r.status = "failed";
    return r;
  }
  read_metrics(metrics, r.config["training"]["train_iters"].get<int64_t>(), r);
  if (errored) r.status = "failed";
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
