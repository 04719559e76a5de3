// Accelerator presets and spec files for `lattice plan` (see gpu_spec.h).
#include "trainer/gpu_spec.h"

#include <algorithm>
#include <cctype>
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

// The numeric fields of a spec file.
struct NumberField {
  const char* key;
  double GpuSpec::*member;
};
constexpr NumberField kNumberFields[] = {
    {"peak_bf16_flops", &GpuSpec::peak_bf16_flops},
    {"peak_tf32_flops", &GpuSpec::peak_tf32_flops},
    {"peak_fp32_flops", &GpuSpec::peak_fp32_flops},
    {"memory_bytes", &GpuSpec::memory_bytes},
    {"usable_memory_fraction", &GpuSpec::usable_memory_fraction},
    {"memory_bandwidth", &GpuSpec::memory_bandwidth},
    {"intra_node_bandwidth", &GpuSpec::intra_node_bandwidth},
    {"intra_node_latency", &GpuSpec::intra_node_latency},
    {"inter_node_bandwidth", &GpuSpec::inter_node_bandwidth},
    {"inter_node_latency", &GpuSpec::inter_node_latency},
};

double positive(const nlohmann::json& v, const std::string& key, const std::string& path) {
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
  GpuSpec s = h100();
  s.name = std::filesystem::path(path).stem().string();
  for (const auto& [key, value] : doc.items()) {
    const auto field = std::find_if(std::begin(kNumberFields), std::end(kNumberFields),
                                    [&](const NumberField& f) { return key == f.key; });
    if (field != std::end(kNumberFields)) {
      s.*(field->member) = positive(value, key, path);
    } else if (key == "name") {
      if (!value.is_string())
        throw InputError(fmt::format("--gpu {}: \"name\" must be a string (got {})", path, value.dump()));
      s.name = value.get<std::string>();
    } else if (key == "gpus_per_node") {
      s.gpus_per_node = static_cast<int>(positive(value, key, path));
    } else if (key == "overlap_communication") {
      if (!value.is_boolean())
        throw InputError(
            fmt::format("--gpu {}: \"overlap_communication\" must be true or false (got {})", path, value.dump()));
      s.overlap_communication = value.get<bool>();
    } else {
      std::string all = "name";
      for (const NumberField& f : kNumberFields) all += fmt::format(", {}", f.key);
      throw InputError(fmt::format("--gpu {}: unknown key \"{}\" (keys: {}, gpus_per_node, overlap_communication)",
                                   path, key, all));
    }
  }
  if (s.usable_memory_fraction > 1)
    throw InputError(fmt::format("--gpu {}: \"usable_memory_fraction\" must be at most 1", path));
  return s;
}

}  // namespace

const char* gpu_preset_names() { return "h100, h200, a100, cpu"; }

std::string gpu_preset_of_model(const std::string& model) {
  std::string lower = model;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower.find("pcie") != std::string::npos || lower.find("nvl") != std::string::npos) return "";
  for (const char* preset : {"h200", "h100", "a100"}) {
    if (lower.find(preset) != std::string::npos) return preset;
  }
  return "";
}

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
