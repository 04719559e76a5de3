// The launcher's placement of this process, from mpirun's or srun's environment.
#include "trainer/launcher_env.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

namespace lattice {

namespace {

// A non-negative integer variable, or nullopt when unset or not a number.
std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n >= (1 << 24)) return std::nullopt;
  return static_cast<int>(n);
}

std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int slurm_tasks_on_node(const std::string& list, int node_index) {
  int node = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string entry = list.substr(pos, end - pos);
    char* rest = nullptr;
    const long tasks = std::strtol(entry.c_str(), &rest, 10);
    if (rest == entry.c_str() || tasks < 1) return 0;
    long repeat = 1;
    if (*rest == '(') {  // "(xN)"
      if (rest[1] != 'x') return 0;
      char* close = nullptr;
      repeat = std::strtol(rest + 2, &close, 10);
      if (repeat < 1 || *close != ')' || close[1] != '\0') return 0;
    } else if (*rest != '\0') {
      return 0;
    }
    if (node_index < node + repeat) return static_cast<int>(tasks);
    node += static_cast<int>(repeat);
    pos = end + 1;
  }
  return 0;
}

LauncherPlacement launcher_placement() {
  if (const auto rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK")) {
    const auto size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    return {"mpirun", *rank, size.value_or(1) > 0 ? size.value_or(1) : 1,
            "OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE"};
  }
  if (const auto rank = env_int("SLURM_LOCALID")) {
    const int on_node = slurm_tasks_on_node(env_string("SLURM_STEP_TASKS_PER_NODE"), env_int("SLURM_NODEID").value_or(0));
    if (on_node > 0) return {"srun", *rank, on_node, "SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE"};
    const auto per_node = env_int("SLURM_NTASKS_PER_NODE");
    if (per_node.value_or(0) > 0) return {"srun", *rank, *per_node, "SLURM_LOCALID, SLURM_NTASKS_PER_NODE"};
    return {"srun", *rank, *rank + 1, "SLURM_LOCALID (no per-node task count: at least local rank + 1)"};
  }
  return {};
}

LauncherTasks launcher_tasks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (const auto n = env_int(name)) return {*n, name};
  }
  return {};
}

int launcher_rank() {
  if (const auto r = env_int("OMPI_COMM_WORLD_RANK")) return *r;
  if (const auto r = env_int("PMI_RANK")) return *r;
  // SLURM_PROCID is set (0) in a batch script too: only an srun step's task is one of several.
  if (env_int("SLURM_STEP_NUM_TASKS")) return env_int("SLURM_PROCID").value_or(0);
  return 0;
}

std::optional<std::string> launcher_world_mismatch(const LauncherTasks& launched, int mpi_world) {
  if (launched.tasks <= std::max(mpi_world, 1)) return std::nullopt;
  const std::string started = fmt::format("the launcher started {} tasks ({}={})", launched.tasks, launched.variable,
                                          launched.tasks);
  if (mpi_world == 0) {
    return fmt::format(
        "{}, but gave this one no MPI process-management interface (no PMIX_RANK, PMI_SIZE or "
        "OMPI_COMM_WORLD_SIZE) to find the others: each task would train alone, on the same files. Launch with "
        "`srun --mpi=pmix` (`srun --mpi=list` shows what this cluster has) or with mpirun",
        started);
  }
  return fmt::format(
      "{}, but MPI joined {} of them into this job: the MPI lattice was built with does not speak this "
      "launcher's process-management interface (an `srun --mpi` plugin it lacks, or another MPI's mpirun), so "
      "each task would train alone, on the same files. Launch with the mpirun of the OpenMPI lattice links "
      "(`ldd lattice | grep libmpi`) or with `srun --mpi=pmix`",
      started, mpi_world);
}

std::string describe_launcher(const LauncherPlacement& p) {
  std::string who = p.launcher.empty() ? "started without mpirun or srun" : p.launcher;
  if (p.launcher == "srun") {
    const std::string job = env_string("SLURM_JOB_ID");
    const std::string step = env_string("SLURM_STEP_ID");
    if (!job.empty()) who += fmt::format(" (Slurm job {}{})", job, step.empty() ? "" : " step " + step);
  }
  if (p.source.empty()) return fmt::format("{}: local rank {} of {} on this node", who, p.local_rank, p.local_size);
  return fmt::format("{}: local rank {} of {} on this node ({})", who, p.local_rank, p.local_size, p.source);
}

}  // namespace lattice
