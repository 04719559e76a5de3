#!/usr/bin/env bash
# The progress line, as Megatron-LM's, averages over the steps since the previous line: its loss
# and step time are the means of the metrics file's per-step figures over exactly those steps (the
# first step alone, then each log_interval, then the last step), its tokens/s and GFLOP/s those
# steps' tokens and FLOPs over their summed time (not a mean of rates); grad norm and lr are the last
# step's. The summary's throughput is the steps after the first, tokens over time, likewise. A warmup longer than the run is warned about by validate and train; the start-of-run
# data lines count the samples and epochs a run and an evaluation read.
set -uo pipefail
export OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
L=trainer/lattice
W=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 300); do echo "{\"text\": \"document $i: the quick brown fox jumps over the lazy dog\\n\"}"; done >"$W/d.jsonl"
$L data prepare --input "$W/d.jsonl" --output-prefix "$W/d" >/dev/null 2>&1 || fail "data prepare"
$L train --config configs/test-tiny-gpt2.json --set data.path="$W/d" --set training.train_iters=8 \
  --set logging.log_interval=3 --set logging.metrics_file="$W/m.jsonl" --set optimizer.warmup_iters=2 \
  >"$W/train.log" 2>&1 || fail "train: $(tail -3 "$W/train.log")"
python3 - "$W/train.log" "$W/m.jsonl" <<'PY' || fail "the progress lines do not average the metrics file's steps"
import json, re, sys
steps = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
line = re.compile(r"step +(\d+)/8 \| loss ([0-9.]+)(?: \(mean of steps (\d+)-(\d+)\))? \| lr ([0-9.e+-]+) \| "
                  r"grad_norm ([0-9.]+) \| +([0-9.]+) tok/s \| +([0-9.]+) ms \| +([0-9.]+) GFLOP/s")
seen = []
for text in open(sys.argv[1]):
    m = line.search(text)
    if not m:
        continue
    step = int(m[1])
    first, last = (int(m[3]), int(m[4])) if m[3] else (step, step)
    seen.append((first, last))
    assert last == step, text
    span = [steps[s] for s in range(first, last + 1)]
    mean = lambda key: sum(r[key] for r in span) / len(span)
    assert abs(float(m[2]) - mean("loss")) <= 5e-5, (text, mean("loss"))
    # Every step trains 64 tokens (global batch 4 × seq 16): the rate is their total over total time.
    seconds = sum(r["step_ms"] for r in span) / 1e3
    assert all(abs(r["tokens_per_s"] * r["step_ms"] / 1e3 - 64) < 1e-6 * 64 for r in span), span
    assert abs(float(m[7]) - 64 * len(span) / seconds) <= 0.05 + 1e-6 * float(m[7]), (text, 64 * len(span) / seconds)
    flops = sum(r["gflops"] * r["step_ms"] / 1e3 for r in span)
    assert abs(float(m[9]) - flops / seconds) <= 0.05 + 1e-6 * float(m[9]), (text, flops / seconds)
    assert abs(float(m[8]) - mean("step_ms")) <= 0.05, (text, mean("step_ms"))
    assert abs(float(m[5]) - steps[step]["lr"]) <= 1e-3 * steps[step]["lr"], text
    assert abs(float(m[6]) - steps[step]["grad_norm"]) <= 5e-4, text
# Lines at step 1 (alone), 3, 6 (log_interval) and 8 (the last): every step in exactly one line.
assert seen == [(1, 1), (2, 3), (4, 6), (7, 8)], seen
summary = [json.loads(l)["summary"] for l in open(sys.argv[2]) if '"summary"' in l][-1]
timed = [steps[s] for s in range(2, 9)]
expected = 64 * len(timed) / (sum(r["step_ms"] for r in timed) / 1e3)
assert abs(summary["tokens_per_s"] - expected) <= 1e-3 * expected, (summary, expected)
print("ok: progress lines", seen)
PY

