// Where this process sits in its job, as the launcher told it: mpirun (OpenMPI's OMPI_COMM_WORLD_*)
// or srun (SLURM_*), read from the environment before MPI is initialized.
#pragma once

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

// One line for the start of a parallel run: "srun (Slurm job 12 step 0): local rank 0 of 2 on this
// node (SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE)".
std::string describe_launcher(const LauncherPlacement& placement);

}  // namespace lattice
