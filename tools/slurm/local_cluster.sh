#!/usr/bin/env bash
# A private one-node Slurm cluster for the launch tests: munged, slurmctld and slurmd, all run from
# (and writing only into) one folder, on free localhost ports, so nothing outside that folder changes
# and two test runs never meet.
#
#   tools/slurm/local_cluster.sh start DIR   # prints `export SLURM_CONF=DIR/slurm.conf`
#   tools/slurm/local_cluster.sh stop DIR
#
# Needs root (slurmd starts job steps as the submitting user) and Debian's slurmctld, slurmd, munge
# and slurm-wlm-basic-plugins (mpi/pmix), which tools/install_deps.sh installs.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action=$1
dir=$2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop_cluster() {
  # Jobs first: a job step (slurmstepd and its tasks) outlives slurmd.
  if [[ -f $dir/slurmctld.pid && -f $dir/slurm.conf ]]; then
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do
      [[ -z $(SLURM_CONF=$dir/slurm.conf squeue -h 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  for name in slurmd slurmctld munged; do
    local pidfile="$dir/$name.pid"
    [[ -f $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

start_cluster() {
  for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "local_cluster: $tool not found: run tools/install_deps.sh" >&2; exit 1; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "local_cluster: slurmd must run as root" >&2; exit 1; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # Whatever fails from here on, nothing of the cluster is left running.
  trap 'echo "local_cluster: start failed; logs in $dir" >&2; stop_cluster' ERR
  chmod 700 "$dir"
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/tmp"
  chmod 700 "$dir/munge"

  # munge: its own key, socket, pid and seed files, so the machine's munged (if any) is not touched.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munge/munged.seed" --log-file="$dir/munge/munged.log"

  # At least 4 CPUs, whatever the machine has, so 2-rank jobs and a few array tasks run on a small
  # machine too (oversubscribed, as the mpirun tests are); config_overrides lets slurmd accept it.
  # (nproc --all: plain nproc obeys OMP_NUM_THREADS.)
  local cpus memory
  cpus=$(nproc --all)
  [[ $cpus -ge 4 ]] || cpus=4
  memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
  cat > "$dir/slurm.conf" <<CONF
ClusterName=lattice-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job waits cred_expire + 1 s before it may start again (120 s by default).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
SlurmdParameters=config_overrides
# Time limits and --signal are checked this often; the requeue test waits for both.
MinJobAge=300
KillWait=10
NodeName=lattice-node NodeAddr=127.0.0.1 NodeHostname=$(hostname -s) CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=lattice-node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" -i
  slurmd -f "$SLURM_CONF" -N lattice-node
  for _ in $(seq 100); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "local_cluster: the node did not come up in 20 s; logs in $dir" >&2
  tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
  stop_cluster
  exit 1
}

case $action in
  start) start_cluster ;;
  stop) stop_cluster ;;
  *) usage ;;
esac
