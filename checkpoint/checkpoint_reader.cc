// Verify-then-copy loading of sharded checkpoints, and consolidation into one process.
#include "checkpoint/checkpoint_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/box.h"
#include "checkpoint/crc32.h"
#include "checkpoint/safetensors.h"
#include "kernels/error.h"
#include "kernels/ops.h"
#include "model/model_parameters.h"

namespace lattice {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Where global coordinates `at` (inside `box`) lie in the box's row-major order.
uint64_t row_major_index(const Box& box, const Shape& at) {
  uint64_t index = 0;
  for (size_t d = 0; d < at.size(); ++d)
    index = index * static_cast<uint64_t>(box.shape[d]) + static_cast<uint64_t>(at[d] - box.offset[d]);
  return index;
}

// One stored box's part of one local tensor.
struct Piece {
  const StoredBox* stored;
  Box region;
  Tensor* target;      // flat host tensor it lands in
  int64_t dst_index;   // where in the target the element at global coordinates dst_origin lands
  Shape dst_origin;
  const ParamSpec* spec;
  // The bytes of the stored box the region's elements lie between (its first and last element).
  uint64_t first_byte = 0;
  uint64_t end_byte = 0;
};

Piece make_piece(const StoredBox& stored, Box region, Tensor* target, int64_t dst_index, Shape dst_origin,
                 const ParamSpec& spec) {
  Shape last = region.offset;
  for (size_t d = 0; d < last.size(); ++d) last[d] += region.shape[d] - 1;
  const uint64_t first_byte = row_major_index(stored.box, region.offset) * sizeof(float);
  const uint64_t end_byte = (row_major_index(stored.box, last) + 1) * sizeof(float);
  return {&stored, std::move(region), target, dst_index, std::move(dst_origin), &spec, first_byte, end_byte};
}

// A box of a parameter's local tensor that a load fills (global coordinates) and where in the
// target its first element lands (the rest follow in the local tensor's row-major order).
struct Part {
  Box box;
  int64_t dst_index;
  int64_t values_dst_index;  // the same in the values target (LoadRange::values_offset)
};

// The parts of parameter `spec`, at flat offset `flat`, that the targets take: the whole local
// tensor, or its elements inside `ranges`.
std::vector<Part> parts_of(const ParamSpec& spec, int64_t flat, const std::vector<LoadRange>& ranges) {
  if (ranges.empty()) return {{Box{spec.offset, spec.shape}, flat, flat}};
  std::vector<Part> parts;
  const int64_t n = shape_numel(spec.shape);
  for (const LoadRange& r : ranges) {
    const int64_t a = std::max(flat, r.flat_offset), b = std::min(flat + n, r.flat_offset + r.numel);
    if (a >= b) continue;
    int64_t dst = r.target_offset + (a - r.flat_offset), values_dst = r.values_at() + (a - r.flat_offset);
    for (Box box : flat_range_boxes(spec.shape, a - flat, b - flat)) {
      const int64_t numel = box.numel();
      for (size_t d = 0; d < box.offset.size(); ++d) box.offset[d] += spec.offset[d];
      parts.push_back({std::move(box), dst, values_dst});
      dst += numel;  // the boxes are consecutive in the local tensor's element order
      values_dst += numel;
    }
  }
  return parts;
}

// Host tensor that a flat target is filled through (the target itself when it is on the host).
Tensor host_view(const Tensor& t) {
  return t.device() == Device::kCpu ? t : Tensor::zeros(t.shape(), t.dtype());
}

}  // namespace

CheckpointMetadata read_checkpoint_metadata(const std::string& checkpoint_dir) {
  const std::string path = (fs::path(checkpoint_dir) / kMetadataFile).string();
  std::ifstream in(path);
  if (!in)
    throw InputError(fmt::format("checkpoint metadata '{}' cannot be read: {} — is '{}' a committed checkpoint "
                                 "directory (iter_*)?",
                                 path, std::strerror(errno), checkpoint_dir));
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception& e) {
    throw InputError(fmt::format("checkpoint metadata '{}' is not valid JSON ({}); the file is damaged: load another "
                                 "checkpoint",
                                 path, e.what()));
  }
  check_metadata_crc(doc, path);
  return metadata_from_json(doc, path);
}

