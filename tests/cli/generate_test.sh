#!/usr/bin/env bash
# `lattice generate`, samples during training and the export with the tokenizer, through the CLI:
# data prepare records its tokenizer; a model trained to memorize a sentence regenerates it from its
# prefix (greedy); a seed gives the same text, top-k 1 is greedy; training.sample_interval logs
# samples and leaves the run bit-identical; export (--checkpoint, --config, train --export) writes
# tokenizer files that Hugging Face `tokenizers` loads with the same ids (byte, hf, gpt2-bpe); a blend
# of datasets of different tokenizers and bad flags exit 2 naming them.
set -uo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}  # no BLAS re-exec line
L=trainer/lattice
W=${TEST_TMPDIR:-$(mktemp -d)}
CHECK=tests/cli/hf_tokenizer_check.py
fail() { echo "FAIL: $*"; exit 1; }
expect_exit2() {  # expect_exit2 "needle" cmd...
  local needle=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from: $* -- $out"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
  echo "ok: exit 2 naming '$needle'"
}

# A corpus of one sentence, 200 times: the byte tokenizer is recorded beside the dataset.
SENTENCE="the quick brown fox jumps over the lazy dog"
for i in $(seq 200); do echo "{\"text\": \"$SENTENCE\\n\"}"; done >"$W/fox.jsonl"
$L data prepare --input "$W/fox.jsonl" --output-prefix "$W/fox" >/dev/null 2>&1 || fail "data prepare"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert (r['type'], r['eod_id'], r['vocab_size']) == ('byte', 256, 257), r" \
  "$W/fox.tokenizer.json" || fail "PREFIX.tokenizer.json does not record the byte tokenizer"

TRAIN=(--config configs/test-tiny-gpt2.json --set data.path="$W/fox" --set training.train_iters=150
       --set optimizer.lr=3e-3 --set optimizer.min_lr=3e-4 --set training.micro_batch_size=8
       --set training.global_batch_size=8 --set logging.log_interval=50)
$L train "${TRAIN[@]}" --set checkpoint.dir="$W/plain" --set logging.metrics_file="$W/plain.jsonl" \
  >"$W/plain.log" 2>&1 || fail "train without samples: $(tail -3 "$W/plain.log")"
$L train "${TRAIN[@]}" --set checkpoint.dir="$W/sampled" --set logging.metrics_file="$W/sampled.jsonl" \
  --set training.sample_interval=50 --set training.sample_prompt="the quick" --export "$W/hf_trained" \
  >"$W/sampled.log" 2>&1 || fail "train with samples: $(tail -3 "$W/sampled.log")"
