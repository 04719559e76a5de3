// safetensors reader and writer: the Hugging Face tensor file format (u64 LE header length, JSON
// header, one data buffer). Reads F32/F16/BF16 (and I32) into host tensors; writes F32/BF16/I32 atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/tensor.h"

namespace lattice {

// One tensor as the header describes it. Offsets are relative to the start of the data buffer.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I32", "I64", ... (the format's spelling)
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Size in bytes of one element of a safetensors dtype ("F32" -> 4); 0 for an unknown dtype.
size_t safetensors_dtype_size(const std::string& dtype);

// An open, fully validated safetensors file (memory mapped, read only). Every defect of the file
// — size, header length, JSON, dtypes, shapes, offsets, overlaps, gaps — is a lattice::InputError
// that names the file (and the tensor).
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // Throws InputError naming the file when the tensor is absent.
  const SafetensorsEntry& entry(const std::string& name) const;

  // The reads below copy: they release the tensor's pages of the mapping afterwards (release()).
  // The tensor as a host f32 tensor: F32 is copied, F16 and BF16 are widened exactly.
  // Other dtypes are an InputError naming the tensor.
  Tensor read_f32(const std::string& name) const;
  // The tensor as a host i32 tensor (dtype I32 only).
  Tensor read_i32(const std::string& name) const;
  // The tensor in its stored dtype as a host tensor: F32 as f32, BF16 as bf16, I32 as i32; F16 is
  // widened to f32 (Tensor has no f16); other dtypes are an InputError naming the tensor.
  Tensor read(const std::string& name) const;
  // The tensor's bytes in the mapping (entry(name).end - begin of them), valid while this object
  // lives: for readers that copy only part of a tensor (checkpoint resharding).
  const void* raw(const std::string& name) const { return data(entry(name)); }
  // Drops the mapping's pages over [data, data + bytes) from this process's memory: they stay in
  // the page cache, and reading them again maps them again. A reader done with a range keeps its
  // resident memory at what it still reads, not at what it has read of the file.
  void release(const void* data, size_t bytes) const;

 private:
  const uint8_t* data(const SafetensorsEntry& e) const;

  std::string path_;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint64_t data_start_ = 0;  // 8 + header length
};

// Sees every run of bytes written to a file, in file order (to checksum a file and its tensors
// without reading them back): `tensor` names the tensor whose data the run is, empty for the header.
using WriteObserver = std::function<void(const std::string& tensor, const void* data, size_t bytes)>;

// Writes host tensors (f32, bf16 or i32, any shape including 0-d) to `path` in the safetensors format:
// header padded with spaces to 8-byte alignment, "__metadata__" first, tensors laid out in name
// order (the Python library's order for same-size dtypes). Written to `path.tmp`, fsynced, then
// renamed, so the final path never holds a half-written file. `observer`, when set, sees the bytes.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const WriteObserver& observer = {});

// Reads every tensor of a file as SafetensorsFile::read does.
std::map<std::string, Tensor> read_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata = nullptr);

// Writes `contents` to `path` atomically (path.tmp, fsync, rename, fsync of the directory).
void write_file_atomically(const std::string& path, const std::string& contents);

// IEEE half to float, exactly (bfloat16: kernels/bf16.h).
float half_to_float(uint16_t h);

}  // namespace lattice