void check_model_config(const json& checkpoint_config, const json& config, const std::string& checkpoint_dir,
                        const std::string& what_to_do) {
  const json empty = json::object();
  const json& a = checkpoint_config.contains("model") ? checkpoint_config["model"] : empty;
  const json& b = config.contains("model") ? config["model"] : empty;
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  std::vector<std::string> diffs;
  for (const std::string& k : keys) {
    // Not the model's weights: where they first came from, and what backward recomputes (a run may
    // turn recomputation on or off when it resumes, e.g. to fit another layout's memory).
    if (k == "init_from" || k == "recompute" || k == "recompute_num_layers") continue;
    const std::string va = a.contains(k) ? a[k].dump() : "(absent)";
    const std::string vb = b.contains(k) ? b[k].dump() : "(absent)";
    if (!a.contains(k) || !b.contains(k) || a[k] != b[k])
      diffs.push_back(fmt::format("model.{}: checkpoint {}, config {}", k, va, vb));
  }
  if (diffs.empty()) return;
  std::string list;
  for (const auto& d : diffs) list += "\n  " + d;
  throw InputError(
      fmt::format("checkpoint '{}' holds a different model than the config:{}\n{}", checkpoint_dir, list, what_to_do));
}

CheckpointMetadata load_checkpoint(const std::string& checkpoint_dir, const json& config, const LoadTargets& targets) {
  LATTICE_CHECK(targets.layout != nullptr && targets.values != nullptr, "load_checkpoint needs a layout and values");
  const ParamLayout& layout = *targets.layout;
  const int64_t target_numel = targets.ranges.empty() ? layout.numel() : targets.target_numel;
  // Values apart: the ranges place the values elsewhere than the moments, or in a target of another size.
  const bool values_apart =
      targets.values->numel() != target_numel ||
      std::any_of(targets.ranges.begin(), targets.ranges.end(),
                  [](const LoadRange& r) { return r.values_at() != r.target_offset; });
  for (const LoadRange& r : targets.ranges)
    LATTICE_CHECK(r.numel >= 0 && r.flat_offset >= 0 && r.flat_offset + r.numel <= layout.numel() &&
                      r.target_offset >= 0 && r.target_offset + r.numel <= target_numel &&
                      r.values_at() + r.numel <= targets.values->numel(),
                  "load_checkpoint: range of {} at flat {} into {} at {} (values {} at {}; layout of {})", r.numel,
                  r.flat_offset, target_numel, r.target_offset, targets.values->numel(), r.values_at(),
                  layout.numel());
  LATTICE_CHECK(!targets.ranges.empty() || targets.values->numel() == target_numel,
                "load_checkpoint: values {} for {} elements", targets.values->describe(), target_numel);
  LATTICE_CHECK((targets.exp_avg == nullptr) == (targets.exp_avg_sq == nullptr), "load both moments or neither");
  CheckpointMetadata m = read_checkpoint_metadata(checkpoint_dir);
  if (!config.is_null()) check_model_config(m.config, config, checkpoint_dir, "set these fields to the checkpoint's values");
  const bool moments = targets.exp_avg != nullptr;
  if (moments) {
    LATTICE_CHECK(targets.exp_avg->numel() == target_numel && targets.exp_avg_sq->numel() == target_numel,
                  "moments have {} and {} elements, the values {}", targets.exp_avg->numel(),
                  targets.exp_avg_sq->numel(), target_numel);
    if (!m.optimizer_state)
      throw InputError(fmt::format("checkpoint '{}' holds no optimizer state (it was saved without AdamW moments); "
                                   "load it as weights only, or load another checkpoint",
                                   checkpoint_dir));
  }

  // 1. Plan: which part of which stored box lands where. Values apart on a device go through a host
  // tensor laid out as the moments, then to their places (a host one of the device's size would hold
  // the whole flat layout); on the host they land in place.
  const bool values_in_place = values_apart && targets.values->device() == Device::kCpu;
  Tensor values = values_apart && !values_in_place ? Tensor::zeros({target_numel}) : host_view(*targets.values);
  Tensor exp_avg = moments ? host_view(*targets.exp_avg) : Tensor();
  Tensor exp_avg_sq = moments ? host_view(*targets.exp_avg_sq) : Tensor();
  std::vector<std::pair<const char*, Tensor*>> kinds = {{kModelKind, &values}};
  if (moments) {
    kinds.emplace_back(kExpAvgKind, &exp_avg);
    kinds.emplace_back(kExpAvgSqKind, &exp_avg_sq);
  }
  std::vector<Piece> pieces;
  std::set<std::string> needed_files;
  for (size_t i = 0; i < layout.count(); ++i) {
    const ParamSpec& spec = layout.spec(i);
    const Box real{spec.offset, spec.box};  // the local tensor less its padding rows
    const std::vector<Part> parts = parts_of(spec, layout.offset(i), targets.ranges);
    if (parts.empty()) continue;
    for (const auto& [kind, target] : kinds) {
      const std::string key = tensor_key(kind, spec.name);
      auto it = m.tensors.find(key);
      if (it == m.tensors.end())
        throw InputError(fmt::format("checkpoint '{}' has no tensor '{}', which parameter '{}' needs: it was written "
                                     "for a different model (check model.* in the config) or is damaged; load another "
                                     "checkpoint",
                                     checkpoint_dir, key, spec.name));
      const StoredTensor& stored = it->second;
      if (stored.global_shape != spec.global_shape)
        throw InputError(fmt::format("checkpoint '{}': tensor '{}' has global shape {}, the model's parameter {}; "
                                     "check model.* in the config",
                                     checkpoint_dir, key, shape_string(stored.global_shape),
                                     shape_string(spec.global_shape)));
      for (const Part& part : parts) {
        const Box wanted = intersect(part.box, real);
        if (wanted.numel() == 0) continue;
        int64_t covered = 0;
        for (const StoredBox& sb : stored.boxes) {
          Box region = intersect(sb.box, wanted);
          if (region.numel() == 0) continue;
          covered += region.numel();
          needed_files.insert(sb.file);
          const int64_t dst = target == &values && values_in_place ? part.values_dst_index : part.dst_index;
          pieces.push_back(make_piece(sb, std::move(region), target, dst, part.box.offset, spec));
        }
        LATTICE_CHECK(covered == wanted.numel(), "tensor '{}': stored boxes cover {} of this rank's {} elements in {}",
                      key, covered, wanted.numel(), box_string(wanted));
      }
    }
  }

  // 2. Verify what the load reads before trusting any of it: every file present, its size, its
  // header's checksum and structure, and the checksum of every box read (of every whole file, for
  // checkpoints written without header and box checksums).
  const bool box_checksums =
      std::all_of(pieces.begin(), pieces.end(), [](const Piece& p) { return p.stored->crc32.has_value(); }) &&
      std::all_of(needed_files.begin(), needed_files.end(),
                  [&](const std::string& name) { return m.files.at(name).header.has_value(); });
  uint64_t bytes_read = 0;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;
  for (const std::string& name : needed_files) {
    const StoredFile& expect = m.files.at(name);
    const std::string path = (fs::path(checkpoint_dir) / name).string();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      throw InputError(fmt::format("checkpoint shard '{}' is missing ({}; metadata.json lists it, written by rank {}): "
                                   "restore the file or load another checkpoint",
                                   path, std::strerror(errno), expect.rank));
    if (static_cast<uint64_t>(st.st_size) != expect.bytes)
      throw InputError(fmt::format("checkpoint shard '{}' is {} bytes but metadata.json says {} ({}): the file is "
                                   "damaged; restore it or load another checkpoint",
                                   path, st.st_size, expect.bytes,
                                   static_cast<uint64_t>(st.st_size) < expect.bytes ? "truncated" : "grown"));
    // The header (the boxes' chunks follow), or the whole file.
    const FileChecksum want = box_checksums ? *expect.header : FileChecksum{expect.bytes, expect.crc32};
    const FileChecksum sum = file_checksum(path, want.bytes);
    if (sum.crc32 != want.crc32 || sum.bytes != want.bytes)
      throw InputError(fmt::format("checkpoint shard '{}' fails its checksum{} (CRC-32 {:08x}, metadata.json says "
                                   "{:08x}): the file is corrupt; restore it or load another checkpoint",
                                   path, box_checksums ? " in its header" : "", sum.crc32, want.crc32));
    bytes_read += sum.bytes;
    files[name] = std::make_unique<SafetensorsFile>(path);
  }
  for (const Piece& p : pieces) {
    const SafetensorsFile& f = *files.at(p.stored->file);
    if (!f.contains(p.stored->key))
      throw InputError(fmt::format("checkpoint shard '{}' has no tensor '{}' although metadata.json places it there: "
                                   "the checkpoint is damaged; load another",
                                   f.path(), p.stored->key));
    const SafetensorsEntry& e = f.entry(p.stored->key);
    if (e.dtype != "F32" || e.shape != p.stored->box.shape)
      throw InputError(fmt::format("checkpoint shard '{}': tensor '{}' is {} {}, metadata.json says F32 {}: the "
                                   "checkpoint is damaged; load another",
                                   f.path(), p.stored->key, e.dtype, shape_string(e.shape),
                                   shape_string(p.stored->box.shape)));
  }
  if (box_checksums) {
    // The chunks of each stored box that the pieces read from.
    const uint64_t chunk = m.box_crc32_chunk_bytes;
    std::set<std::pair<const StoredBox*, uint64_t>> verified;
    for (const Piece& p : pieces) {
      const StoredBox& sb = *p.stored;
      const SafetensorsFile& f = *files.at(sb.file);
      const auto* bytes = static_cast<const unsigned char*>(f.raw(sb.key));
      const uint64_t box_bytes = static_cast<uint64_t>(sb.box.numel()) * sizeof(float);
      for (uint64_t c = p.first_byte / chunk; c * chunk < p.end_byte; ++c) {
        if (!verified.insert({&sb, c}).second) continue;
        const uint64_t begin = c * chunk, len = std::min(chunk, box_bytes - begin);
        Crc32 crc;
        crc.update(bytes + begin, len);
        if (crc.value() != (*sb.crc32)[c])
          throw InputError(fmt::format("checkpoint shard '{}' fails its checksum in tensor '{}', bytes {} to {} of "
                                       "it (CRC-32 {:08x}, metadata.json says {:08x}): the file is corrupt; restore it "
                                       "or load another checkpoint",
                                       f.path(), sb.key, begin, begin + len, crc.value(), (*sb.crc32)[c]));
        f.release(bytes + begin, len);
        bytes_read += len;
      }
    }
  }
  if (targets.report != nullptr) {
    targets.report->bytes_read = bytes_read;
    targets.report->checkpoint_bytes = 0;
    for (const auto& [name, file] : m.files) targets.report->checkpoint_bytes += file.bytes;
  }

  // 3. Copy. Padding rows (past each box), and what no range covers, end up zero.
  for (const auto& [kind, target] : kinds) ops::fill(*target, 0.0f);
  for (const Piece& p : pieces) {
    const SafetensorsFile& f = *files.at(p.stored->file);
    float* dst = p.target->f32() + p.dst_index;
    const void* src = f.raw(p.stored->key);
    copy_region(src, p.stored->box, dst, p.dst_origin, p.spec->shape, p.region, sizeof(float));
    f.release(static_cast<const char*>(src) + p.first_byte, p.end_byte - p.first_byte);
  }
  if (values_apart && !values_in_place) {
    ops::fill(*targets.values, 0.0f);
    for (const LoadRange& r : targets.ranges) {
      Tensor dst = targets.values->slice_flat(r.values_at(), {r.numel});
      ops::copy(values.slice_flat(r.target_offset, {r.numel}), dst);
    }
  } else if (values.raw() != targets.values->raw()) {
    ops::copy(values, *targets.values);
  }
  if (moments) {
    if (exp_avg.raw() != targets.exp_avg->raw()) ops::copy(exp_avg, *targets.exp_avg);
    if (exp_avg_sq.raw() != targets.exp_avg_sq->raw()) ops::copy(exp_avg_sq, *targets.exp_avg_sq);
  }
  return m;
}

std::unique_ptr<ParameterStore> consolidate_checkpoint(const std::string& checkpoint_dir, const ModelConfig& model) {
  auto store = std::make_unique<ParameterStore>(model_parameter_specs(model), host_context());
  load_checkpoint(checkpoint_dir, json(), {store.get(), &store->flat_values()});
  return store;
}

}  // namespace lattice
