#!/usr/bin/env bash
# `lattice data batch`: with data.shuffle false, step N's batch is the documented contract — sample
# k = tokens [k·S, k·S+S+1) of the training split, global batch g = samples [g·B, (g+1)·B) —
# computed here independently from the documents' bytes; valid batches come from the valid split;
# a step outside the run exits 2 naming the limit; with shuffling the batch is another one.
set -uo pipefail
L=trainer/lattice
W=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "FAIL: $*"; exit 1; }

# 100 distinct documents (byte tokenizer: each byte is its token, 256 ends a document).
for i in $(seq 100); do echo "{\"text\": \"doc $i says hello\"}"; done >"$W/d.jsonl"
$L data prepare --input "$W/d.jsonl" --output-prefix "$W/d" >/dev/null 2>&1 || fail "data prepare"
args=(--config configs/test-tiny-gpt2.json --set data.path="$W/d" --set data.split=90,10 --set data.shuffle=false)
$L data batch "${args[@]}" --step 3 >"$W/train.jsonl" 2>"$W/err" || fail "data batch: $(cat "$W/err")"
$L data batch "${args[@]}" --set training.eval_interval=5 --step 2 --split valid >"$W/valid.jsonl" 2>"$W/err" || fail "valid: $(cat "$W/err")"
python3 - "$W/train.jsonl" "$W/valid.jsonl" <<'PY' || fail "the batch is not the documented contract"
import json, sys
docs = [list(f"doc {i} says hello".encode()) + [256] for i in range(1, 101)]
stream = lambda ds: [t for d in ds for t in d]
S, B = 16, 4  # configs/test-tiny-gpt2.json: seq_length 16, global_batch_size 4
for path, split, step in ((sys.argv[1], docs[:90], 3), (sys.argv[2], docs[90:], 2)):
    rows = [json.loads(l) for l in open(path)]
    assert [r["row"] for r in rows] == list(range(B)), rows
    for r in rows:
        k = (step - 1) * B + r["row"]
        assert r["step"] == step and r["sample"] == k, r
        assert r["tokens"] == stream(split)[k * S:k * S + S + 1], (path, r)
print("ok: train step 3 and valid batch 2 are the contract's samples")
PY
out=$($L data batch "${args[@]}" --step 21 2>&1) && fail "step past train_iters accepted"
grep -qF -- "--step 21: training runs 20 steps (training.train_iters)" <<<"$out" || fail "step 21: $out"
out=$($L data batch "${args[@]}" --split valid --step 1 --set training.eval_interval=0 2>&1) && fail "valid without eval"
grep -qF "training.eval_interval is 0" <<<"$out" || fail "valid without evaluation: $out"
$L data batch "${args[@]}" --step 3 --set data.shuffle=true >"$W/shuffled.jsonl" 2>"$W/err" || fail "shuffled: $(cat "$W/err")"
cmp -s "$W/train.jsonl" "$W/shuffled.jsonl" && fail "data.shuffle true gave the unshuffled batch"
echo PASS
