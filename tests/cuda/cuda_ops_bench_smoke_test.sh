#!/usr/bin/env bash
# cuda_ops_bench --smoke: every timed op runs, in both precisions, on the CPU backend ($1) and on the
# CUDA backend over the CPU emulator ($2, tests/cuda_emu), and both totals print.
set -euo pipefail
smoke() {  # smoke BINARY DEVICE
  local status=0 out
  out=$("$1" --smoke "$2" 2>&1) || status=$?
  [[ $status -eq 0 ]] || { echo "$out"; echo "FAIL: cuda_ops_bench --smoke $2 exited $status"; exit 1; }
  echo "$out"
  for want in "-- f32:" "-- bf16 mixed precision:" "attention backward (bf16: cuDNN SDPA on a GPU)" "bias_backward" \
    "cast to the bf16 copies" "bf16 / f32 op sum:"; do
    grep -qF -- "$want" <<<"$out" || { echo "FAIL: --smoke $2: no line with '$want'"; exit 1; }
  done
  [[ $(grep -c "^total" <<<"$out") -eq 2 ]] || { echo "FAIL: --smoke $2: expected two totals (f32, bf16)"; exit 1; }
}
smoke "$1" cpu
smoke "$2" cuda
echo "ok: cuda_ops_bench --smoke, cpu and emulated cuda"