[[ $(grep -c '| sample: "the quick' "$W/sampled.log") -eq 3 ]] || fail "want 3 sample lines: $(grep sample "$W/sampled.log")"
grep -q "sample:" "$W/plain.log" && fail "samples logged with training.sample_interval 0"
# Sampling touches nothing of training: same losses and norms, bit-identical weights and moments.
python3 - "$W/plain.jsonl" "$W/sampled.jsonl" <<'PY' || fail "losses differ with sampling on"
import json, sys
a, b = ([(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "loss" in r] for p in sys.argv[1:])
assert len(a) == 150 and a == b, (a[:3], b[:3])
PY
cmp "$W/plain/iter_0000150/rank_00000.safetensors" "$W/sampled/iter_0000150/rank_00000.safetensors" ||
  fail "the checkpoint differs with sampling on"
echo "ok: training.sample_interval logs samples, losses and checkpoint unchanged"

# The memorized sentence comes back from its prefix (greedy), through the data's recorded tokenizer.
got=$($L generate --checkpoint "$W/plain" --prompt "the quick brown" --temperature 0 2>"$W/gen.log")
[[ $got == "$SENTENCE" ]] || fail "greedy generation gave '$got' (log: $(cat "$W/gen.log"))"
grep -q "ending at the end-of-document token" "$W/gen.log" || fail "generation did not stop at the end of the document"
echo "ok: the memorized sentence regenerates from its prefix"
# A seed gives the same text; top-k 1 is greedy whatever the seed and temperature.
G=($L generate --checkpoint "$W/plain" --prompt "the" -n 40)
a=$("${G[@]}" --seed 7 2>/dev/null) && b=$("${G[@]}" --seed 7 2>/dev/null) || fail "generate --seed"
[[ -n $a && $a == "$b" ]] || fail "seed 7 gave '$a' then '$b'"
greedy=$("${G[@]}" --temperature 0 2>/dev/null)
for s in 1 2 3; do
  k1=$("${G[@]}" --top-k 1 --temperature 2 --seed $s 2>/dev/null)
  [[ $k1 == "$greedy" ]] || fail "top-k 1 seed $s gave '$k1', greedy '$greedy'"
done
echo "ok: a seed repeats its text; top-k 1 equals greedy"

# Export with the tokenizer: byte (train --export and export --checkpoint), hf and gpt2-bpe.
for d in "$W/hf_trained" "$W/hf_ckpt"; do
  [[ $d == "$W/hf_ckpt" ]] && { $L export --checkpoint "$W/plain" --output "$d" >/dev/null 2>&1 || fail "export --checkpoint"; }
  python3 "$CHECK" verify "$d" "$W/fox" "$W/fox.jsonl" || fail "byte tokenizer export $d"
done
python3 "$CHECK" train "$W/bpe" || fail "training a reference BPE with tokenizers"
for t in hf gpt2-bpe; do
  files=(--tokenizer-file "$W/bpe/tokenizer.json")
  [[ $t == gpt2-bpe ]] && files=(--vocab-file "$W/bpe/vocab.json" --merges-file "$W/bpe/merges.txt")
  $L data prepare --input "$W/bpe/corpus.jsonl" --output-prefix "$W/$t" --tokenizer $t "${files[@]}" >/dev/null 2>&1 ||
    fail "data prepare --tokenizer $t"
  $L export --config configs/test-tiny-gpt2.json --set data.path="$W/$t" --set model.vocab_size=320 \
    --output "$W/hf_$t" >/dev/null 2>&1 || fail "export --config with $t data"
  python3 "$CHECK" verify "$W/hf_$t" "$W/$t" "$W/bpe/corpus.jsonl" || fail "$t tokenizer export"
  out=$($L generate --config configs/test-tiny-gpt2.json --set data.path="$W/$t" --set model.vocab_size=320 \
    --prompt "héllo" -n 8 2>&1) || fail "generate with the recorded $t tokenizer: $out"
  grep -q "tokenizer: $t ($W/$t.tokenizer.json" <<<"$out" || fail "generate did not use the recorded $t tokenizer: $out"
done
# Exported over a folder holding another kind of tokenizer (hf's tokenizer.json, which AutoTokenizer
# would prefer): that goes, said so, and the folder loads as the new export. generation_config.json
# carries the new ids too.
cp -r "$W/hf_hf" "$W/hf_over"
echo '{"bos_token_id": 1, "eos_token_id": 2}' >"$W/hf_over/generation_config.json"
out=$($L export --config configs/test-tiny-gpt2.json --set data.path="$W/gpt2-bpe" --set model.vocab_size=320 \
  --output "$W/hf_over" 2>&1) || fail "export over another tokenizer: $out"
grep -qF "removed tokenizer.json from '$W/hf_over', an earlier save's tokenizer" <<<"$out" || fail "no removal said: $out"
python3 "$CHECK" verify "$W/hf_over" "$W/gpt2-bpe" "$W/bpe/corpus.jsonl" || fail "gpt2-bpe export over an hf one"
python3 - "$W/hf_over" <<'PY' || fail "generation_config.json / config.json ids"
import json, sys
gen = json.load(open(sys.argv[1] + "/generation_config.json"))
cfg = json.load(open(sys.argv[1] + "/config.json"))
assert gen["eos_token_id"] == cfg["eos_token_id"] == gen["bos_token_id"] != 2, (gen, cfg)
PY
# Without a tokenizer record: ids null (not transformers' defaults), and the files left there named.
out=$($L export --config configs/test-tiny-gpt2.json --set data.path= --set model.vocab_size=320 \
  --output "$W/hf_over" 2>&1) || fail "export without data: $out"
grep -qF "holds vocab.json, merges.txt that this export did not write" <<<"$out" || fail "leftover tokenizer not named: $out"
python3 - "$W/hf_over" <<'PY' || fail "null ids without a tokenizer"
import json, sys
for name in ("config.json", "generation_config.json"):
    j = json.load(open(sys.argv[1] + "/" + name))
    assert j["eos_token_id"] is None and j["bos_token_id"] is None, (name, j)
PY
echo "ok: an export over an earlier save leaves no other tokenizer or generation ids to load"

# A blend of datasets tokenized differently would give one id two meanings: refused, naming both.
expect_exit2 "data.blend mixes datasets of different tokenizers: data.blend[0][1] \"$W/fox\" was prepared with the byte" \
  $L validate --config configs/test-tiny-gpt2.json --set data.path= --set model.vocab_size=320 \
  --set "data.blend=[[0.5, \"$W/fox\"], [0.5, \"$W/hf\"]]"
$L validate --config configs/test-tiny-gpt2.json --set data.path= --set model.vocab_size=320 \
  --set "data.blend=[[0.5, \"$W/hf\"], [0.5, \"$W/hf\"]]" >/dev/null 2>&1 || fail "a blend of one tokenizer refused"
# A dataset without a record (Megatron-LM's) is trusted: the blend generates with the other's record.
cp "$W/hf.bin" "$W/megatron.bin" && cp "$W/hf.idx" "$W/megatron.idx" || fail "copying a dataset"
out=$($L generate --config configs/test-tiny-gpt2.json --set data.path= --set model.vocab_size=320 \
  --set "data.blend=[[0.5, \"$W/megatron\"], [0.5, \"$W/hf\"]]" --prompt "héllo" -n 2 2>&1) ||
  fail "generate with a blend of an unrecorded dataset: $out"
grep -qF "tokenizer: hf ($W/hf.tokenizer.json" <<<"$out" || fail "the blend's recorded tokenizer was not used: $out"
echo "ok: a blend of recorded and unrecorded datasets uses the record"

# A tokenizer whose vocabulary lacks a byte of the prompt drops it: generate says what the model sees.
python3 - "$W/bpe/tokenizer.json" "$W/noq.json" <<'PY' || fail "writing a tokenizer without Q"
import json, sys
t = json.load(open(sys.argv[1]))
del t["model"]["vocab"]["Q"]
pairs = lambda m: m.split(" ") if isinstance(m, str) else m
t["model"]["merges"] = [m for m in t["model"]["merges"] if not any("Q" in p for p in pairs(m))]
json.dump(t, open(sys.argv[2], "w"))
PY
out=$($L generate --config configs/test-tiny-gpt2.json --set data.path="$W/hf" --set model.vocab_size=320 \
  --tokenizer hf --tokenizer-file "$W/noq.json" --prompt "Quiz" -n 2 2>&1) || fail "generate without Q: $out"
grep -qF 'cannot represent the prompt exactly' <<<"$out" && grep -qF 'the model continues "uiz"' <<<"$out" ||
  fail "no warning of the dropped byte: $out"
out=$($L generate --config configs/test-tiny-gpt2.json --set data.path="$W/hf" --set model.vocab_size=320 \
  --prompt "Quiz" -n 2 2>&1) || fail "generate: $out"
grep -q "cannot represent" <<<"$out" && fail "a warning for a prompt the tokenizer represents: $out"
echo "ok: a prompt byte the tokenizer lacks is named"

# A checkpoint records its data.path absolutely: generate reads the data's tokenizer from any
# directory. A dataset that is not there is an error naming it, not a silent byte tokenizer.
LA=$PWD/$L
(cd "$W" && "$LA" train --config "$OLDPWD/configs/test-tiny-gpt2.json" --set data.path=hf --set model.vocab_size=320 \
  --set training.train_iters=2 --set checkpoint.dir=relative_ckpt >"$W/rel.log" 2>&1) || fail "train: $(tail -3 "$W/rel.log")"
out=$(cd / && "$LA" generate --checkpoint "$W/relative_ckpt" --prompt "héllo" -n 2 2>&1) || fail "generate from /: $out"
grep -qF "tokenizer: hf ($W/hf.tokenizer.json" <<<"$out" || fail "generate from / lost the recorded tokenizer: $out"
echo "ok: a checkpoint trained on a relative data.path generates with its tokenizer from another directory"
expect_exit2 "data.path \"nope\": no dataset there" $L generate --checkpoint "$W/relative_ckpt" --set data.path=nope

# Mistakes exit 2 and name the flag or field.
C=(--checkpoint "$W/plain")
expect_exit2 "--temperature" $L generate "${C[@]}" --temperature -1
expect_exit2 "--top-k" $L generate "${C[@]}" --top-k -1
expect_exit2 "--max-new-tokens" $L generate "${C[@]}" --max-new-tokens 0
expect_exit2 "--seed" $L generate "${C[@]}" --seed x
# NaN passes a range check (every comparison with it is false) and -1 converts to 2^64 - 1: both refused.
for t in nan -nan inf; do
  expect_exit2 "--temperature: '$t' is not a finite number" $L generate "${C[@]}" --temperature $t
done
expect_exit2 "--seed: '-1' is negative: give an integer from 0 to 18446744073709551615" $L generate "${C[@]}" --seed -1
expect_exit2 "--seed: '18446744073709551616' is too large" $L generate "${C[@]}" --seed 18446744073709551616
expect_exit2 "--top-k" $L generate "${C[@]}" --top-k 99999999999999999999
expect_exit2 "--max-new-tokens" $L generate "${C[@]}" --max-new-tokens 99999999999999999999
# The largest seed is a seed: the log names it as given.
$L generate "${C[@]}" --seed 18446744073709551615 -n 2 >/dev/null 2>"$W/seed.log" || fail "--seed 2^64 - 1: $(cat "$W/seed.log")"
grep -q "seed 18446744073709551615)" "$W/seed.log" || fail "--seed 2^64 - 1 not logged: $(cat "$W/seed.log")"
expect_exit2 "--tokenizer" $L generate "${C[@]}" --tokenizer sentencepiece
expect_exit2 "--vocab-file" $L generate "${C[@]}" --tokenizer gpt2-bpe
expect_exit2 "$W/none.json" $L generate "${C[@]}" --tokenizer hf --tokenizer-file "$W/none.json"
expect_exit2 "needs --config" $L generate --prompt x
expect_exit2 "model.vocab_size is 257" $L generate --config configs/test-tiny-gpt2.json --set data.path="$W/hf"
expect_exit2 "training.sample_interval" $L validate --config configs/test-tiny-gpt2.json --world-size 2 \
  --set training.sample_interval=10
expect_exit2 "training.sample_interval" $L train "${TRAIN[@]}" --set training.sample_interval=-1
echo "PASS"
