#!/usr/bin/env bash
# tools/slurm/lattice.sbatch without a Slurm cluster: stand-in `srun` and `scontrol` record what the
# script runs. Each task gets OMP_NUM_THREADS = SLURM_CPUS_PER_TASK and srun is told
# --cpus-per-task (it no longer inherits it from sbatch); a set OMP_NUM_THREADS wins; SIGUSR1 to the
# batch shell reaches srun as SIGUSR1, and after the tasks exit 0 having saved (lattice's
# LATTICE_STOP_REPORT says "resumable") the job requeues itself and exits 0; SIGTERM (scancel) saves
# but does not requeue, nor does a stop without a checkpoint ("unsaved").
# And `lattice train` started by `srun --mpi=pmix` (which gives each task PMIX_RANK, not
# OMPI_COMM_WORLD_SIZE) runs as a rank of the job, not as a one-process run of its own.
set -euo pipefail
WORK=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$WORK/bin"
# srun: records its arguments and OMP_NUM_THREADS; with STOP_ON_USR1 it runs until SIGUSR1, then
# writes what lattice would to LATTICE_STOP_REPORT (STOPPED, default "resumable 7") and exits 0.
cat >"$WORK/bin/srun" <<'SRUN'
#!/usr/bin/env bash
echo "args: $*" >"$WORK/srun.txt"
echo "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}" >>"$WORK/srun.txt"
[[ -n ${STOP_ON_USR1:-} ]] || exit 0
trap 'echo "got USR1" >>"$WORK/srun.txt"; echo "${STOPPED:-resumable 7}" >"$LATTICE_STOP_REPORT"; exit 0' USR1
touch "$WORK/srun.started"
while true; do sleep 0.1; done
SRUN
printf '#!/usr/bin/env bash\necho "$*" >"$WORK/scontrol.txt"\n' >"$WORK/bin/scontrol"
chmod +x "$WORK/bin/srun" "$WORK/bin/scontrol"
export PATH=$WORK/bin:$PATH WORK SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 SLURM_NTASKS=8
unset OMP_NUM_THREADS

SLURM_CPUS_PER_TASK=3 bash tools/slurm/lattice.sbatch run.json --set a.b=1 >"$WORK/1.log" 2>&1 || fail "exit $?: $(cat "$WORK/1.log")"
grep -q -- "--cpus-per-task=3 " "$WORK/srun.txt" || fail "srun was not given --cpus-per-task=3: $(cat "$WORK/srun.txt")"
grep -q -- "train --config run.json --set a.b=1" "$WORK/srun.txt" || fail "srun does not run lattice train: $(cat "$WORK/srun.txt")"
grep -qx "OMP_NUM_THREADS=3" "$WORK/srun.txt" || fail "tasks do not get OMP_NUM_THREADS=3: $(cat "$WORK/srun.txt")"
echo "ok: SLURM_CPUS_PER_TASK=3 -> srun --cpus-per-task=3, OMP_NUM_THREADS=3"
bash tools/slurm/lattice.sbatch run.json >"$WORK/2.log" 2>&1 || fail "exit $?: $(cat "$WORK/2.log")"
grep -qx "OMP_NUM_THREADS=1" "$WORK/srun.txt" || fail "without --cpus-per-task tasks should get 1 thread: $(cat "$WORK/srun.txt")"
SLURM_CPUS_PER_TASK=3 OMP_NUM_THREADS=2 bash tools/slurm/lattice.sbatch run.json >"$WORK/3.log" 2>&1 || fail "exit $?"
grep -qx "OMP_NUM_THREADS=2" "$WORK/srun.txt" || fail "a set OMP_NUM_THREADS was overridden: $(cat "$WORK/srun.txt")"
echo "ok: no --cpus-per-task -> 1 thread; a set OMP_NUM_THREADS wins"

STOP_ON_USR1=1 bash tools/slurm/lattice.sbatch run.json >"$WORK/4.log" 2>&1 &
job=$!
for _ in $(seq 100); do [[ -e $WORK/srun.started ]] && break; sleep 0.1; done
[[ -e $WORK/srun.started ]] || fail "srun never started: $(cat "$WORK/4.log")"
kill -USR1 $job
rc=0
wait $job || rc=$?
[[ $rc -eq 0 ]] || fail "exit $rc after SIGUSR1 (want 0): $(cat "$WORK/4.log")"
grep -q "got USR1" "$WORK/srun.txt" || fail "SIGUSR1 did not reach srun"
[[ $(cat "$WORK/scontrol.txt" 2>/dev/null) == "requeue 42" ]] || fail "the job did not requeue itself"
echo "ok: SIGUSR1 -> srun, requeue, exit 0"

# stopped SIGNAL LOG [env...]: the script under the stand-in srun, stopped by SIGNAL once srun runs.
stopped() {
  local signal=$1 log=$2 rc=0
  shift 2
  rm -f "$WORK/srun.started" "$WORK/scontrol.txt"
  env STOP_ON_USR1=1 "$@" bash tools/slurm/lattice.sbatch run.json >"$log" 2>&1 &
  local job=$!
  for _ in $(seq 100); do [[ -e $WORK/srun.started ]] && break; sleep 0.1; done
  kill "-$signal" $job
  wait $job || rc=$?
  [[ $rc -eq 0 ]] || fail "exit $rc after SIG$signal (want 0): $(cat "$log")"
}
stopped TERM "$WORK/5.log"
[[ ! -e $WORK/scontrol.txt ]] || fail "SIGTERM (scancel) requeued the job: $(cat "$WORK/scontrol.txt")"
grep -q "SIGTERM (scancel, or a preemption): checkpoint of step 7 saved; not requeueing" "$WORK/5.log" ||
  fail "no 'not requeueing' line after SIGTERM: $(cat "$WORK/5.log")"
stopped USR1 "$WORK/6.log" STOPPED="unsaved 7"
[[ ! -e $WORK/scontrol.txt ]] || fail "a stop without a checkpoint requeued the job"
grep -q "stopped after step 7 without a checkpoint (checkpoint.dir is not set): not requeueing" "$WORK/6.log" ||
  fail "no 'without a checkpoint' line: $(cat "$WORK/6.log")"
echo "ok: SIGTERM saves without requeueing; a stop without a checkpoint is not requeued"

# A task of srun --mpi=pmix: PMIX_RANK alone makes lattice initialize MPI (a singleton here, world 1).
out=$(PMIX_RANK=0 timeout 60 trainer/lattice train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2 2>&1) &&
  fail "a 2-stage layout trained on 1 rank: $out"
grep -q "the job has 1 ranks" <<<"$out" || fail "PMIX_RANK set, but lattice did not start as a rank of a job: $out"
echo "ok: PMIX_RANK (srun --mpi=pmix) -> lattice runs as a rank of the job"
echo PASS
