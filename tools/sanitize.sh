#!/usr/bin/env bash
# Runs Bazel tests with everything built under AddressSanitizer and UBSan, in an output base of its
# own (so the regular build's cache stays as it is):
#   tools/sanitize.sh [TARGET ...]   (default: //tests/kernels/... //tests/checkpoint/... //tests/data/...)
# A read or write outside an allocation, a use after free, or undefined behaviour fails the test with
# the sanitizer's report in its log. Expected failures: the bounds on resident memory
# (prepare_pipeline_test, memory_plan_test's peak RSS), which ASan's shadow memory and quarantine
# exceed. The suite's own sanitized targets (tests/cuda_emu's *_sanitized_*) cover the CUDA kernels
# on every run; this is for the rest, now and then (the CPU kernels, checkpoint and data suites take
# about 25 minutes on 2 cores, the trainer and CLI suites 10).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(//tests/kernels/... //tests/checkpoint/... //tests/data/...)
exec bazel --output_base="${LATTICE_SANITIZE_OUTPUT_BASE:-$HOME/.cache/lattice-sanitize}" test --config=cuda \
  --copt=-fsanitize=address,undefined --copt=-fno-sanitize-recover=undefined --copt=-fno-omit-frame-pointer \
  --linkopt=-fsanitize=address,undefined --test_env=ASAN_OPTIONS=detect_leaks=0 --keep_going "${targets[@]}"
