#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds the plain (CPU-only) binary, then builds
# with --config=cuda — the CUDA backend and the GPU test binaries — and runs every test under
# //tests/... with the CUDA-enabled build, so nothing that breaks the CUDA build or CPU training
# under it can land. GPU tests (tests/cuda, tagged manual) run only where a GPU is visible;
# elsewhere this says how many it left out. Ends with one "N passed, M failed" line counted from
# Bazel's per-target summary.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build //trainer:lattice  # the plain build needs no CUDA toolkit
# The GPU targets are tagged manual, so //... leaves them out: name them.
gpu_targets=$(bazel query 'attr(tags, "\bgpu\b", //tests/...)' 2>/dev/null)
gpu_tests=$(bazel query 'attr(tags, "\bgpu\b", tests(//tests/...))' 2>/dev/null)
# shellcheck disable=SC2086  # one label per word
bazel build --config=cuda //... $gpu_targets
log=$(mktemp)
trap 'rm -f "$log"' EXIT
have_gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && have_gpu=1
set +e
if [[ $have_gpu -eq 1 ]]; then
  # shellcheck disable=SC2086
  bazel test --config=cuda //tests/... $gpu_tests "$@" 2>&1 | tee "$log"
else
  bazel test --config=cuda //tests/... "$@" 2>&1 | tee "$log"
fi
status=${PIPESTATUS[0]}
set -e
passed=$(grep -cE '^//[^ ]+ .*PASSED' "$log" || true)
failed=$(grep -cE '^//[^ ]+ .*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$log" || true)
if [[ $have_gpu -eq 0 ]]; then
  # shellcheck disable=SC2086
  gpu_binaries=$(comm -23 <(printf '%s\n' $gpu_targets | sort) <(printf '%s\n' $gpu_tests | sort))
  echo "gpu tests: $(echo "$gpu_tests" | wc -w) built, not run: no GPU is visible here (tools/gpu/bundle.sh + tools/gpu/check.sh run them, and the end-to-end GPU runs, on a GPU machine): $(echo $gpu_tests)"
  echo "gpu binaries check.sh runs (under mpirun or as benchmarks), built, not run: $(echo $gpu_binaries)"
  echo "on the CPU emulator of the CUDA kernels and NCCL instead (not a GPU run), in the counts below:" \
    "//tests/cuda_emu:cuda_ops_emulated_test, //tests/cuda_emu:cuda_matmul_emulated_test (the cuBLASLt wrapper over an emulated cuBLASLt)," \
    "//tests/cuda_emu:train_emulated_test, //tests/cuda_emu:cudnn_fallback_emulated_test," \
    "//tests/cuda_emu:profile_capture_emulated_test," \
    "//tests/cuda_emu:memory_plan_emulated_test, //tests/cuda_emu:nccl_communicator_emulated_test_np{1,2,3} and" \
    "//tests/cuda_emu:nccl_train_emulated_test"
fi
echo "tests: $passed passed, $failed failed"
exit "$status"
