#include "kernels/cuda/matmul_autotune.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kernels/cuda/runtime.h"
#include "kernels/cuda_workspace.h"
#include "kernels/error.h"

namespace lattice::cuda::autotune {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "lattice cuBLASLt algorithms 1";

// A shape the run uses, for the exit summary.
struct Tracked {
  double heuristic_us, chosen_us;
  bool timed_now;  // chosen in this run (else read from the file)
  long long calls = 0;
};

struct State {
  std::mutex mutex;
  std::string path;  // empty: off
  std::string gpu;  // runtime.h's device_identity
  size_t cublaslt_version = 0;
  std::map<std::string, json> entries;  // shape -> its entry as the file has it
  std::vector<Tracked> tracked;
};

State& state() {
  static State s;
  return s;
}

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

json algo_json(const cublasLtMatmulAlgo_t& algo) {
  json words = json::array();
  for (uint64_t w : algo.data) words.push_back(hex(w));
  return words;
}

// The file's algorithm, or nullopt where the entry is not 8 words of 16 hex digits.
std::optional<cublasLtMatmulAlgo_t> parse_algo(const json& words) {
  cublasLtMatmulAlgo_t algo{};
  constexpr size_t kWords = sizeof(algo.data) / sizeof(algo.data[0]);
  if (!words.is_array() || words.size() != kWords) return std::nullopt;
  for (size_t i = 0; i < kWords; ++i) {
    if (!words[i].is_string() || words[i].get<std::string>().size() != 16) return std::nullopt;
    const std::string w = words[i].get<std::string>();
    size_t used = 0;
    try {
      algo.data[i] = std::stoull(w, &used, 16);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != w.size()) return std::nullopt;
  }
  return algo;
}

[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw InputError(fmt::format("training.gemm_autotune_dir: {} {}; delete the file to tune anew, or point "
                               "training.gemm_autotune_dir at another directory",
                               path, problem));
}

// Reads s.path into s.entries (a missing file: none).
void load(State& s) {
  std::error_code ec;
  if (!fs::exists(s.path, ec)) return;
  std::ifstream in(s.path);
  json j;
  std::string gpu;
  size_t version = 0;
  int64_t workspace = 0;
  try {
    j = json::parse(in);
    if (!j.is_object() || j.value("format", "") != kFormat || !j.contains("gemms") || !j["gemms"].is_object()) {
      refuse(s.path, fmt::format("is not a file of cuBLASLt choices (\"format\": \"{}\")", kFormat));
    }
    gpu = j.value("gpu", "");
    version = j.value("cublaslt_version", size_t{0});
    workspace = j.value("workspace_bytes", int64_t{0});
  } catch (const json::exception& e) {  // not JSON, or a field of the wrong type
    refuse(s.path, fmt::format("is not a valid file of cuBLASLt choices ({})", e.what()));
  }
  // The workspace bounds which algorithms the heuristic offers, so it is part of what was chosen on.
  if (gpu != s.gpu || version != s.cublaslt_version || workspace != kCublasLtWorkspaceBytes) {
    refuse(s.path, fmt::format("holds algorithms chosen on {} with cuBLASLt {} and a {}-byte workspace, and this run "
                               "has {} with cuBLASLt {} and a {}-byte workspace",
                               gpu, version, workspace, s.gpu, s.cublaslt_version, kCublasLtWorkspaceBytes));
  }
  for (const auto& [shape, entry] : j["gemms"].items()) {
    if (!entry.is_object() || !entry.contains("algo") || !parse_algo(entry["algo"])) {
      refuse(s.path, fmt::format("has a malformed entry for {}", shape));
    }
    s.entries[shape] = entry;
  }
}

// The whole file rewritten from s.entries: written beside it, then renamed over it.
void save(const State& s) {
  json gemms = json::object();
  for (const auto& [shape, entry] : s.entries) gemms[shape] = entry;
  const json j = {{"format", kFormat},
                  {"gpu", s.gpu},
                  {"cublaslt_version", s.cublaslt_version},
                  {"workspace_bytes", kCublasLtWorkspaceBytes},
                  {"gemms", gemms}};
  const std::string tmp = fmt::format("{}.tmp-{}", s.path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    out.flush();
    if (!out) throw InputError(fmt::format("training.gemm_autotune_dir: cannot write {}", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, s.path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw InputError(fmt::format("training.gemm_autotune_dir: cannot replace {}: {}", s.path, ec.message()));
  }
}

// At exit: the GEMM time of the run's calls with the heuristic's first algorithms and with the
// chosen ones (printf: spdlog's sinks may be gone by then).
void summarize() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex, std::try_to_lock);
  if (!lock.owns_lock() || s.tracked.empty()) return;
  double heuristic = 0.0, chosen = 0.0;
  size_t timed_now = 0;
  for (const Tracked& t : s.tracked) {
    heuristic += t.heuristic_us * static_cast<double>(t.calls);
    chosen += t.chosen_us * static_cast<double>(t.calls);
    timed_now += t.timed_now ? 1 : 0;
  }
  std::printf("cuBLASLt autotune: %zu GEMM shapes (%zu timed in this run, %zu read from %s); weighted by their calls, "
              "the heuristic's first algorithms take %.1f ms and the chosen ones %.1f ms (%+.1f%%)\n",
              s.tracked.size(), timed_now, s.tracked.size() - timed_now, s.path.c_str(), heuristic / 1000.0,
              chosen / 1000.0, heuristic > 0.0 ? 100.0 * (chosen - heuristic) / heuristic : 0.0);
  std::fflush(stdout);
}

}  // namespace

