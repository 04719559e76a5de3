// Where this process sits in its job, as the launcher told it: mpirun (OpenMPI's OMPI_COMM_WORLD_*)
// or srun (SLURM_*), read from the environment before MPI is initialized.
#pragma once

#include <optional>
#include <string>

namespace lattice {

struct LauncherPlacement {
  std::string launcher;  // "mpirun", "srun" or "" (started by hand)
  int local_rank = 0;    // this process's index among the job's processes on this node
  int local_size = 1;    // the job's processes on this node
  std::string source;    // the variables the two numbers came from, for the log
};

// mpirun: OMPI_COMM_WORLD_LOCAL_RANK / _LOCAL_SIZE. srun: SLURM_LOCALID and this node's entry of
// SLURM_STEP_TASKS_PER_NODE (srun sets it for every step; SLURM_NTASKS_PER_NODE exists only when
// --ntasks-per-node was given), else SLURM_NTASKS_PER_NODE. Neither: 0 of 1.
LauncherPlacement launcher_placement();

// The task count of node `node_index` in Slurm's compressed per-node list ("2(x3),1": nodes 0-2 run
// 2 tasks, node 3 runs 1); 0 when the list is malformed or shorter.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_index);

// The tasks the launcher started for this job step, and the variable that says so: OpenMPI's
// OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, or srun's SLURM_STEP_NUM_TASKS (set in an srun step's tasks,
// not in a batch script, whose SLURM_NTASKS is the allocation's). 0 tasks when none is set.
struct LauncherTasks {
  int tasks = 0;
  std::string variable;
};
LauncherTasks launcher_tasks();

// This task's rank among them (OMPI_COMM_WORLD_RANK, PMI_RANK, or SLURM_PROCID in an srun step);
// 0 when none is set. For commands that do not join MPI but may be started by a launcher.
int launcher_rank();

// Why this process cannot run the job the launcher started, or nullopt: the launcher started more
// tasks than the `mpi_world` ranks MPI joined (`mpi_world` 0: MPI not initialized, as a plain start
// is), so each task would train alone as a one-rank job, on the same files.
std::optional<std::string> launcher_world_mismatch(const LauncherTasks& launched, int mpi_world);

// One line for the start of a parallel run: "srun (Slurm job 12 step 0): local rank 0 of 2 on this
// node (SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE)".
std::string describe_launcher(const LauncherPlacement& placement);

}  // namespace lattice
