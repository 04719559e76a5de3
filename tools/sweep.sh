#!/usr/bin/env bash
# Runs a config sweep: one `lattice train` per point, each point in its own run folder
# (logging.run_dir = SWEEP_DIR/NAME), one after another or as a Slurm job array; then prints
# `lattice report` over the points. See README "Sweeps".
#
#   tools/sweep.sh --config configs/quickstart.json --out runs/lr-sweep \
#     --grid optimizer.lr=1e-3,2e-3,4e-3,8e-3 -- --set training.train_iters=60
#
# Options:
#   --config BASE.json     the base config (required)
#   --out SWEEP_DIR        the sweep's folder: one run folder per point, and .sweep/ (the points, the
#                          points' console logs, the Slurm array script) (required)
#   --points FILE          one point per line: space-separated key=value overrides; '#' starts a comment
#   --grid 'key=v1,v2,...' the cartesian product of all --grid options (the first one varies slowest)
#                          (--points and --grid together: each points-file line crossed with the grid)
#   --np N                 ranks per point: N > 1 runs tools/launch_mpirun.sh -n N (MAX_RESTARTS
#                          defaults to 0 here: a failed point is not retried within one sweep)
#   --save-interval N      adds --set checkpoint.save_interval=N to every point (default: the base
#                          config's), so that an interrupted point resumes from its checkpoints
#   --slurm [ARGS...]      submits the points neither finished nor running as one job array (sbatch --array=...) of
#                          SWEEP_DIR/.sweep/array.sbatch, which runs a point through
#                          tools/slurm/lattice.sbatch; ARGS (up to `--` or the end) go to sbatch,
#                          e.g. --slurm --ntasks=2 --cpus-per-task=8 --time=1:00:00
#   --only K               runs point K (0-based, in sweep order) alone: what the array script does
#   -- ARGS...             passed to every `lattice train` (before the point's own overrides)
#
# Every point runs with logging.run_dir=SWEEP_DIR/NAME and logging.metrics_file, .tensorboard_dir,
# .trace_file and checkpoint.dir emptied, so that all its outputs land in its run folder whatever
# the base config says. A point's folder name is its overrides joined by ',' with every character other than
# [A-Za-z0-9._,=+-] made '_' (no overrides: 'base'). A point whose folder already reports `finished`
# (`lattice report --csv`) is skipped; any other point is started with the same command, so a
# stopped or interrupted one resumes from RUN_DIR/checkpoints (checkpoint.load auto) if it saved any.
# A failed point does not stop the others. Exit status: 0 when every point finished, 1 otherwise
# (2 for a usage error). Environment: LATTICE (the binary, default bazel-bin/trainer/lattice),
# SBATCH (default sbatch).
set -euo pipefail

