// Dataset stats: a multi-threaded streaming scan of the .bin, cached in PREFIX.stats.json.
#include "data/dataset_stats.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/file_io.h"
#include "kernels/error.h"

namespace lattice {

namespace {

using nlohmann::json;

constexpr int kStatsVersion = 1;
constexpr uint64_t kChunkBytes = uint64_t{4} << 20;  // per read and per thread buffer
constexpr unsigned kMaxThreads = 8;

// The identity of one file for the cache: a rewritten dataset changes its size or mtime.
json file_stamp(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(fmt::format("{}: cannot read the dataset file: {}", path, std::strerror(errno)));
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return {{"bytes", static_cast<uint64_t>(st.st_size)}, {"mtime_ns", mtime_ns}};
}

json files_key(const std::string& prefix) {
  return {{"bin", file_stamp(prefix + ".bin")}, {"idx", file_stamp(prefix + ".idx")}};
}

std::optional<int64_t> read_cached_max(const std::string& path, const json& key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != kStatsVersion || !j.contains("files") ||
      j["files"] != key || !j.contains("max_token_id") || !j["max_token_id"].is_number_integer()) {
    spdlog::debug("{} does not match the dataset files (or is damaged): reading the token ids again", path);
    return std::nullopt;
  }
  return j["max_token_id"].get<int64_t>();
}

// A directory we may not write is fine: the ids are read again next time.
void write_cache(const std::string& prefix, const json& key, int64_t max_token_id) {
  const std::string path = dataset_stats_path(prefix);
  const json j = {{"version", kStatsVersion}, {"files", key}, {"max_token_id", max_token_id}};
  try {
    replace_file(path, j.dump(1) + "\n");
  } catch (const Error& e) {
    spdlog::info("cannot cache the dataset stats in {} ({}): the token ids are read again next time", path, e.what());
  }
}

// Byte ranges of .bin that hold sequences (adjacent sequences merged), cut into reads of at most
// kChunkBytes whole tokens.
std::vector<std::pair<uint64_t, uint64_t>> token_chunks(const IndexedDataset& ds) {
  const uint64_t item = token_dtype_size(ds.dtype());
  const uint64_t chunk = kChunkBytes / item * item;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  auto cut = [&](uint64_t begin, uint64_t end) {
    for (uint64_t b = begin; b < end; b += chunk) out.emplace_back(b, std::min(b + chunk, end));
  };
  uint64_t begin = 0, end = 0;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    const uint64_t b = static_cast<uint64_t>(ds.sequence_pointer(i));
    const uint64_t e = b + static_cast<uint64_t>(ds.sequence_length(i)) * item;
    if (b == end) {
      end = e;
      continue;
    }
    cut(begin, end);
    begin = b;
    end = e;
  }
  cut(begin, end);
  return out;
}

template <typename T>
void fold(const unsigned char* p, size_t bytes, int64_t& lo, int64_t& hi) {
  for (size_t k = 0; k + sizeof(T) <= bytes; k += sizeof(T)) {
    T v;
    std::memcpy(&v, p + k, sizeof(T));
    lo = std::min<int64_t>(lo, static_cast<int64_t>(v));
    hi = std::max<int64_t>(hi, static_cast<int64_t>(v));
  }
}

void fold_tokens(TokenDType dtype, const unsigned char* p, size_t bytes, int64_t& lo, int64_t& hi) {
  switch (dtype) {
    case TokenDType::kU8: fold<uint8_t>(p, bytes, lo, hi); break;
    case TokenDType::kI8: fold<int8_t>(p, bytes, lo, hi); break;
    case TokenDType::kI16: fold<int16_t>(p, bytes, lo, hi); break;
    case TokenDType::kU16: fold<uint16_t>(p, bytes, lo, hi); break;
    case TokenDType::kI32: fold<int32_t>(p, bytes, lo, hi); break;
    case TokenDType::kI64: fold<int64_t>(p, bytes, lo, hi); break;
    default: LATTICE_CHECK(false, "token dtype {} cannot hold token ids", token_dtype_name(dtype));
  }
}

// The smallest and largest token id of every sequence: threads take chunks in turn and pread them
// into their own buffer.
std::pair<int64_t, int64_t> scan_token_range(const IndexedDataset& ds) {
  const auto chunks = token_chunks(ds);
  const int fd = ::open(ds.bin_path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(fmt::format("{}: cannot open the dataset file: {}", ds.bin_path(), std::strerror(errno)));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = static_cast<unsigned>(std::clamp<size_t>(chunks.size(), 1, std::min(kMaxThreads, cores)));
  std::atomic<size_t> next{0};
  std::vector<int64_t> lo(threads, std::numeric_limits<int64_t>::max()), hi(threads, -1);
  std::vector<std::exception_ptr> errors(threads);
  auto work = [&](unsigned t) {
    try {
      std::vector<unsigned char> buf(kChunkBytes);
      for (size_t c = next++; c < chunks.size(); c = next++) {
        const auto [begin, end] = chunks[c];
        size_t got = 0;
        while (got < end - begin) {
          const ssize_t n = ::pread(fd, buf.data() + got, end - begin - got, static_cast<off_t>(begin + got));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0)
            throw Error(fmt::format("{}: read of bytes [{}, {}) failed: {}", ds.bin_path(), begin + got, end,
                                    n < 0 ? std::strerror(errno) : "end of file (the file shrank?)"));
          got += static_cast<size_t>(n);
        }
        fold_tokens(ds.dtype(), buf.data(), got, lo[t], hi[t]);
      }
    } catch (...) {
      errors[t] = std::current_exception();
      next = chunks.size();  // the others stop at their next chunk
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  ::close(fd);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return {*std::min_element(lo.begin(), lo.end()), *std::max_element(hi.begin(), hi.end())};
}

}  // namespace

std::string dataset_stats_path(const std::string& prefix) { return prefix + ".stats.json"; }

DatasetStats dataset_stats(const IndexedDataset& dataset) {
  const std::string path = dataset_stats_path(dataset.prefix());
  const json key = files_key(dataset.prefix());
  if (const auto cached = read_cached_max(path, key)) return {*cached, true};
  const auto t0 = std::chrono::steady_clock::now();
  const auto [lo, hi] = scan_token_range(dataset);
  if (dataset.total_tokens() > 0 && lo < 0)
    throw InputError(fmt::format("{}: holds the token id {}: token ids must be >= 0; the dataset was not written by a "
                                 "tokenizer; re-run `lattice data prepare` to rebuild it",
                                 dataset.bin_path(), lo));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{}: read {} token ids in {:.1f} s, the largest is {}", dataset.bin_path(), dataset.total_tokens(),
               seconds, hi);
  write_cache(dataset.prefix(), key, hi);
  return {hi, false};
}

void write_dataset_stats(const std::string& prefix, int64_t max_token_id) {
  write_cache(prefix, files_key(prefix), max_token_id);
}

}  // namespace lattice
