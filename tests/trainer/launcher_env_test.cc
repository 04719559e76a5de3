// The launcher's placement of a process: mpirun's variables first, then srun's (its per-step,
// per-node task list, whose compressed form is "2(x3),1"), else a process of its own.
#include "trainer/launcher_env.h"

#include <cstdlib>

#include <catch2/catch.hpp>

using namespace lattice;

namespace {

void clear_launcher_env() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_LOCALID", "SLURM_NODEID",
                           "SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID"})
    ::unsetenv(name);
}

}  // namespace

TEST_CASE("Slurm's compressed tasks-per-node list") {
  CHECK(slurm_tasks_on_node("2", 0) == 2);
  CHECK(slurm_tasks_on_node("2", 1) == 0);  // one node only
  CHECK(slurm_tasks_on_node("2(x3),1", 0) == 2);
  CHECK(slurm_tasks_on_node("2(x3),1", 2) == 2);
  CHECK(slurm_tasks_on_node("2(x3),1", 3) == 1);
  CHECK(slurm_tasks_on_node("4,3(x2)", 2) == 3);
  for (const char* bad : {"", "x", "2(3)", "2(x0)", "2(x3", "2(x3)y", "0", "-1"}) {
    INFO(bad);
    CHECK(slurm_tasks_on_node(bad, 0) == 0);
  }
}

TEST_CASE("placement from mpirun, srun or neither") {
  clear_launcher_env();
  LauncherPlacement p = launcher_placement();
  CHECK(p.launcher.empty());
  CHECK(p.local_rank == 0);
  CHECK(p.local_size == 1);

  // srun without --ntasks-per-node: the step's list, this node's entry.
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_NODEID", "3", 1);
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "4(x3),2", 1);
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_STEP_ID", "0", 1);
  p = launcher_placement();
  CHECK(p.launcher == "srun");
  CHECK(p.local_rank == 1);
  CHECK(p.local_size == 2);
  CHECK(describe_launcher(p) ==
        "srun (Slurm job 77 step 0): local rank 1 of 2 on this node (SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE)");

  // No step list (an older Slurm): --ntasks-per-node's variable.
  ::unsetenv("SLURM_STEP_TASKS_PER_NODE");
  ::setenv("SLURM_NTASKS_PER_NODE", "8", 1);
  CHECK(launcher_placement().local_size == 8);

  // mpirun wins over srun's variables (mpirun inside an allocation inherits them).
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "6", 1);
  p = launcher_placement();
  CHECK(p.launcher == "mpirun");
  CHECK(p.local_rank == 5);
  CHECK(p.local_size == 6);
  clear_launcher_env();
}

TEST_CASE("a launcher that started more tasks than MPI joined is refused, naming its variable") {
  clear_launcher_env();
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) ::unsetenv(name);
  CHECK(launcher_tasks().tasks == 0);
  CHECK_FALSE(launcher_world_mismatch(launcher_tasks(), 0));  // a plain start

  // srun --mpi=none -n 2: srun's step task count, no process-management interface.
  ::setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  REQUIRE(launcher_tasks().variable == "SLURM_STEP_NUM_TASKS");
  const auto alone = launcher_world_mismatch(launcher_tasks(), 0);
  REQUIRE(alone);
  CHECK_THAT(*alone, Catch::Contains("SLURM_STEP_NUM_TASKS=2") && Catch::Contains("srun --mpi=pmix"));
  CHECK_FALSE(launcher_world_mismatch(launcher_tasks(), 2));  // srun --mpi=pmix -n 2

  // A PMI launcher of 4 tasks whose MPI came up as a singleton.
  ::setenv("PMI_SIZE", "4", 1);
  const auto singleton = launcher_world_mismatch(launcher_tasks(), 1);
  REQUIRE(singleton);
  CHECK_THAT(*singleton, Catch::Contains("4 tasks (PMI_SIZE=4)") && Catch::Contains("MPI joined 1 of them"));
  CHECK_FALSE(launcher_world_mismatch(launcher_tasks(), 4));

  // A batch script's one process (no step task count) or an srun step of one task is no mismatch.
  ::unsetenv("PMI_SIZE");
  ::setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  CHECK_FALSE(launcher_world_mismatch(launcher_tasks(), 0));
  ::unsetenv("SLURM_STEP_NUM_TASKS");
}
