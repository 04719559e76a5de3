// GpuSpec: what `lattice plan` needs to know about an accelerator and its links — peak FLOP/s per
// dtype, memory and its bandwidth, and α (latency) / β (bandwidth) inside a node and across nodes.
#pragma once

#include <string>

namespace lattice {

struct GpuSpec {
  std::string name;
  double peak_bf16_flops = 0;   // dense bf16 tensor-core FLOP/s
  double peak_tf32_flops = 0;   // f32 GEMMs with training.tf32 (0: same as fp32)
  double peak_fp32_flops = 0;   // plain f32 FLOP/s
  double memory_bytes = 0;      // device memory
  // Share of memory_bytes a run may use: the CUDA context, NCCL buffers and allocator fragmentation
  // take the rest.
  double usable_memory_fraction = 0.92;
  double memory_bandwidth = 0;  // bytes/s (the optimizer step is bound by it)
  // Per GPU, one direction, the bandwidth a ring collective achieves (NCCL's bus bandwidth).
  double intra_node_bandwidth = 0;   // NVLink/NVSwitch (bytes/s)
  double intra_node_latency = 0;     // seconds per ring step
  double inter_node_bandwidth = 0;   // the GPU's share of the node's network (bytes/s)
  double inter_node_latency = 0;     // seconds per ring step
  int gpus_per_node = 8;
  // Whether communication runs beside compute (a GPU's NCCL kernels and copy engines) so that the
  // schedules can hide it. On CPUs over MPI shared memory the copies and reductions run on the same
  // cores as the compute, so a "hidden" reduction still costs its time: the plan adds all of it.
  bool overlap_communication = true;
};

// "h100", "h200", "a100", "cpu", or the path of a JSON file with the fields above (any left out take
// the h100's values; "gpus_per_node" included). Unknown names and bad files are InputErrors naming --gpu.
GpuSpec gpu_spec(const std::string& name_or_file);

// The names gpu_spec knows without a file.
const char* gpu_preset_names();

// The preset of a GPU model as its driver names it ("NVIDIA H200" -> "h200", "NVIDIA H100 80GB HBM3"
// -> "h100"), or "" when none is: the presets are the SXM parts, and the PCIe and NVL ones have
// other peaks. `lattice bench` takes its datasheet peak from it.
std::string gpu_preset_of_model(const std::string& model);

}  // namespace lattice
