// HfWeights: one file, model.safetensors in a directory, or an index and its shards.
#include "checkpoint/hf_weights.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace lattice {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// weight_map of an index file: tensor name -> shard file name (relative to the directory).
std::map<std::string, std::string> read_weight_map(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) throw InputError(fmt::format("HF index '{}' cannot be read", index_path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("HF index '{}' is not valid JSON ({})", index_path, e.what()));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    throw InputError(fmt::format("HF index '{}' has no \"weight_map\" object ({{tensor name: shard file}})",
                                 index_path));
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() || fs::path(file.get<std::string>()).is_absolute())
      throw InputError(fmt::format("HF index '{}': weight_map[\"{}\"] must be a shard file name in the same "
                                   "directory, got {}",
                                   index_path, name, file.dump()));
    map.emplace(name, file.get<std::string>());
  }
  return map;
}

}  // namespace

std::vector<std::string> remove_sharded_weights(const std::string& dir) {
  const fs::path index = fs::path(dir) / kIndexFile;
  std::error_code ec;
  if (!fs::is_regular_file(index, ec)) return {};
  std::map<std::string, std::string> weight_map;
  try {
    weight_map = read_weight_map(index.string());
  } catch (const InputError&) {
    return {};
  }
  static const std::regex kShardName(R"(model-[0-9]+-of-[0-9]+\.safetensors)");
  std::set<std::string> shards;
  for (const auto& [name, file] : weight_map) {
    if (std::regex_match(file, kShardName)) shards.insert(file);
  }
  std::vector<std::string> removed;
  for (const std::string& shard : shards) {
    if (fs::remove(fs::path(dir) / shard, ec)) removed.push_back(shard);
  }
  if (fs::remove(index, ec)) removed.push_back(kIndexFile);
  return removed;
}

HfWeights::HfWeights(const std::string& path) : path_(path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    add_file(path, {});
    return;
  }
  const fs::path dir(path);
  // model.safetensors first, as transformers' from_pretrained reads it: beside an index it is the
  // newer save (`lattice export` removes an older save's index and shards; see hf_interop.h).
  if (fs::is_regular_file(dir / kSingleFile, ec)) {
    add_file((dir / kSingleFile).string(), {});
    return;
  }
  if (fs::is_regular_file(dir / kIndexFile, ec)) {
    const std::string index = (dir / kIndexFile).string();
    std::map<std::string, std::vector<std::string>> by_file;
    for (const auto& [name, file] : read_weight_map(index)) by_file[file].push_back(name);
    for (const auto& [file, names] : by_file) {
      const std::string shard = (dir / file).string();
      if (!fs::is_regular_file(shard, ec))
        throw InputError(fmt::format("HF index '{}' names the shard '{}' (for '{}', ...), which is missing", index,
                                     shard, names.front()));
      add_file(shard, names);
    }
    return;
  }
  throw InputError(fmt::format("HF model directory '{}' holds neither {} nor {} (with its model-0000x-of-0000y "
                               "shards)",
                               path, kSingleFile, kIndexFile));
}

void HfWeights::add_file(const std::string& file, const std::vector<std::string>& names) {
  auto& f = files_[file];
  if (!f) f = std::make_unique<SafetensorsFile>(file);
  if (names.empty()) {  // a single file: every tensor it holds
    for (const std::string& n : f->names()) where_[n] = f.get();
    return;
  }
  for (const std::string& n : names) {
    if (!f->contains(n))
      throw InputError(fmt::format("HF index in '{}' puts tensor '{}' in '{}', which does not hold it", path_, n,
                                   file));
    where_[n] = f.get();
  }
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& HfWeights::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) throw InputError(fmt::format("HF weights '{}' have no tensor '{}'", path_, name));
  return *it->second;
}

}  // namespace lattice
