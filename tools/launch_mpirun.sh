#!/usr/bin/env bash
# Launches `lattice train` on N ranks with mpirun, restarting it after a crash or a preemption
# until training completes: each start resumes from checkpoint.dir/latest (checkpoint.load = auto).
#
#   tools/launch_mpirun.sh -n 8 configs/gpt2-124m.json --set checkpoint.dir=runs/gpt2/ckpt
#
# SIGTERM / SIGINT to this script reaches the ranks as SIGUSR1 (mpirun forwards SIGUSR1 to every rank;
# a SIGTERM or SIGINT to mpirun itself would be followed by SIGKILL after a second, odls_base_sigkill_timeout,
# cutting a large save short): they stop after the current step, save a checkpoint and exit 0, and
# this script exits without restarting. mpirun runs in its own session (setsid), so that a Ctrl-C in
# the terminal, which signals the whole foreground process group, reaches this script only.
# Environment: LATTICE (the binary, default bazel-bin/trainer/lattice), MAX_RESTARTS (default 3),
# MPIRUN_ARGS (extra mpirun options, e.g. "--hostfile hosts --map-by ppr:8:node").
set -uo pipefail

usage() { echo "usage: $0 -n RANKS CONFIG.json [lattice train options ...]" >&2; exit 2; }
[[ ${1:-} == -n && -n ${2:-} ]] || usage
RANKS=$2
shift 2
CONFIG=${1:-}
[[ -n $CONFIG ]] || usage
shift
LATTICE=${LATTICE:-bazel-bin/trainer/lattice}
MAX_RESTARTS=${MAX_RESTARTS:-3}
ROOT_ARGS=()
[[ $(id -u) -eq 0 ]] && ROOT_ARGS=(--allow-run-as-root)

stopping=0
mpirun_pid=
on_signal() {
  stopping=1
  [[ -n $mpirun_pid ]] && kill -USR1 "$mpirun_pid" 2>/dev/null
}
trap on_signal TERM INT

for ((attempt = 0; attempt <= MAX_RESTARTS; ++attempt)); do
  echo "launch_mpirun: start $attempt of $CONFIG on $RANKS rank(s)"
  # setsid: see the header. This background child is no process-group leader, so setsid makes the new
  # session in place and execs mpirun: $! stays mpirun's pid.
  # shellcheck disable=SC2086  # MPIRUN_ARGS is a list of options
  setsid mpirun "${ROOT_ARGS[@]}" -np "$RANKS" ${MPIRUN_ARGS:-} "$LATTICE" train --config "$CONFIG" "$@" &
  mpirun_pid=$!
  status=0
  while true; do
    wait "$mpirun_pid" && status=0 || status=$?
    kill -0 "$mpirun_pid" 2>/dev/null || break
  done
  mpirun_pid=
  if [[ $status -eq 0 ]]; then
    echo "launch_mpirun: lattice exited 0$([[ $stopping -eq 1 ]] && echo ' after a stop request (checkpoint saved)')"
    exit 0
  fi
  if [[ $stopping -eq 1 || $status -eq 2 ]]; then
    # A stop request, or bad input (exit 2: config, data or checkpoint): restarting cannot help.
    echo "launch_mpirun: lattice exited $status; not restarting" >&2
    exit "$status"
  fi
  echo "launch_mpirun: lattice exited $status; restarting from the latest checkpoint" >&2
done
echo "launch_mpirun: giving up after $MAX_RESTARTS restarts" >&2
exit 1
