// Accelerator presets and spec files for `lattice plan` (see gpu_spec.h).
#include "trainer/gpu_spec.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace lattice {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Datasheet peaks (dense, no sparsity); link figures are the bus bandwidths NCCL's all-reduce
// reaches on such nodes (NVSwitch inside, one InfiniBand NIC per GPU across).
GpuSpec h100() {
  GpuSpec s;
  s.name = "h100";
  s.peak_bf16_flops = 989e12;
  s.peak_tf32_flops = 494e12;
  s.peak_fp32_flops = 67e12;
  s.memory_bytes = 80 * kGiB;
  s.memory_bandwidth = 3.35e12;
  s.intra_node_bandwidth = 360e9;  // NVLink 4 (450 GB/s per direction)
  s.intra_node_latency = 5e-6;
  s.inter_node_bandwidth = 45e9;   // NDR 400 Gb/s per GPU
  s.inter_node_latency = 10e-6;
  return s;
}

GpuSpec h200() {
  GpuSpec s = h100();
  s.name = "h200";
  s.memory_bytes = 140 * kGiB;  // 141 GB HBM3e
  s.memory_bandwidth = 4.8e12;
  return s;
}

GpuSpec a100() {
  GpuSpec s;
  s.name = "a100";
  s.peak_bf16_flops = 312e12;
  s.peak_tf32_flops = 156e12;
  s.peak_fp32_flops = 19.5e12;
  s.memory_bytes = 80 * kGiB;
  s.memory_bandwidth = 2.04e12;
  s.intra_node_bandwidth = 230e9;  // NVLink 3 (300 GB/s per direction)
  s.intra_node_latency = 5e-6;
  s.inter_node_bandwidth = 23e9;   // HDR 200 Gb/s per GPU (DGX A100, Selene)
  s.inter_node_latency = 10e-6;
  return s;
}

// One CPU process per core ("GPU") over MPI shared memory: this project's build machine as
// `lattice bench` and `lattice bench --comm` measured it (2026-12-02; one AVX-512 core's OpenBLAS
// sgemm, AdamW's memory bandwidth, MPI's rate for multi-MiB messages). Another host's figures come
// from the same two commands, as a FILE (README, "Planning a layout").
GpuSpec cpu() {
  GpuSpec s;
  s.name = "cpu";
  s.peak_bf16_flops = 100e9;
  s.peak_tf32_flops = 100e9;
  s.peak_fp32_flops = 100e9;
  s.memory_bytes = 16 * kGiB;
  s.memory_bandwidth = 45e9;
  s.intra_node_bandwidth = 0.72e9;
  s.intra_node_latency = 5e-6;
  s.inter_node_bandwidth = 1e9;
  s.inter_node_latency = 20e-6;
  s.gpus_per_node = 64;
  s.overlap_communication = false;
  return s;
}

double positive(const nlohmann::json& doc, const char* key, double fallback, const std::string& path) {
  if (!doc.contains(key)) return fallback;
  const nlohmann::json& v = doc.at(key);
  if (!v.is_number() || v.get<double>() <= 0)
    throw InputError(fmt::format("--gpu {}: \"{}\" must be a positive number (got {})", path, key, v.dump()));
  return v.get<double>();
}

GpuSpec load_spec_file(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("--gpu {}: not a JSON object of GPU figures ({})", path, e.what()));
  }
  if (!doc.is_object()) throw InputError(fmt::format("--gpu {}: not a JSON object of GPU figures", path));
  static const char* const kKeys[] = {"name", "peak_bf16_flops", "peak_tf32_flops", "peak_fp32_flops",
                                      "memory_bytes", "usable_memory_fraction", "memory_bandwidth",
                                      "intra_node_bandwidth", "intra_node_latency", "inter_node_bandwidth",
                                      "inter_node_latency", "gpus_per_node", "overlap_communication"};
  for (const auto& [key, value] : doc.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      std::string all;
      for (const char* k : kKeys) all += fmt::format("{}{}", all.empty() ? "" : ", ", k);
      throw InputError(fmt::format("--gpu {}: unknown key \"{}\" (keys: {})", path, key, all));
    }
  }
  GpuSpec s = h100();
  s.name = doc.value("name", std::filesystem::path(path).stem().string());
  s.peak_bf16_flops = positive(doc, "peak_bf16_flops", s.peak_bf16_flops, path);
  s.peak_tf32_flops = positive(doc, "peak_tf32_flops", s.peak_tf32_flops, path);
  s.peak_fp32_flops = positive(doc, "peak_fp32_flops", s.peak_fp32_flops, path);
  s.memory_bytes = positive(doc, "memory_bytes", s.memory_bytes, path);
  s.usable_memory_fraction = positive(doc, "usable_memory_fraction", s.usable_memory_fraction, path);
  s.memory_bandwidth = positive(doc, "memory_bandwidth", s.memory_bandwidth, path);
  s.intra_node_bandwidth = positive(doc, "intra_node_bandwidth", s.intra_node_bandwidth, path);
  s.intra_node_latency = positive(doc, "intra_node_latency", s.intra_node_latency, path);
  s.inter_node_bandwidth = positive(doc, "inter_node_bandwidth", s.inter_node_bandwidth, path);
  s.inter_node_latency = positive(doc, "inter_node_latency", s.inter_node_latency, path);
  s.gpus_per_node = static_cast<int>(positive(doc, "gpus_per_node", s.gpus_per_node, path));
  if (doc.contains("overlap_communication")) {
    if (!doc.at("overlap_communication").is_boolean())
      throw InputError(fmt::format("--gpu {}: \"overlap_communication\" must be true or false (got {})", path,
                                   doc.at("overlap_communication").dump()));
    s.overlap_communication = doc.at("overlap_communication").get<bool>();
  }
  if (s.usable_memory_fraction > 1)
    throw InputError(fmt::format("--gpu {}: \"usable_memory_fraction\" must be at most 1", path));
  return s;
}

}  // namespace

const char* gpu_preset_names() { return "h100, h200, a100, cpu"; }

GpuSpec gpu_spec(const std::string& name_or_file) {
  if (name_or_file == "h100") return h100();
  if (name_or_file == "h200") return h200();
  if (name_or_file == "a100") return a100();
  if (name_or_file == "cpu") return cpu();
  if (std::filesystem::is_regular_file(name_or_file)) return load_spec_file(name_or_file);
  throw InputError(fmt::format("--gpu {}: neither a preset ({}) nor a JSON file of GPU figures", name_or_file,
                               gpu_preset_names()));
}

}  // namespace lattice
