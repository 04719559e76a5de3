// Host memory (physical / cgroup limit), ranks per node, and the needed-vs-available comparison.
#include "trainer/memory_check.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "trainer/launcher_env.h"
#include "trainer/model_builder.h"  // config_device
#include "trainer/model_stats.h"  // format_bytes

namespace lattice {

namespace {

// A cgroup limit file's value in bytes; nullopt when absent or unlimited ("max").
std::optional<int64_t> cgroup_limit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v <= 0) return std::nullopt;
  return static_cast<int64_t>(v);
}

}  // namespace

MachineMemory host_memory() {
  MachineMemory m{static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE), "physical memory"};
  // Containers: the cgroup's limit is what the kernel lets this job use (v1 "unlimited" is a huge number).
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const std::optional<int64_t> limit = cgroup_limit(path);
    if (limit && *limit < m.bytes) m = {*limit, fmt::format("the cgroup limit {}", path)};
  }
  return m;
}

int ranks_per_node() { return launcher_placement().local_size; }

MachineMemory device_memory(const Backend& backend) {
  return {static_cast<int64_t>(backend.device_memory_bytes()), backend.device_model(), true};
}

namespace {
bool bf16_attention_sized_by(const Backend& backend, const Config& c) {
  return c.training.precision == Precision::kBf16 && backend.device == config_device(c) &&
         backend.attention_bf16_workspace_bytes != nullptr;
}
}  // namespace

std::optional<int64_t> device_attention_workspace(const Backend& backend, const Config& c,
                                                  const ParallelLayout& layout) {
  if (!bf16_attention_sized_by(backend, c)) return std::nullopt;
  return backend.attention_bf16_workspace_bytes(rank_attention_shape(c, layout));
}

void reserve_attention_workspace(const Backend& backend, const Config& c, const ParallelLayout& layout) {
  if (bf16_attention_sized_by(backend, c) && backend.reserve_attention_bf16_workspace != nullptr) {
    backend.reserve_attention_bf16_workspace(rank_attention_shape(c, layout));
  }
}

std::optional<std::string> memory_shortfall(const RankMemoryPlan& rank, int ranks, const MachineMemory& available) {
  const int64_t needed = rank.total_bytes * ranks;
  if (needed <= available.bytes) return std::nullopt;
  const int64_t buffers = rank.scratch_bytes + rank.comm_bytes + rank.workspace_bytes + rank.checkpoint_bytes +
                          rank.mpi_temporary_bytes;
  return fmt::format(
      "memory: a rank needs about {} (its largest, pipeline stage {}: {} weights + {} gradients + {} main params + {} "
      "AdamW moments + {} activations + {} buffers){}, but this {} has {} ({}). To fit: a smaller model "
      "(model.num_layers, model.hidden_size, model.vocab_size), a smaller training.micro_batch_size or "
      "model.seq_length (activations), model.recompute, or more {} with parallel.tensor / parallel.pipeline / "
      "parallel.distributed_optimizer",
      format_bytes(rank.total_bytes), rank.pp_rank, format_bytes(rank.weight_bytes), format_bytes(rank.grad_bytes),
      format_bytes(rank.main_param_bytes), format_bytes(rank.optimizer_bytes), format_bytes(rank.activation_bytes),
      format_bytes(buffers),
      ranks > 1 ? fmt::format(" × {} ranks {} = {}", ranks, available.gpu ? "sharing this GPU" : "on this node",
                              format_bytes(needed))
                : std::string(),
      available.gpu ? "GPU" : "machine", format_bytes(available.bytes), available.source,
      available.gpu ? "GPUs" : "nodes");
}

}  // namespace lattice
