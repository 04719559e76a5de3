// HfWeights: the tensors of a Hugging Face model wherever they are stored — one safetensors file, a
// model directory holding model.safetensors, or a directory of shards named by
// model.safetensors.index.json ({"weight_map": {tensor: shard file}}, as transformers saves them).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "kernels/tensor.h"

namespace lattice {

// Removes a sharded save from model directory `dir`: model.safetensors.index.json and the shards it
// names that are called as transformers names them (model-0000x-of-0000y.safetensors). Returns the
// file names removed; a malformed index is left alone (the return value is then empty).
std::vector<std::string> remove_sharded_weights(const std::string& dir);

class HfWeights {
 public:
  // `path`: a .safetensors file or a model directory. InputError naming the path or file when the
  // directory holds neither model.safetensors nor an index, the index is malformed, a shard is missing
  // or damaged, or the index names a tensor that its shard lacks.
  explicit HfWeights(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // Throws InputError naming the path when the tensor is absent.
  const SafetensorsEntry& entry(const std::string& name) const { return file_of(name).entry(name); }
  // As SafetensorsFile::read_f32.
  Tensor read_f32(const std::string& name) const { return file_of(name).read_f32(name); }

 private:
  const SafetensorsFile& file_of(const std::string& name) const;
  // Opens `file` (once) and maps every name in `names` to it.
  void add_file(const std::string& file, const std::vector<std::string>& names);

  std::string path_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;  // by path
  std::map<std::string, const SafetensorsFile*> where_;             // tensor name -> its file
};

}  // namespace lattice
