// metadata.json (de)serialization with errors that name the file and the field.
#include "checkpoint/checkpoint_format.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "checkpoint/crc32.h"
#include "kernels/error.h"

namespace lattice {

namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& field, const std::string& what) {
  throw InputError(fmt::format("checkpoint metadata '{}': {} {} (the file is damaged or not written by this "
                               "version of lattice; load another checkpoint)",
                               source, field, what));
}

const json& need(const json& obj, const char* key, const std::string& source, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) bad(source, where.empty() ? key : where + "." + key, "is missing");
  return *it;
}

int64_t need_int(const json& obj, const char* key, const std::string& source, const std::string& where = "") {
  const json& v = need(obj, key, source, where);
  if (!v.is_number_integer()) bad(source, where.empty() ? key : where + "." + key, "is not an integer");
  return v.get<int64_t>();
}

Shape need_shape(const json& obj, const char* key, const std::string& source, const std::string& where) {
  const json& v = need(obj, key, source, where);
  if (!v.is_array()) bad(source, where + "." + key, "is not a list of integers");
  Shape out;
  for (const auto& d : v) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      bad(source, where + "." + key, "is not a list of non-negative integers");
    out.push_back(d.get<int64_t>());
  }
  return out;
}

std::string need_string(const json& obj, const char* key, const std::string& source, const std::string& where) {
  const json& v = need(obj, key, source, where);
  if (!v.is_string()) bad(source, where + "." + key, "is not a string");
  return v.get<std::string>();
}

}  // namespace

std::string tensor_key(const std::string& kind, const std::string& param_name) { return kind + "/" + param_name; }

std::string iter_dir_name(int64_t step) { return fmt::format("iter_{:07d}", step); }

