#!/usr/bin/env bash
# The launch paths against a real Slurm: a private one-node cluster (Debian's munged, slurmctld and
# slurmd, started by tools/slurm/local_cluster.sh in a folder of this test's own and stopped at the
# end), then
#  1. `srun --mpi=pmix -n 2 lattice train` for DP2 and PP2 trains exactly what `mpirun -np 2` trains
#     (every step's loss, grad norm and lr, and the exported weights, bitwise), the world size and
#     local rank read from Slurm's variables;
#     `srun --mpi=none -n 2`, whose tasks cannot find each other, is refused by each (exit 2);
#  2. `sbatch tools/slurm/lattice.sbatch` (2 tasks, DP2) with a time limit shorter than the run: the
#     job gets Slurm's --signal, saves, requeues itself, resumes from `latest` and completes; the run
#     assembled from its allocations equals an uninterrupted one bitwise, weights included;
#  3. `tools/sweep.sh --slurm`: a 3-point sweep submitted as a job array completes, one point made to
#     fail; `lattice report` shows each point's status, and a second submission runs only that point.
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1  # several ranks per core
prepare_tiny_dataset
LATTICE=$PWD/$LATTICE  # job steps start in the submit directory; an absolute path is plainer
export LATTICE

# The cluster's folder is short (Unix socket paths are limited to 107 bytes; the test's TMPDIR is
# deeper) and removed with the cluster at the end.
cluster=$(mktemp -d /tmp/lattice-slurm.XXXXXX)
stop_cluster() {
  local rc=$?
  [[ $rc -ne 0 ]] && tail -n 30 "$cluster/slurmctld.log" "$cluster/slurmd.log" 2>/dev/null
  tools/slurm/local_cluster.sh stop "$cluster" || true
  rm -rf "$cluster"
  exit $rc
}
trap stop_cluster EXIT
trap 'exit 143' TERM INT  # Bazel's timeout: still stop the cluster
cluster_env=$(tools/slurm/local_cluster.sh start "$cluster") || fail "the Slurm cluster did not start"
eval "$cluster_env"
echo "cluster: $(sinfo -h -o '%P %a %D %T %N')"

tiny=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny")

# job_state ID: Slurm's state of a job (of every task of an array: one state per line).
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

# wait_for_job ID SECONDS: until every task of job ID is in a final state (or fail after SECONDS).
# A requeued job passes through REQUEUED, PENDING and CONFIGURING: anything not final is waited for.
wait_for_job() {
  local _ states
  for _ in $(seq "$2"); do
    states=$(job_state "$1")
    if [[ -n $states ]] && ! grep -qvE '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$' <<<"$states"; then
      return 0
    fi
    sleep 1
  done
  scontrol show job "$1"
  fail "job $1 did not end in $2 s"
}