void configure(const std::string& dir, int rank) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.clear();
  s.path.clear();
  if (dir.empty()) return;
  s.gpu = device_identity();
  s.cublaslt_version = cublasLtGetVersion();
  const std::string path = (fs::path(dir) / fmt::format("rank-{:05d}.json", rank)).string();
  s.path = path;
  try {
    load(s);
  } catch (...) {
    s.path.clear();
    throw;
  }
  if (s.entries.empty()) {
    spdlog::info("cuBLASLt autotune (training.gemm_autotune_dir): each GEMM shape's algorithm chosen by timing at "
                 "its first call, the choices written to {}", path);
  } else {
    spdlog::info("cuBLASLt autotune (training.gemm_autotune_dir): {} GEMM algorithms read from {} (chosen on {}); "
                 "shapes it lacks are timed at their first call",
                 s.entries.size(), path, s.gpu);
  }
}

bool enabled() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return !s.path.empty();
}

std::optional<cublasLtMatmulAlgo_t> saved(const std::string& shape) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.entries.find(shape);
  if (it == s.entries.end()) return std::nullopt;
  return parse_algo(it->second["algo"]);
}

void record(const std::string& shape, const Choice& choice) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.path.empty()) return;
  s.entries[shape] = json{{"algo", algo_json(choice.algo)},
                          {"candidate", choice.candidate},
                          {"heuristic_us", std::round(choice.heuristic_us * 10.0) / 10.0},
                          {"chosen_us", std::round(choice.chosen_us * 10.0) / 10.0},
                          {"config", choice.config}};
  save(s);
}

int track(const std::string& shape, bool timed_now) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto it = s.entries.find(shape);
  if (it == s.entries.end()) return -1;
  if (s.tracked.empty()) std::atexit(summarize);
  s.tracked.push_back(Tracked{it->second.value("heuristic_us", 0.0), it->second.value("chosen_us", 0.0), timed_now});
  return static_cast<int>(s.tracked.size()) - 1;
}

void count_call(int index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (index >= 0 && index < static_cast<int>(s.tracked.size())) ++s.tracked[static_cast<size_t>(index)].calls;
}

std::string file() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.path;
}

}  // namespace lattice::cuda::autotune