int64_t parse_iter_dir_name(const std::string& name) {
  constexpr std::string_view prefix = "iter_";
  if (name.size() < prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return -1;
  return std::stoll(digits);
}

std::string shard_file_name(int world_rank) { return fmt::format("rank_{:05d}.safetensors", world_rank); }

json metadata_to_json(const CheckpointMetadata& m) {
  json doc = json::object();
  doc["format"] = kCheckpointFormat;
  doc["version"] = kCheckpointFormatVersion;
  doc["step"] = m.state.step;
  doc["consumed_samples"] = m.state.consumed_samples;
  doc["optimizer_step_count"] = m.state.optimizer_step_count;
  doc["lr_schedule"] = {{"step", m.state.lr_schedule_step}};
  doc["rng"] = {{"seed", m.state.seed}};
  doc["extra"] = m.state.extra;
  doc["layout"] = {{"world_size", m.layout.world_size},
                   {"tensor", m.layout.tensor},
                   {"pipeline", m.layout.pipeline},
                   {"data", m.layout.data},
                   {"virtual_stages", m.layout.virtual_stages},
                   {"distributed_optimizer", m.layout.distributed_optimizer}};
  doc["optimizer_state"] = m.optimizer_state;
  doc["config"] = m.config;
  json files = json::object();
  for (const auto& [name, f] : m.files) {
    files[name] = {{"bytes", f.bytes}, {"crc32", f.crc32}, {"rank", f.rank}};
    if (f.header) {
      files[name]["header_bytes"] = f.header->bytes;
      files[name]["header_crc32"] = f.header->crc32;
    }
  }
  doc["files"] = std::move(files);
  json tensors = json::object();
  for (const auto& [key, t] : m.tensors) {
    json boxes = json::array();
    for (const StoredBox& b : t.boxes) {
      json box = {{"offset", b.box.offset}, {"shape", b.box.shape}, {"file", b.file}, {"key", b.key}};
      if (b.crc32) box["crc32"] = *b.crc32;
      boxes.push_back(std::move(box));
    }
    tensors[key] = {{"dtype", t.dtype}, {"global_shape", t.global_shape}, {"boxes", std::move(boxes)}};
  }
  doc["tensors"] = std::move(tensors);
  if (m.box_crc32_chunk_bytes > 0) doc["box_crc32_chunk_bytes"] = m.box_crc32_chunk_bytes;
  return doc;
}

namespace {

constexpr const char* kMetadataCrcKey = "metadata_crc32";

uint32_t crc_of(const json& doc) {
  const std::string text = doc.dump();
  Crc32 crc;
  crc.update(text.data(), text.size());
  return crc.value();
}

}  // namespace

json metadata_to_json_with_crc(const CheckpointMetadata& m) {
  json doc = metadata_to_json(m);
  doc[kMetadataCrcKey] = crc_of(doc);
  return doc;
}

void check_metadata_crc(const json& doc, const std::string& source) {
  if (!doc.is_object() || !doc.contains(kMetadataCrcKey)) return;
  json rest = doc;
  rest.erase(kMetadataCrcKey);
  const json& stored = doc[kMetadataCrcKey];
  if (!stored.is_number_unsigned() || stored.get<uint64_t>() != crc_of(rest))
    throw InputError(fmt::format("checkpoint metadata '{}' does not match its {} ({}): the file changed after the "
                                 "save (damaged, or edited); load another checkpoint — or, for a deliberate edit, "
                                 "remove its {} line",
                                 source, kMetadataCrcKey, stored.dump(), kMetadataCrcKey));
}

CheckpointMetadata metadata_from_json(const json& doc, const std::string& source) {
  if (!doc.is_object()) bad(source, "the document", "is not a JSON object");
  if (need_string(doc, "format", source, "") != kCheckpointFormat) bad(source, "format", "is not \"lattice-sharded-checkpoint\"");
  const int64_t version = need_int(doc, "version", source);
  if (version != kCheckpointFormatVersion)
    throw InputError(fmt::format("checkpoint metadata '{}': format version {} is not supported by this lattice "
                                 "(it reads version {}); use the lattice that wrote it",
                                 source, version, kCheckpointFormatVersion));
  CheckpointMetadata m;
  m.state.step = need_int(doc, "step", source);
  m.state.consumed_samples = need_int(doc, "consumed_samples", source);
  m.state.optimizer_step_count = need_int(doc, "optimizer_step_count", source);
  m.state.lr_schedule_step = need_int(need(doc, "lr_schedule", source, ""), "step", source, "lr_schedule");
  // Counts of what happened: a negative one was written by no run (an edit, or damage).
  if (m.state.step < 0) bad(source, "step", "is negative");
  if (m.state.consumed_samples < 0) bad(source, "consumed_samples", "is negative");
  if (m.state.optimizer_step_count < 0) bad(source, "optimizer_step_count", "is negative");
  const json& seed = need(need(doc, "rng", source, ""), "seed", source, "rng");
  if (!seed.is_number_unsigned()) bad(source, "rng.seed", "is not a non-negative integer");
  m.state.seed = seed.get<uint64_t>();
  if (auto it = doc.find("extra"); it != doc.end()) m.state.extra = *it;
  const json& layout = need(doc, "layout", source, "");
  m.layout.world_size = static_cast<int>(need_int(layout, "world_size", source, "layout"));
  m.layout.tensor = static_cast<int>(need_int(layout, "tensor", source, "layout"));
  m.layout.pipeline = static_cast<int>(need_int(layout, "pipeline", source, "layout"));
  m.layout.data = static_cast<int>(need_int(layout, "data", source, "layout"));
  m.layout.virtual_stages = static_cast<int>(need_int(layout, "virtual_stages", source, "layout"));
  const json& dist = need(layout, "distributed_optimizer", source, "layout");
  if (!dist.is_boolean()) bad(source, "layout.distributed_optimizer", "is not true/false");
  m.layout.distributed_optimizer = dist.get<bool>();
  const json& opt = need(doc, "optimizer_state", source, "");
  if (!opt.is_boolean()) bad(source, "optimizer_state", "is not true/false");
  m.optimizer_state = opt.get<bool>();
  m.config = need(doc, "config", source, "");
  if (!m.config.is_object()) bad(source, "config", "is not an object");

  const json& files = need(doc, "files", source, "");
  if (!files.is_object()) bad(source, "files", "is not an object");
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string where = "files." + it.key();
    if (!it.value().is_object()) bad(source, where, "is not an object");
    if (it.key().empty() || it.key().find('/') != std::string::npos || it.key().front() == '.')
      bad(source, where, "is not a plain file name");
    StoredFile f;
    const json& bytes = need(it.value(), "bytes", source, where);
    const json& crc = need(it.value(), "crc32", source, where);
    if (!bytes.is_number_unsigned()) bad(source, where + ".bytes", "is not a non-negative integer");
    if (!crc.is_number_unsigned() || crc.get<uint64_t>() > 0xffffffffull) bad(source, where + ".crc32", "is not a 32-bit checksum");
    f.bytes = bytes.get<uint64_t>();
    f.crc32 = static_cast<uint32_t>(crc.get<uint64_t>());
    f.rank = static_cast<int>(need_int(it.value(), "rank", source, where));
    if (it.value().contains("header_bytes") || it.value().contains("header_crc32")) {
      const json& hb = need(it.value(), "header_bytes", source, where);
      const json& hc = need(it.value(), "header_crc32", source, where);
      if (!hb.is_number_unsigned() || hb.get<uint64_t>() > f.bytes)
        bad(source, where + ".header_bytes", "is not a byte count within the file");
      if (!hc.is_number_unsigned() || hc.get<uint64_t>() > 0xffffffffull)
        bad(source, where + ".header_crc32", "is not a 32-bit checksum");
      f.header = FileChecksum{hb.get<uint64_t>(), static_cast<uint32_t>(hc.get<uint64_t>())};
    }
    m.files[it.key()] = f;
  }

  if (auto chunk = doc.find("box_crc32_chunk_bytes"); chunk != doc.end()) {
    if (!chunk->is_number_unsigned() || chunk->get<uint64_t>() == 0 || chunk->get<uint64_t>() % 4 != 0)
      bad(source, "box_crc32_chunk_bytes", "is not a positive multiple of 4 bytes");
    m.box_crc32_chunk_bytes = chunk->get<uint64_t>();
  }
  const json& tensors = need(doc, "tensors", source, "");
  if (!tensors.is_object()) bad(source, "tensors", "is not an object");
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const std::string where = "tensors." + it.key();
    if (!it.value().is_object()) bad(source, where, "is not an object");
    StoredTensor t;
    t.dtype = need_string(it.value(), "dtype", source, where);
    if (t.dtype != "F32") bad(source, where + ".dtype", fmt::format("is \"{}\"; only F32 is written", t.dtype));
    t.global_shape = need_shape(it.value(), "global_shape", source, where);
    // Its element count must fit int64 (boxes inside it then do too).
    int64_t numel = 1;
    for (int64_t d : t.global_shape)
      if (__builtin_mul_overflow(numel, d, &numel)) bad(source, where + ".global_shape", "has more than 2^63 - 1 elements");
    const json& boxes = need(it.value(), "boxes", source, where);
    if (!boxes.is_array()) bad(source, where + ".boxes", "is not a list");
    for (size_t i = 0; i < boxes.size(); ++i) {
      const std::string bw = fmt::format("{}.boxes[{}]", where, i);
      if (!boxes[i].is_object()) bad(source, bw, "is not an object");
      StoredBox b;
      b.box.offset = need_shape(boxes[i], "offset", source, bw);
      b.box.shape = need_shape(boxes[i], "shape", source, bw);
      if (b.box.offset.size() != t.global_shape.size() || b.box.shape.size() != t.global_shape.size())
        bad(source, bw, fmt::format("needs an offset and a shape with one entry per dimension of global_shape ({})",
                                    t.global_shape.size()));
      b.file = need_string(boxes[i], "file", source, bw);
      b.key = need_string(boxes[i], "key", source, bw);
      if (auto crc = boxes[i].find("crc32"); crc != boxes[i].end()) {
        // The box must fit its tensor (so that numel() cannot overflow) before its chunks are counted.
        const uint64_t chunk = m.box_crc32_chunk_bytes;
        if (chunk == 0) bad(source, bw + ".crc32", "is given without box_crc32_chunk_bytes");
        if (!box_fits(b.box, t.global_shape))
          bad(source, bw, fmt::format("box {} does not fit the global shape {}", box_string(b.box),
                                      shape_string(t.global_shape)));
        const uint64_t chunks = (static_cast<uint64_t>(b.box.numel()) * 4 + chunk - 1) / chunk;
        if (!crc->is_array() || crc->size() != chunks)
          bad(source, bw + ".crc32", fmt::format("is not a list of {} checksums (one per {} bytes of the box)", chunks, chunk));
        std::vector<uint32_t> sums;
        for (const json& c : *crc) {
          if (!c.is_number_unsigned() || c.get<uint64_t>() > 0xffffffffull)
            bad(source, bw + ".crc32", "holds a value that is not a 32-bit checksum");
          sums.push_back(static_cast<uint32_t>(c.get<uint64_t>()));
        }
        b.crc32 = std::move(sums);
      }
      t.boxes.push_back(std::move(b));
    }
    m.tensors[it.key()] = std::move(t);
  }
  check_tensor_coverage(m, source, /*input=*/true);
  return m;
}