# 1. srun vs mpirun.
for layout in parallel.data=2 parallel.pipeline=2; do
  d=$WORK/${layout#parallel.}
  timeout 120 srun --mpi=pmix -n 2 --kill-on-bad-exit=1 "$LATTICE" train "${tiny[@]}" --set "$layout" \
    --set logging.metrics_file="$d-srun.jsonl" --export "$d-srun" >"$d-srun.log" 2>&1 </dev/null ||
    { tail -20 "$d-srun.log"; fail "srun $layout"; }
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$LATTICE" train "${tiny[@]}" --set "$layout" \
    --set logging.metrics_file="$d-mpirun.jsonl" --export "$d-mpirun" >"$d-mpirun.log" 2>&1 </dev/null ||
    { tail -20 "$d-mpirun.log"; fail "mpirun $layout"; }
  grep -q "launcher: srun (Slurm job [0-9]* step 0): local rank 0 of 2 on this node (SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE)" \
    "$d-srun.log" || { head -5 "$d-srun.log"; fail "srun $layout: the local rank and size were not read from Slurm"; }
  grep -q ", 2 ranks (" "$d-srun.log" || fail "srun $layout: not a 2-rank job"
  grep -q '"world_size":2' "$d-srun.jsonl" || fail "srun $layout: the metrics file's world size is not 2"
  grep -q "launcher: mpirun: local rank 0 of 2" "$d-mpirun.log" || fail "mpirun $layout: placement not from mpirun"
  python3 tests/checkpoint/compare_resumed.py "$d-mpirun.jsonl" "$d-srun.jsonl" "$d-mpirun" "$d-srun"
  echo "ok: srun --mpi=pmix -n 2 with $layout = mpirun -np 2 (every step, exported weights bitwise)"
done

# srun without a process-management interface MPI can use starts tasks that cannot find each other:
# each would train alone on the same files, so each refuses (exit 2) and says how to launch.
d=$WORK/mpi_none
timeout 120 srun --mpi=none -n 2 "$LATTICE" train "${tiny[@]}" --set logging.metrics_file="$d.jsonl" >"$d.log" 2>&1 </dev/null
code=$?
[[ $code -eq 2 ]] || { tail -20 "$d.log"; fail "srun --mpi=none -n 2: exit $code, want 2"; }
[[ $(grep -c "the launcher started 2 tasks (SLURM_STEP_NUM_TASKS=2).*srun --mpi=pmix" "$d.log") -eq 2 ]] ||
  { cat "$d.log"; fail "srun --mpi=none -n 2: not refused by both tasks"; }
[[ ! -e $d.jsonl ]] || fail "srun --mpi=none -n 2: a task trained"
echo "ok: srun --mpi=none -n 2 is refused by each task (exit 2)"

# 2. sbatch with a time limit shorter than the run. Slurm's shortest limit is a minute; slurmctld
#    checks limits and --signal every 30 s and sends the signal once at most warn + 30 s are left, so
#    --signal=B:USR1@10 lands 20 to 50 s into each allocation. The run is sized from this machine's
#    step rate to take over a minute uninterrupted, so the first allocation is always cut short (a
#    second one may be too; each gains at least 20 s). A constant LR after warmup keeps every step
#    independent of train_iters.
req=(--set parallel.data=2 --set optimizer.decay=constant --set logging.log_interval=100000)
d=$WORK/requeue
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$LATTICE" train "${tiny[@]}" "${req[@]}" \
  --set training.train_iters=10000 --set logging.metrics_file="$d-rate.jsonl" >"$d-rate.log" 2>&1 </dev/null ||
  { tail "$d-rate.log"; fail "the rate run"; }
steps=$(python3 -c "import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]['summary']; \
print(max(20000, int(75 * s['steps'] / s['wall_s'])))" "$d-rate.jsonl") || fail "no summary in $d-rate.jsonl"
req+=(--set training.train_iters="$steps")
start=$SECONDS
timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 "$LATTICE" train "${tiny[@]}" "${req[@]}" \
  --set logging.metrics_file="$d-full.jsonl" --export "$d-full" >"$d-full.log" 2>&1 </dev/null ||
  { tail "$d-full.log"; fail "the uninterrupted run"; }
full_s=$((SECONDS - start))
echo "uninterrupted: $steps steps in $full_s s"
[[ $full_s -gt 50 ]] || fail "the uninterrupted run took $full_s s: not longer than the job's first allocation"
job=$(sbatch --parsable --time=1 --signal=B:USR1@10 --ntasks=2 --output="$d-job.log" \
  tools/slurm/lattice.sbatch configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" "${req[@]}" \
  --set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d-job.jsonl" --export "$d-job")
echo "sbatch: job $job, time limit 1 min, USR1 10 s before it"
wait_for_job "$job" 600
state=$(job_state "$job")
cat "$d-job.log" | grep -E "^lattice:|stopped by|resumed from|run summary" || true
[[ $state == COMPLETED ]] || fail "job $job ended $state"
grep -q "lattice: job $job restart 0 " "$d-job.log" || fail "no first allocation in the job log"
grep -q "lattice: stopped on the signal with a checkpoint (step [0-9]*); requeueing job $job" "$d-job.log" ||
  fail "the job did not stop on Slurm's signal and requeue itself"
grep -q "lattice: job $job restart 1 " "$d-job.log" || fail "the requeued job did not start again"
grep -q "resumed from $d/ckpt/iter_" "$d-job.log" || fail "the requeued job did not resume from the checkpoint"
restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
python3 tests/checkpoint/compare_resumed.py "$d-full.jsonl" "$d-job.jsonl" "$d-full" "$d-job"
echo "ok: sbatch with a 1-minute limit: signal, save, requeue ($restarts restart(s)), resume, complete = uninterrupted"

# 2b. What is not requeued: a run without checkpoint.dir that stops early (here on exit_interval),
#     which a requeue would start from step 1 again; and a running job ended by scancel (SIGTERM), whose
#     ranks save before it ends.
d=$WORK/unsaved
job=$(sbatch --parsable --ntasks=1 --output="$d-job.log" tools/slurm/lattice.sbatch configs/test-tiny-gpt2.json \
  --set data.path="$WORK/tiny" --set training.train_iters=20 --set training.exit_interval=5)
wait_for_job "$job" 120
[[ $(job_state "$job") == COMPLETED ]] || fail "the unsaved job ended $(job_state "$job")"
grep -q "lattice: stopped after step 5 without a checkpoint (checkpoint.dir is not set): not requeueing" \
  "$d-job.log" || { cat "$d-job.log"; fail "no 'not requeueing' line for a run without checkpoint.dir"; }
grep -q "restart 1 " "$d-job.log" && fail "a run without checkpoint.dir was requeued"
d=$WORK/cancel
job=$(sbatch --parsable --ntasks=1 --output="$d-job.log" tools/slurm/lattice.sbatch configs/test-tiny-gpt2.json \
  --set data.path="$WORK/tiny" --set training.train_iters=100000000 --set checkpoint.dir="$d/ckpt")
for _ in $(seq 300); do grep -q "step  *[0-9]*/" "$d-job.log" 2>/dev/null && break; sleep 0.2; done
scancel "$job"
wait_for_job "$job" 120
grep -q "lattice: SIGTERM (scancel, or a preemption): checkpoint of step [0-9]* saved; not requeueing" "$d-job.log" ||
  { cat "$d-job.log"; fail "scancel: no saved-and-not-requeued line"; }
[[ -f $d/ckpt/latest ]] || fail "scancel: the ranks did not save"
sleep 2
[[ $(job_state "$job") == CANCELLED ]] || fail "the cancelled job is $(job_state "$job"), not CANCELLED"
echo "ok: sbatch: no requeue without a checkpoint, nor after scancel (which saves)"

# 3. A sweep as a job array: two points that train, one refused (a negative lr).
s=$WORK/sweep
out=$(timeout 60 tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$s" \
  --grid optimizer.lr=1e-3,2e-3,-1 --slurm --ntasks=1 -- --set data.path="$WORK/tiny" 2>&1) ||
  { echo "$out"; fail "sweep --slurm"; }
array=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' <<<"$out")
[[ -n $array ]] || { echo "$out"; fail "sweep --slurm did not submit a job"; }
wait_for_job "$array" 300
report=$("$LATTICE" report --csv "$s/optimizer.lr=1e-3" "$s/optimizer.lr=2e-3") || fail "lattice report"
echo "$report"
grep -q "optimizer.lr=1e-3,.*,finished,20," <<<"$report" || fail "point lr=1e-3 did not finish"
grep -q "optimizer.lr=2e-3,.*,finished,20," <<<"$report" || fail "point lr=2e-3 did not finish"
[[ $(job_state "${array}_2") == FAILED ]] || fail "array task 2 (lr=-1) ended $(job_state "${array}_2"), not FAILED"
grep -q "optimizer.lr must be >= 0, got -1" "$s/.sweep/logs/slurm-${array}_2.log" ||
  fail "array task 2's log does not say why it failed"
out=$(timeout 60 tools/sweep.sh --config configs/test-tiny-gpt2.json --out "$s" \
  --grid optimizer.lr=1e-3,2e-3,-1 --slurm --ntasks=1 -- --set data.path="$WORK/tiny" 2>&1) || true
grep -q -- "--array=2 " <<<"$out" || { echo "$out"; fail "the second submission should hold the failed point alone"; }
again=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' <<<"$out")
wait_for_job "$again" 120
echo "ok: sweep --slurm: a job array of 3 points; 2 finished, 1 failed; resubmitted: the failed one alone"
echo PASS
