#!/usr/bin/env bash
# tools/gpu/targets.py ($1), which check.sh runs after its benchmarks, on bench logs made here in
# `lattice bench`'s format, with figures chosen around issue 12's targets: the fastest row of each
# model counts, except one timed under --profile-ops (faster here, so that counting it would show);
# a non-deterministic row is named as such beside the best deterministic one; a failed row (no
# tokens/s line) and a model with no row are reported as unmeasured, not as met.
set -euo pipefail
script=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bench_log() {  # bench_log NAME TOKENS_PER_S GEMM_PEAK_SHARE
  cat >"$dir/bench-$1.log" <<LOG
[12:00:00] [info] cuda: local rank 0 of 1 uses visible GPU 0 of 1 (NVIDIA H200, 139.8 GiB, sm_90)
== lattice bench: 12 layers, hidden 768, heads 12, vocab 50304, seq 1024, micro-batch 16, cuda ==
tokens/s                     : $2
achieved GFLOP/s (whole step): 400000.0
ratio achieved / peak        : $3% (bf16 GEMM peak)
LOG
}
bench_log gpt2-124m-bf16-accum-gelu-fusion 481682.1 52.7
bench_log gpt2-124m-bf16-1x64-gelu-fusion 530000.0 58.0
bench_log gpt2-124m-bf16-1x64-profile 600000.0 65.0
bench_log gpt2-1.5b-bf16-accum-gelu-fusion 46372.0 60.0
bench_log gpt2-1.5b-bf16-4x16-gelu-fusion-nondeterministic 52000.0 67.3
echo "[12:00:00] [error] out of GPU memory" >"$dir/bench-llama-1b-bf16-accum.log"
out=$(python3 "$script" "$dir")
echo "$out"
gpt2_1_5b="  GPT-2 1.5B: 52,000 tokens/s (gpt2-1.5b-bf16-4x16-gelu-fusion-nondeterministic) = 98.1% of 53,000: unmet"
gpt2_1_5b+=" (non-deterministic attention); deterministic: 46,372 tokens/s (gpt2-1.5b-bf16-accum-gelu-fusion)"
gpt2_1_5b+=" = 87.5% of 53,000: unmet"
want=(
  "issue 12's bf16 targets (set for one H200), measured on NVIDIA H200:"
  "  GPT-2 124M: 530,000 tokens/s (gpt2-124m-bf16-1x64-gelu-fusion) = 101.9% of 520,000: met"
  "$gpt2_1_5b"
  "  Llama ~1B: no row ran: unmeasured"
)
for line in "${want[@]}"; do
  grep -qxF -- "$line" <<<"$out" || { echo "FAIL: no line '$line'"; exit 1; }
done
# The Llama's figure is its share of the GEMM peak, against 55%.
bench_log llama-1b-bf16-accum 69307.0 63.8
grep -qxF "  Llama ~1B: 63.8% of the measured bf16 GEMM peak (llama-1b-bf16-accum) against 55%: met" \
  <<<"$(python3 "$script" "$dir")" || { echo "FAIL: the Llama's share of the GEMM peak"; exit 1; }
echo "ok: targets.py"
