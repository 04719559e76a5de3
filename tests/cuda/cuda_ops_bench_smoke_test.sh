#!/usr/bin/env bash
# cuda_ops_bench --smoke: every timed op runs on the CPU in both precisions and the totals print.
set -euo pipefail
status=0
out=$("$1" --smoke 2>&1) || status=$?
[[ $status -eq 0 ]] || { echo "$out"; echo "FAIL: cuda_ops_bench --smoke exited $status"; exit 1; }
echo "$out"
for want in "-- f32:" "-- bf16 mixed precision:" "attention backward (bf16: cuDNN SDPA on a GPU)" "bias_backward" \
  "cast to the bf16 copies" "bf16 / f32 op sum:"; do
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: no line with '$want'"; exit 1; }
done
[[ $(grep -c "^total" <<<"$out") -eq 2 ]] || { echo "FAIL: expected two totals (f32, bf16)"; exit 1; }
echo "ok: cuda_ops_bench --smoke"