# A warmup past the end of the run: a warning naming both fields (accepted when decay_iters is larger).
LONG=(--config configs/test-tiny-gpt2.json --set data.path="$W/d" --set training.train_iters=4
      --set optimizer.warmup_iters=40 --set optimizer.decay_iters=100)
want="optimizer.warmup_iters (40) is past training.train_iters (4): the run ends in warmup at lr 0.0001"
out=$($L validate "${LONG[@]}" 2>&1 >/dev/null) && grep -qF "$want" <<<"$out" || fail "validate does not warn: $out"
out=$($L train "${LONG[@]}" 2>&1) && grep -qF "$want" <<<"$out" || fail "train does not warn: $out"
out=$($L validate --config configs/test-tiny-gpt2.json --set data.path="$W/d" 2>&1 >/dev/null) || fail "validate: $out"
grep -q "warmup" <<<"$out" && fail "validate warns about a warmup within the run: $out"
echo "ok: a warmup past the run is warned about"

# The start-of-run lines on how much data the run reads. 100 documents of 11 tokens ("abcdefghi\n"
# and the end-of-document token); data.split 90,10: train 90 documents = 990 tokens, samples of
# S + 1 = 17 tokens overlapping by one: floor(989 / 16) = 61 per epoch; valid 110 tokens: 6.
# 8 steps × global batch 4 = 32 samples = 0.525 epochs; an evaluation of 3 × 4 = 12 samples reads
# the valid split twice: warned, naming the most eval_iters that fit (6 / 4 -> 1).
for i in $(seq 100); do echo '{"text": "abcdefghi\n"}'; done >"$W/fixed.jsonl"
$L data prepare --input "$W/fixed.jsonl" --output-prefix "$W/fixed" >/dev/null 2>&1 || fail "data prepare"
out=$($L train --config configs/test-tiny-gpt2.json --set data.path="$W/fixed" --set data.split=90,10 \
  --set training.train_iters=8 --set training.eval_interval=4 --set training.eval_iters=3 2>&1) || fail "train: $out"
for want in "data: the run reads 32 train samples (training.train_iters 8 × global batch 4): 61 samples of 17 tokens per epoch, 0.525 epochs" \
  "data: each evaluation reads 12 validation samples (training.eval_iters 3 × global batch 4): 6 samples of 17 tokens per epoch, 2 epochs" \
  "an evaluation reads its validation split 2 times over" "lower training.eval_iters to 1 or fewer"; do
  grep -qF -- "$want" <<<"$out" || fail "the log lacks '$want': $(grep -i "data:\|warn" <<<"$out")"
done
out=$($L validate --config configs/test-tiny-gpt2.json --set data.path="$W/fixed" --set data.split=90,10 \
  --set training.train_iters=8 2>&1) || fail "validate: $out"
grep -qF "data: the run reads 32 train samples" <<<"$out" || fail "validate lacks the data line: $out"
grep -q "times over" <<<"$out" && fail "a warning without evaluation: $out"
echo "ok: the data lines count samples and epochs"
# The batch line: global batch 4 = 4 / (micro-batch 2 × data 1) = 2 micro-batches; 4 × seq 16 = 64 tokens.
grep -qF "batch: global batch 4 = 2 micro-batch(es) of 2 × data-parallel 1; 64 tokens per step" "$W/train.log" ||
  fail "no batch line: $(head -20 "$W/train.log")"
echo "ok: the batch line"
# Data-parallel settings on a layout without data parallelism: each said to have no effect.
out=$($L train --config configs/test-tiny-gpt2.json --set data.path="$W/d" --set training.train_iters=2 \
  --set parallel.distributed_optimizer=true --set parallel.grad_reduce_dtype=bf16 2>&1) || fail "train: $out"
for want in "parallel.distributed_optimizer has no effect with one data-parallel rank" \
  "parallel.grad_reduce_dtype bf16 has no effect with one data-parallel rank"; do
  grep -qF "$want" <<<"$out" || fail "no warning '$want': $out"
done
grep -q "has no effect" "$W/train.log" && fail "a no-effect warning without those settings"
echo "ok: data-parallel settings without data parallelism are named"
echo PASS
