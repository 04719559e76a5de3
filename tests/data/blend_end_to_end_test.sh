#!/usr/bin/env bash
# Through the binary: `lattice data inspect` on a prepared dataset, then `lattice train` on a
# data.blend of two prepared datasets with validation, checking the metrics file (every step,
# data_wait_ms, validation lines) and that data.path + data.blend together is refused.
set -euo pipefail
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }

$LATTICE data prepare --input "$TEXT/fortunes" --output-prefix "$WORK/a" --text-document-separator percent-line
$LATTICE data prepare --input "$TEXT/science" "$TEXT/literature" --output-prefix "$WORK/b" \
  --text-document-separator percent-line

$LATTICE data inspect "$WORK/a" --tokenizer byte --show 2 > "$WORK/inspect.txt"
cat "$WORK/inspect.txt"
grep -q "^dtype:     u16" "$WORK/inspect.txt"
grep -q "^tokens:    [1-9]" "$WORK/inspect.txt"
grep -q "median" "$WORK/inspect.txt"
grep -q "decoded (byte): \"" "$WORK/inspect.txt"

metrics=$WORK/blend.jsonl
$LATTICE train --config configs/test-tiny-gpt2.json \
  --set data.path= --set "data.blend=[[0.7, \"$WORK/a\"], [0.3, \"$WORK/b\"]]" --set data.split=90,10,0 \
  --set training.train_iters=12 --set training.eval_interval=6 --set training.eval_iters=2 \
  --set logging.metrics_file="$metrics" 2>&1 | tee "$WORK/train.log"
grep -q "data wait" "$WORK/train.log"
python3 - "$metrics" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if "loss" in r]
assert [r["step"] for r in train] == list(range(1, 13)), train
for r in train:
    assert math.isfinite(r["loss"]) and r["data_wait_ms"] >= 0 and r["data_wait_ms"] <= r["step_ms"], r
vals = [r for r in rows if "val_loss" in r]
assert [r["step"] for r in vals] == [6, 12], vals
print("ok: blend metrics", train[0]["loss"], "->", train[-1]["loss"], "val", vals[-1]["val_loss"])
PY

set +e
out=$($LATTICE train --config configs/test-tiny-gpt2.json --set data.path="$WORK/a" \
  --set "data.blend=[[1, \"$WORK/b\"]]" 2>&1)
rc=$?
set -e
[[ $rc == 2 ]] || { echo "FAIL: expected exit 2 for data.path + data.blend, got $rc: $out"; exit 1; }
grep -q "data.blend" <<<"$out"
echo "ok: blend end to end"
