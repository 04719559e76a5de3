#!/usr/bin/env bash
# Launches `lattice train` on N ranks with mpirun, restarting it after a crash until training
# completes: each start resumes from checkpoint.dir/latest (checkpoint.load = auto). This is the way
# to stop a run cleanly with a signal; see README "Stopping and preemption".
#
#   tools/launch_mpirun.sh -n 8 configs/gpt2-124m.json --set checkpoint.dir=runs/gpt2/ckpt
#
# Any stop signal to this script (SIGTERM, SIGINT/Ctrl-C, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) reaches
# the ranks as SIGUSR1 through mpirun, which forwards SIGUSR1: they stop after the current step, save
# a checkpoint and exit 0, and this script exits 0 without restarting. mpirun runs in its own session
# so that a signal to the whole process group (Ctrl-C, kill -- -PGID) reaches only this script: a
# SIGTERM or SIGINT to mpirun itself makes it kill the ranks a second later (odls_base_sigkill_timeout),
# cutting a large save short, and exit 1 even after a clean save.
#
# Threads: OMP_NUM_THREADS, when not set, is the cores of this node divided by the ranks per node
# (at least 1), passed to every rank; with more ranks per node than cores mpirun gets --oversubscribe.
# Environment: LATTICE (the binary, default bazel-bin/trainer/lattice), MAX_RESTARTS (default 3),
# RANKS_PER_NODE (default: all ranks on this node), MPIRUN_ARGS (extra mpirun options, e.g.
# "--hostfile hosts --map-by ppr:8:node" with RANKS_PER_NODE=8).
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
RANKS_PER_NODE=${RANKS_PER_NODE:-$RANKS}
[[ $RANKS =~ ^[1-9][0-9]*$ && $RANKS_PER_NODE =~ ^[1-9][0-9]*$ ]] || usage
# A missing binary would fail every restart alike (exit 127 or 132): say so once, as a usage error.
[[ -x $LATTICE ]] || { echo "launch_mpirun: the lattice binary '$LATTICE' is not there: build it (tools/build.sh) or set LATTICE=..." >&2; exit 2; }

MPI_OPTS=()
[[ $(id -u) -eq 0 ]] && MPI_OPTS+=(--allow-run-as-root)
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the cores this job may use: nproc reports OMP_NUM_THREADS when set
# mpirun's slots are physical cores: more ranks than that on a node need --oversubscribe.
cores=$(lscpu -p=Core,Socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
[[ $cores -ge 1 ]] || cores=$cpus
oversubscribed=
if [[ $RANKS_PER_NODE -gt $cores ]]; then
  MPI_OPTS+=(--oversubscribe)
  oversubscribed=", --oversubscribe"
fi
threads=$((cpus / RANKS_PER_NODE))
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((threads > 0 ? threads : 1))}
MPI_OPTS+=(-x OMP_NUM_THREADS)  # to ranks on other nodes too
echo "launch_mpirun: $RANKS_PER_NODE rank(s) per node on $cpus cpu(s) ($cores cores): OMP_NUM_THREADS=$OMP_NUM_THREADS$oversubscribed"

stopping=0
mpirun_pid=
on_signal() {
  stopping=1
  [[ -n $mpirun_pid ]] && kill -USR1 "$mpirun_pid" 2>/dev/null
}
trap on_signal TERM INT HUP QUIT USR1 USR2

status=0
for ((attempt = 0; attempt <= MAX_RESTARTS; ++attempt)); do
  if [[ $stopping -eq 1 ]]; then
    echo "launch_mpirun: stop requested; not restarting" >&2
    exit "$status"
  fi
  echo "launch_mpirun: start $attempt of $CONFIG on $RANKS rank(s)"
  # setsid: see the header. This background child is no process-group leader, so setsid makes the new
  # session in place and execs mpirun: $! stays mpirun's pid.
  # shellcheck disable=SC2086  # MPIRUN_ARGS is a list of options
  setsid -w mpirun "${MPI_OPTS[@]}" -np "$RANKS" ${MPIRUN_ARGS:-} "$LATTICE" train --config "$CONFIG" "$@" &
  mpirun_pid=$!
  [[ $stopping -eq 1 ]] && kill -USR1 "$mpirun_pid" 2>/dev/null  # a signal that came before the pid was known
  # `wait` returns early when a trapped signal arrives: keep waiting until mpirun itself has ended.
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
  if [[ $attempt -eq $MAX_RESTARTS ]]; then
    echo "launch_mpirun: lattice exited $status; giving up after $MAX_RESTARTS restart(s) (MAX_RESTARTS)" >&2
    exit "$status"
  fi
  echo "launch_mpirun: lattice exited $status; restarting (it resumes from checkpoint.dir's latest, if it saved any)" >&2
done
