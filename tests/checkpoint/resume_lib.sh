# Sourced by the checkpoint tests that drive `lattice train` through the CLI: the tiny dataset,
# a runner for one process or mpirun, and the expected-failure helper.
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1  # several ranks per core

prepare_tiny_dataset

# run NP LOG lattice-args...: one process (NP 1, no mpirun) or mpirun -np NP; the log goes to LOG,
# and is shown when the run fails.
run() {
  local np=$1 log=$2
  shift 2
  local cmd=(timeout 120 $LATTICE "$@")
  [[ $np -gt 1 ]] && cmd=(timeout 120 mpirun --allow-run-as-root --oversubscribe -np "$np" $LATTICE "$@")
  if ! "${cmd[@]}" >"$log" 2>&1 </dev/null; then
    echo "FAIL: ${cmd[*]}"
    tail -30 "$log"
    exit 1
  fi
}

# expect_exit2 NEEDLE cmd...: the command ends with exit 2 and its output contains NEEDLE.
expect_exit2() {
  local needle=$1
  shift
  local out rc
  out=$("$@" 2>&1 </dev/null) && rc=0 || rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from: $* -- $out"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
}

# A listing of every file under a directory with its checksum (to show nothing was touched).
snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum; find . | sort); }

# rank_pid R: the pid of world rank R of this test's mpirun job, found by its environment (which
# holds this test's TMPDIR: the sandbox may run other tests' ranks). The environment is read whole
# first: `tr | grep -q` could fail under pipefail when grep stops reading early.
rank_pid() {
  local env vars pid found=
  for env in /proc/[0-9]*/environ; do
    vars=$(tr '\0' '\n' <"$env" 2>/dev/null) || continue
    if grep -qx "OMPI_COMM_WORLD_RANK=$1" <<<"$vars" && grep -qxF "TMPDIR=$WORK" <<<"$vars"; then
      pid=${env#/proc/}
      found=${pid%/environ}
    fi
  done
  [[ -n $found ]] || fail "rank $1 not found"
  echo "$found"
}

# wait_for_step METRICS N PID LOG: until the metrics file has logged step N; fails (showing LOG) when
# the process PID ends first or after a minute.
wait_for_step() {
  local _
  for _ in $(seq 600); do
    grep -q "\"step\":$2," "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || { cat "$4"; fail "the run ended before step $2"; }
    sleep 0.1
  done
  cat "$4"
  fail "step $2 never came"
}