void check_tensor_coverage(const CheckpointMetadata& m, const std::string& source, bool input) {
  auto fail = [&](const std::string& key, const std::string& what) {
    const std::string msg = fmt::format("checkpoint '{}': tensor '{}': {}", source, key, what);
    if (input) throw InputError(msg + " (the metadata is damaged; load another checkpoint)");
    throw Error(msg);
  };
  for (const auto& [key, t] : m.tensors) {
    int64_t covered = 0;
    for (size_t i = 0; i < t.boxes.size(); ++i) {
      const StoredBox& b = t.boxes[i];
      if (!box_fits(b.box, t.global_shape))
        fail(key, fmt::format("box {} does not fit the global shape {}", box_string(b.box), shape_string(t.global_shape)));
      if (m.files.count(b.file) == 0)
        fail(key, fmt::format("box {} is in file '{}', which is not listed under \"files\"", box_string(b.box), b.file));
      for (size_t j = 0; j < i; ++j)
        if (intersect(b.box, t.boxes[j].box).numel() > 0)
          fail(key, fmt::format("boxes {} (file '{}') and {} (file '{}') overlap", box_string(t.boxes[j].box),
                                t.boxes[j].file, box_string(b.box), b.file));
      covered += b.box.numel();
    }
    if (covered != shape_numel(t.global_shape))
      fail(key, fmt::format("its boxes hold {} of its {} elements (global shape {})", covered,
                            shape_numel(t.global_shape), shape_string(t.global_shape)));
  }
}

}  // namespace lattice
