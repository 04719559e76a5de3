// The sharded checkpoint format: DIR/iter_{step:07d}/ holds per-rank safetensors shard files and a
// metadata.json (config, layout, training state, every tensor's boxes → file + key, file checksums).
//
//   DIR/latest                          "iter_0000100": the newest committed checkpoint
//   DIR/iter_0000100/metadata.json      CheckpointMetadata below, written last by rank 0
//   DIR/iter_0000100/rank_00003.safetensors
//       keys "model/<param>", "exp_avg/<param>", "exp_avg_sq/<param>": at most one box of each
//       tensor per file, so the key is the tensor's name; the box itself is in metadata.json.
//   DIR/iter_0000200.partial/           a save in progress (or killed): never loaded
//   DIR/iter_0000050.deleting/          retired by keep_last, being deleted in the background
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/box.h"
#include "checkpoint/crc32.h"

namespace lattice {

inline constexpr const char* kCheckpointFormat = "lattice-sharded-checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr const char* kMetadataFile = "metadata.json";
inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kPartialSuffix = ".partial";
inline constexpr const char* kDeletingSuffix = ".deleting";  // retired by keep_last, being deleted

// Tensor kinds in a checkpoint: the parameters and AdamW's two moments.
inline constexpr const char* kModelKind = "model";
inline constexpr const char* kExpAvgKind = "exp_avg";
inline constexpr const char* kExpAvgSqKind = "exp_avg_sq";
// "model/layers.0.mlp.up_proj.weight"
std::string tensor_key(const std::string& kind, const std::string& param_name);

// "iter_0000100" (at least 7 digits, Megatron's spelling).
std::string iter_dir_name(int64_t step);
// The step of a committed iteration directory name ("iter_0000100" → 100); -1 for anything else
// (".partial" directories included).
int64_t parse_iter_dir_name(const std::string& name);
// "rank_00003.safetensors"
std::string shard_file_name(int world_rank);

// Everything besides tensors that an exact continuation needs.
struct CheckpointState {
  int64_t step = 0;                   // optimizer steps completed
  int64_t consumed_samples = 0;       // the data loader's position (global samples)
  int64_t optimizer_step_count = 0;   // AdamW's bias-correction t
  int64_t lr_schedule_step = 0;       // position of the LR schedule (= step today)
  uint64_t seed = 0;                  // RNG: init is counter-based on the seed; no other stream yet
  nlohmann::json extra = nlohmann::json::object();  // room for state that comes later (e.g. a loss scaler)
};

// The parallel layout that wrote a checkpoint (informational: loading reshards to any layout).
struct CheckpointLayout {
  int world_size = 1;
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int virtual_stages = 1;
  bool distributed_optimizer = false;
};

struct StoredBox {
  Box box;
  std::string file;  // file name inside the iteration directory
  std::string key;   // tensor name inside that file
  // The CRC-32 of each CheckpointMetadata::box_crc32_chunk_bytes of the tensor's bytes in the file
  // (the last chunk shorter; none for an empty box): a load verifies only the chunks it reads.
  // Absent in checkpoints written before them, whose loads verify whole files (StoredFile::crc32).
  std::optional<std::vector<uint32_t>> crc32;
};

struct StoredTensor {
  Shape global_shape;
  std::string dtype = "F32";
  std::vector<StoredBox> boxes;
};

struct StoredFile {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  int rank = 0;  // the world rank that wrote it
  // Its safetensors header (the first header_bytes bytes) and their CRC-32: with the boxes'
  // checksums, what a load verifies instead of the whole file. Absent in older checkpoints.
  std::optional<FileChecksum> header;
};

struct CheckpointMetadata {
  nlohmann::json config;             // the run config that wrote it (resolved, every key)
  CheckpointLayout layout;
  CheckpointState state;
  bool optimizer_state = false;      // exp_avg / exp_avg_sq tensors are present
  std::map<std::string, StoredTensor> tensors;  // by tensor_key
  std::map<std::string, StoredFile> files;      // by file name
  uint64_t box_crc32_chunk_bytes = 0;           // the boxes' checksum chunks; 0: no box checksums
};

// What a save checksums a box's bytes by: a rank that loads its distributed-optimizer shard
// verifies and reads about that share of each box (a parameter split over 32 dp ranks: 1/32 of it,
// rounded up to whole chunks), while the metadata of a 70B model's state stays near 200,000 CRCs.
inline constexpr uint64_t kBoxCrc32ChunkBytes = uint64_t{4} << 20;

nlohmann::json metadata_to_json(const CheckpointMetadata& metadata);
// metadata_to_json plus "metadata_crc32": the CRC-32 of the rest, compact (dump()), so that a change
// that leaves valid JSON (a flipped digit of a step count, a tensor key) is caught on load.
nlohmann::json metadata_to_json_with_crc(const CheckpointMetadata& metadata);
// Throws InputError naming `source` when `doc` has a metadata_crc32 that the rest does not match
// (a checkpoint written before it existed has none: nothing to check).
void check_metadata_crc(const nlohmann::json& doc, const std::string& source);
// `source` (the metadata.json path) names the file in every InputError about a missing or
// malformed field.
CheckpointMetadata metadata_from_json(const nlohmann::json& doc, const std::string& source);

// Checks that the boxes of every tensor lie inside it, do not overlap and cover it exactly, and
// that every box's file is listed; throws `Error` (or InputError when `input` is set, i.e. a
// checkpoint read from disk) naming the tensor and `source`.
void check_tensor_coverage(const CheckpointMetadata& metadata, const std::string& source, bool input);

}  // namespace lattice