die() { echo "sweep: $*" >&2; exit 2; }
usage() {
  sed -n '/^# Options:/,/^# SBATCH (default sbatch)./p' "$0" | sed 's/^# \{0,1\}//' >&2
  die "usage: $0 --config BASE.json --out SWEEP_DIR [--points FILE | --grid 'key=v1,v2' ...] [--np N] [--save-interval N] [--slurm [sbatch args]] [-- lattice train args]"
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
LATTICE=${LATTICE:-bazel-bin/trainer/lattice}
SBATCH=${SBATCH:-sbatch}

base='' out='' points_file='' np=1 save_interval='' slurm=0 only=''
grids=() sbatch_args=() extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --config) base=${2:?--config needs a file}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --points) points_file=${2:?--points needs a file}; shift 2 ;;
    --grid) grids+=("${2:?--grid needs key=v1,v2,...}"); shift 2 ;;
    --np) np=${2:?--np needs a number}; shift 2 ;;
    --save-interval) save_interval=${2:?--save-interval needs a number}; shift 2 ;;
    --only) only=${2:?--only needs a point index}; shift 2 ;;
    --slurm)
      slurm=1
      shift
      while [[ $# -gt 0 && $1 != -- ]]; do sbatch_args+=("$1"); shift; done ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    *) echo "sweep: unknown option '$1'" >&2; usage ;;
  esac
done
[[ -n $base && -n $out ]] || usage
[[ -f $base ]] || die "--config '$base' is not a file"
[[ $np =~ ^[1-9][0-9]*$ ]] || die "--np '$np' is not a positive number"
[[ -z $save_interval || $save_interval =~ ^[1-9][0-9]*$ ]] || die "--save-interval '$save_interval' is not a positive number"
[[ -z $only || $only =~ ^[0-9]+$ ]] || die "--only '$only' is not a point index"
if [[ $slurm -eq 1 && -z $only ]]; then
  [[ $np -eq 1 ]] || die "--np $np does not apply with --slurm: a point's ranks come from the sbatch options (--slurm --ntasks=$np ...)"
  [[ $out != *[[:space:]]* ]] || die "--out '$out' holds a space, which an #SBATCH --output line cannot: give --slurm another --out"
fi
[[ -x $LATTICE ]] || die "the lattice binary '$LATTICE' is not there: build it (tools/build.sh) or set LATTICE=..."

# The points: one line of space-separated overrides each.
points=()
if [[ -n $points_file ]]; then
  [[ -f $points_file ]] || die "--points '$points_file' is not a file"
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%%#*}
    read -r -a words <<<"$line"
    [[ ${#words[@]} -eq 0 ]] && continue
    for w in "${words[@]}"; do
      [[ $w == ?*=* ]] || die "$points_file: '$w' is not key=value"
    done
    points+=("${words[*]}")
  done <"$points_file"
  [[ ${#points[@]} -gt 0 ]] || die "$points_file holds no points"
else
  points=("")
fi
for g in "${grids[@]}"; do
  key=${g%%=*}
  [[ $g == ?*=?* && $key != *[[:space:]]* ]] || die "--grid '$g' is not key=v1,v2,..."
  IFS=, read -r -a values <<<"${g#*=}"
  crossed=()
  for p in "${points[@]}"; do
    for v in "${values[@]}"; do
      [[ -n $v && $v != *[[:space:]]* ]] || die "--grid '$g': an empty value or one with a space"
      crossed+=("${p:+$p }$key=$v")
    done
  done
  points=("${crossed[@]}")
done

point_name() {  # point_name "k1=v1 k2=v2" -> k1=v1,k2=v2 (sanitized)
  local name=${1// /,}
  name=${name//[^A-Za-z0-9._,=+-]/_}
  [[ -n $name ]] || name=base
  [[ $name == .* ]] && name=_$name
  echo "$name"
}
names=()
declare -A seen=()
for p in "${points[@]}"; do
  n=$(point_name "$p")
  [[ -z ${seen[$n]:-} ]] || die "two points have the folder name '$n': '${seen[$n]}' and '$p'"
  seen[$n]=$p
  names+=("$n")
done
K=${#points[@]}
[[ -z $only || $only -lt $K ]] || die "--only $only: the sweep has $K point(s) (0 to $((K - 1)))"

mkdir -p "$out/.sweep/logs"
# The array's tasks start together and each reads points.txt (--points): rewriting it in place would
# let one task truncate the file while another reads it and finds fewer points. So the file is
# replaced atomically (a complete file renamed over the old one), and only when its points change.
points_txt=$out/.sweep/points.txt
if [[ ! -f $points_txt ]] || [[ $(printf '%s\n' "${points[@]}") != "$(<"$points_txt")" ]]; then
  printf '%s\n' "${points[@]}" >"$points_txt.tmp.$$"
  mv -f "$points_txt.tmp.$$" "$points_txt"
fi

# Every point's outputs go to its own run folder: an output path among the arguments every point
# shares would make the points resume each other's checkpoints or write one metrics file.
for ((j = 0; j < ${#extra[@]}; ++j)); do
  a=${extra[$j]#--set=}
  if [[ $a =~ ^(logging\.(run_dir|metrics_file|tensorboard_dir|trace_file)|checkpoint\.dir)=.+ ]]; then
    die "'$a' after -- would be shared by every point (they would resume each other's checkpoints or write one" \
      "file): leave it out, and each point's goes to its run folder $out/NAME; a path per point can go in --points"
  fi
done

# The arguments every point shares: the base config's contents and those after --. A sweep folder
# run again with others skips its finished points, trained under the old ones, and lists them in one
# table with the new ones: said, with both. (Array tasks, --only, run with the arguments recorded.)
shared=$({ echo "base config sha256 $(sha256sum <"$base" | cut -d' ' -f1)"; printf '%q ' "${extra[@]}"; })
shared_txt=$out/.sweep/shared.txt
if [[ -z $only ]]; then
  if [[ -f $shared_txt && $shared != "$(<"$shared_txt")" ]]; then
    echo "sweep: warning: '$out' was swept before with other shared arguments (the base config's contents or" \
      "those after --): its finished points keep what they trained under those, and are skipped. Before:" \
      "$(tr '\n' ' ' <"$shared_txt"); now: $(tr '\n' ' ' <<<"$shared"). Give another --out to train every point" \
      "under the new ones" >&2
  fi
  printf '%s\n' "$shared" >"$shared_txt"
fi

# point_status DIR: finished / stopped / running / failed (lattice report's word), or 'none' (no run folder yet:
# never started, or refused before it wrote its resolved config).
point_status() {
  local dir=$1 csv
  [[ -f $dir/config.json ]] || { echo none; return; }
  if ! csv=$("$LATTICE" report --csv "$dir" 2>/dev/null); then echo failed; return; fi
  # Line 2 is the run's row: ...,STATUS,STEPS,... (the status word is followed by the step count).
  if [[ $(sed -n 2p <<<"$csv") =~ ,(finished|stopped|running|failed),[0-9]+, ]]; then
    echo "${BASH_REMATCH[1]}"
  else
    echo failed
  fi
}

# The arguments of `lattice train` for point I after --config.
train_args() {
  local i=$1 o
  # The output paths are emptied so that they follow the run folder: a base config's own paths
  # (the quickstart's metrics_file) would be shared by every point. Points may set them (not `--`).
  args=(--set "logging.run_dir=$out/${names[$i]}" --set logging.metrics_file= --set logging.tensorboard_dir=
        --set logging.trace_file= --set checkpoint.dir=)
  [[ -n $save_interval ]] && args+=(--set "checkpoint.save_interval=$save_interval")
  args+=("${extra[@]}")
  for o in ${points[$i]}; do args+=(--set "$o"); done
}

if [[ $slurm -eq 1 && -z $only ]]; then
  # The array: the points that have not finished.
  todo=()
  for ((i = 0; i < K; ++i)); do
    status=$(point_status "$out/${names[$i]}")
    if [[ $status == finished || $status == running ]]; then
      echo "sweep: skip ${names[$i]} ($status)"
    else
      todo+=("$i")
    fi
  done
  if [[ ${#todo[@]} -eq 0 ]]; then echo "sweep: every point has finished"; exit 0; fi
  script=$out/.sweep/array.sbatch
  abs_out=$(cd "$out" && pwd)
  opts=(--config "$(cd "$(dirname "$base")" && pwd)/$(basename "$base")" --out "$abs_out")
  [[ -n $save_interval ]] && opts+=(--save-interval "$save_interval")
  {
    echo '#!/usr/bin/env bash'
    echo "# Generated by tools/sweep.sh: Slurm array task I runs point I of $abs_out/.sweep/points.txt"
    echo '# (0-based) through tools/slurm/lattice.sbatch (srun, the signal/requeue handling).'
    echo '#SBATCH --job-name=lattice-sweep'
    echo '#SBATCH --signal=B:USR1@120'
    echo '#SBATCH --requeue'
    echo '#SBATCH --open-mode=append'
    echo "#SBATCH --output=$abs_out/.sweep/logs/slurm-%A_%a.log"
    echo 'set -euo pipefail'
    printf 'cd %q\n' "$PWD"
    printf 'export LATTICE=%q\n' "$(cd "$(dirname "$LATTICE")" && pwd)/$(basename "$LATTICE")"
    printf 'exec %q' "$SELF"
    printf ' %q' "${opts[@]}" --points "$abs_out/.sweep/points.txt" --only
    # shellcheck disable=SC2016  # expanded by the array task, not here
    printf ' "$SLURM_ARRAY_TASK_ID" --slurm --'
    [[ ${#extra[@]} -gt 0 ]] && printf ' %q' "${extra[@]}"
    echo
  } >"$script"
  chmod +x "$script"
  array=$(IFS=,; echo "${todo[*]}")
  echo "sweep: submitting ${#todo[@]} of $K point(s) as a job array: $SBATCH --array=$array ${sbatch_args[*]} $script"
  command -v "$SBATCH" >/dev/null || die "'$SBATCH' is not there (no Slurm on this machine?); the array script is $script"
  exec "$SBATCH" --array="$array" "${sbatch_args[@]}" "$script"
fi

if [[ $slurm -eq 1 ]]; then
  # One array task: point $only, through lattice.sbatch (exec: this process stays the batch shell,
  # whose trap forwards Slurm's USR1 to the ranks and requeues the task).
  dir=$out/${names[$only]}
  status=$(point_status "$dir")
  if [[ $status == finished ]]; then echo "sweep: skip ${names[$only]} (finished)"; exit 0; fi
  train_args "$only"
  echo "sweep: point $only: ${names[$only]} ($status): lattice train --config $base ${args[*]}"
  export LATTICE
  exec "$HERE/slurm/lattice.sbatch" "$base" "${args[@]}"
fi

stopping=0
child=''
# shellcheck disable=SC2317  # called by the trap
on_signal() {
  stopping=1
  if [[ -n $child ]]; then kill -USR1 "$child" 2>/dev/null || true; fi
}
trap on_signal TERM INT HUP

# Runs point I; its console output goes to .sweep/logs/NAME.log.
run_point() {
  local i=$1 name=${names[$1]} log rc=0
  log=$out/.sweep/logs/$name.log
  train_args "$i"
  echo "=== $(date -u +%FT%TZ) lattice train --config $base ${args[*]}" >>"$log"
  if [[ $np -gt 1 ]]; then
    MAX_RESTARTS=${MAX_RESTARTS:-0} LATTICE=$LATTICE "$HERE/launch_mpirun.sh" -n "$np" "$base" "${args[@]}" >>"$log" 2>&1 &
  else
    "$LATTICE" train --config "$base" "${args[@]}" >>"$log" 2>&1 &
  fi
  child=$!
  while true; do
    wait "$child" && rc=0 || rc=$?
    kill -0 "$child" 2>/dev/null || break
  done
  child=''
  return "$rc"
}

# The last error line of a point (its log.txt, else its console log).
why() {
  local line
  line=$(grep -h -E '\] \[(error|critical)\] ' "$out/$1/log.txt" "$out/.sweep/logs/$1.log" 2>/dev/null | tail -1 || true)
  echo "${line#*] \[*\] }"
}

range=$(seq 0 $((K - 1)))
[[ -n $only ]] && range=$only
bad=0
for i in $range; do
  name=${names[$i]}
  if [[ $stopping -eq 1 ]]; then echo "sweep: stop requested; not starting $name"; bad=1; continue; fi
  before=$(point_status "$out/$name")
  if [[ $before == finished || $before == running ]]; then
    echo "sweep: [$((i + 1))/$K] skip $name ($before$( [[ $before == running ]] && echo ": another process trains it"))"
    continue
  fi
  note=
  [[ $before != none ]] && note=" (was $before: resumes from its checkpoints if it saved any)"
  echo "sweep: [$((i + 1))/$K] run $name$note"
  rc=0
  run_point "$i" || rc=$?
  status=$(point_status "$out/$name")
  [[ $status == none ]] && status=failed
  if [[ $status == finished ]]; then
    echo "sweep: [$((i + 1))/$K] $name: finished"
  else
    bad=1
    echo "sweep: [$((i + 1))/$K] $name: $status (exit $rc)$( [[ $status == failed ]] && echo ": $(why "$name")")"
  fi
done

# The summary: the report over the points that have a run folder; under it, the others on a line each.
dirs=()
others=()
for i in $range; do
  if [[ -f $out/${names[$i]}/config.json ]]; then
    dirs+=("$out/${names[$i]}")
  elif [[ ! -e $out/.sweep/logs/${names[$i]}.log ]]; then
    others+=("sweep: ${names[$i]}: not started (the sweep was stopped first); run the sweep again to train it")
    bad=1
  else
    others+=("sweep: ${names[$i]}: no run folder (refused before it wrote one): $(why "${names[$i]}")")
    bad=1
  fi
done
echo
[[ ${#dirs[@]} -gt 0 ]] && { "$LATTICE" report "${dirs[@]}" || bad=1; }
for line in "${others[@]}"; do echo "$line"; done
exit "$bad"
