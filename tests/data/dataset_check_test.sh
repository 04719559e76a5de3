#!/usr/bin/env bash
# Datasets are checked when `validate` and `train` start, not when a bad sample comes up: a token id
# >= model.vocab_size in a document a short run never reaches ends both with exit 2 naming the file,
# the id and model.vocab_size, before step 1 (one process and under mpirun, blends included); a
# missing dataset fails `validate`, and so does a split too small for one sample. The largest id is cached in PREFIX.stats.json (written by
# `data prepare`, else by the first check), reused, and read again when the dataset changes.
set -euo pipefail
source tests/parallel/mpi_env.sh
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
TEXT=/usr/share/games/fortunes
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE NEEDLE cmd...: the exit code, and NEEDLE in stdout + stderr (kept in $out).
expect() {
  local code=$1 needle=$2 rc
  shift 2
  out=$("$@" 2>&1 </dev/null) && rc=0 || rc=$?
  [[ $rc -eq $code ]] || fail "exit $rc (want $code) from: $* -- $out"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
  echo "ok: exit $code: $needle"
}

# 40 documents of 64 ids below 200, then one holding 300 (model.vocab_size is 257): with the default
# split the last document is in the test split, which training never reads.
python3 -c 'import json, sys
docs = [[(d * 31 + j * 7) % 200 for j in range(64)] for d in range(40)] + [[5, 300, 7]]
json.dump(docs, open(sys.argv[1], "w"))' "$WORK/tokens.json"
python3 tests/data/write_indexed_dataset.py --prefix "$WORK/bad" --tokens "$WORK/tokens.json"
cfg=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/bad" --set training.train_iters=3)
too_big="data.path \"$WORK/bad\": dataset file '$WORK/bad.bin' holds token id 300 (its largest), but model.vocab_size is 257"

expect 2 "$too_big" $LATTICE validate "${cfg[@]}"
grep -qF "read 2563 token ids" <<<"$out" || fail "the first check did not read the ids: $out"
expect 2 "$too_big" $LATTICE train "${cfg[@]}" --set logging.metrics_file="$WORK/m.jsonl"
grep -q "step " <<<"$out" && fail "train started steps: $out"
[[ ! -e $WORK/m.jsonl ]] || fail "train got as far as the metrics file"
expect 2 "$too_big" timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE train "${cfg[@]}" \
  --set parallel.data=2
expect 0 "config OK" $LATTICE validate "${cfg[@]}" --set model.vocab_size=301

# The cache: reused (a doctored max id is believed, so nothing was read), then invalidated by a
# rewritten .bin (new mtime).
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["max_token_id"] == 300, j' "$WORK/bad.stats.json"
expect 2 "$too_big" $LATTICE validate "${cfg[@]}"
grep -qF "token ids in" <<<"$out" && fail "the cached stats were not used: $out"
python3 -c 'import json, sys; p = sys.argv[1]; j = json.load(open(p)); j["max_token_id"] = 100
json.dump(j, open(p, "w"))' "$WORK/bad.stats.json"
expect 0 "config OK" $LATTICE validate "${cfg[@]}"
sleep 0.1  # file times are as coarse as the kernel tick
python3 tests/data/write_indexed_dataset.py --prefix "$WORK/bad" --tokens "$WORK/tokens.json"
expect 2 "$too_big" $LATTICE validate "${cfg[@]}"
grep -qF "read 2563 token ids" <<<"$out" || fail "a changed dataset was not read again: $out"

# A place where the cache cannot be written (here its name is taken by a directory): the ids are read
# and checked all the same, and the run goes on.
mkdir -p "$WORK/nocache/bad.stats.json/taken"
cp "$WORK/bad.bin" "$WORK/bad.idx" "$WORK/nocache/"
expect 0 "cannot cache the dataset stats in $WORK/nocache/bad.stats.json" $LATTICE validate "${cfg[@]}" \
  --set data.path="$WORK/nocache/bad" --set model.vocab_size=301
expect 2 "holds token id 300" $LATTICE validate "${cfg[@]}" --set data.path="$WORK/nocache/bad"

# Missing files: validate names them; an empty data.path is still fine for validate.
expect 2 "dataset file '$WORK/nowhere.bin' not found" $LATTICE validate "${cfg[@]}" --set data.path="$WORK/nowhere"
expect 0 "config OK" $LATTICE validate "${cfg[@]}" --set data.path=

# data prepare records the largest id (256, the end-of-document token); validate reads nothing.
$LATTICE data prepare --input "$TEXT/fortunes" --output-prefix "$WORK/fortunes" \
  --text-document-separator percent-line >/dev/null 2>&1
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["max_token_id"] == 256, j' \
  "$WORK/fortunes.stats.json"
expect 2 "data.blend[1][1] \"$WORK/bad\": dataset file '$WORK/bad.bin' holds token id 300" $LATTICE validate \
  "${cfg[@]}" --set data.path= --set "data.blend=[[1, \"$WORK/fortunes\"], [1, \"$WORK/bad\"]]"
expect 0 "config OK" $LATTICE validate "${cfg[@]}" --set data.path="$WORK/fortunes"
grep -qF "token ids in" <<<"$out" && fail "validate read a prepared dataset's ids: $out"
expect 2 "holds token id 256 (its largest), but model.vocab_size is 200" $LATTICE validate "${cfg[@]}" \
  --set data.path="$WORK/fortunes" --set model.vocab_size=200

# validate builds the splits a run samples: one too small for a sample is the error train would give
# at its start (41 documents, the last 2 in the valid split: 64 + 3 ids, against 129 tokens a sample).
expect 2 "the valid split of dataset $WORK/bad (documents [39, 41) of 41, data.split) has 67 tokens, fewer than seq_length + 1 = 129" \
  $LATTICE validate "${cfg[@]}" --set model.vocab_size=301 --set model.seq_length=128 --set training.eval_interval=1 \
  --set data.split=95,5,0
expect 0 "the train and valid splits each hold a sample" $LATTICE validate "${cfg[@]}" --set model.vocab_size=301 \
  --set training.eval_interval=1 --set data.split=95,5,0
echo PASS
