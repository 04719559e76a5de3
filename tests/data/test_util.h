// Helpers shared by the data tests: a per-test scratch directory and the Python dataset writer.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "data/batch_loader.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset_writer.h"
#include "kernels/tensor.h"

namespace lattice::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    const char* base = std::getenv("TEST_TMPDIR");
    path_ = std::filesystem::path(base ? base : "/tmp") / ("lattice_data_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A file of this repository, such as "tests/data/write_indexed_dataset.py", from the runfiles (cwd of a
// Bazel test is the runfiles root of the `lattice` workspace) or from the source tree when run by hand.
inline std::string repository_file(const std::string& path) {
  for (const std::string& c : {path, "lattice/" + path}) {
    if (std::filesystem::exists(c)) return c;
  }
  if (const char* src = std::getenv("TEST_SRCDIR")) {
    const std::string p = std::string(src) + "/lattice/" + path;
    if (std::filesystem::exists(p)) return p;
  }
  FAIL(path << " not found from cwd " << std::filesystem::current_path());
  return "";
}

inline std::string writer_script() { return repository_file("tests/data/write_indexed_dataset.py"); }

inline void run_writer(const std::string& args) {
  std::string cmd = "python3 " + writer_script() + " " + args;
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
}

// Documents with varied lengths (some empty but for EOD, some longer than a sample); token =
// f(doc, pos) < 1000, EOD = 1000; `salt` makes another dataset's tokens differ.
inline std::vector<std::vector<int32_t>> make_docs(int n, int salt = 0) {
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < n; ++d) {
    int len = (d % 11 == 4) ? 0 : 1 + (d * 29 + 7 + salt) % 23;
    std::vector<int32_t> doc;
    for (int j = 0; j < len; ++j) doc.push_back((d * 31 + j * 7 + salt * 17) % 1000);
    doc.push_back(1000);  // "EOD"
    docs.push_back(doc);
  }
  return docs;
}

inline std::string write_docs(const TempDir& dir, const std::vector<std::vector<int32_t>>& docs,
                              const std::string& name = "ds") {
  std::string prefix = dir / name;
  IndexedDatasetWriter w(prefix, TokenDType::kU16);
  for (auto& d : docs) w.add_document(d);
  w.finish();
  return prefix;
}

inline std::vector<int32_t> stream_of(const std::vector<std::vector<int32_t>>& docs, DocumentRange r) {
  std::vector<int32_t> s;
  for (int64_t d = r.begin; d < r.end; ++d) s.insert(s.end(), docs[d].begin(), docs[d].end());
  return s;
}

inline std::vector<int32_t> row(const Tensor& t, int64_t r) {
  const int64_t S = t.dim(1);
  return std::vector<int32_t>(t.i32() + r * S, t.i32() + (r + 1) * S);
}

// The samples of one split of a single-dataset config, as the trainer makes them.
inline std::shared_ptr<const GptSamples> gpt_samples(const DataConfig& cfg, Split split, int64_t S) {
  auto s = std::dynamic_pointer_cast<const GptSamples>(make_split_samples(cfg, open_datasets(cfg), split, S));
  REQUIRE(s != nullptr);
  return s;
}

inline LoaderOptions loader_options(int64_t mb, int64_t B, int64_t dp_rank = 0, int64_t dp_size = 1,
                                    int64_t prefetch = 0, int64_t vocab = 0) {
  LoaderOptions o;
  o.micro_batch_size = mb;
  o.global_batch_size = B;
  o.dp_rank = dp_rank;
  o.dp_size = dp_size;
  o.prefetch = prefetch;
  o.vocab_size = vocab;
  return o;
}

}  // namespace lattice::testing
