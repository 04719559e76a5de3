#!/usr/bin/env bash
# `lattice export --checkpoint`: a TP2 checkpoint (saved under mpirun -np 2) of a config's seeded
# initialization exports to the same Hugging Face files as `lattice export --config` (GPT-2 and
# Llama); a --config that differs from the checkpoint's model, a corrupt shard, a missing
# checkpoint and no source at all end with exit 2 and a message naming the field or file; so does a
# --set without --config that changes the checkpoint's model.
set -uo pipefail
source tests/parallel/mpi_env.sh
export OMP_NUM_THREADS=1
L=trainer/lattice
fail() { echo "FAIL: $*"; exit 1; }

expect_exit2() {  # expect_exit2 "needle" cmd...
  local needle=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  [[ $rc -eq 2 ]] || fail "exit $rc (want 2) from: $* -- $out"
  grep -qF -- "$needle" <<<"$out" || fail "message lacks '$needle': $out"
}

for name in test-tiny-gpt2 test-tiny-llama; do
  cfg=configs/$name.json
  d=$TEST_TMPDIR/$name
  timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 tests/checkpoint/write_tp_checkpoint "$cfg" "$d/ckpt" ||
    fail "write_tp_checkpoint $cfg"
  [[ -f $d/ckpt/iter_0000010/metadata.json && -f $d/ckpt/iter_0000010/rank_00001.safetensors ]] || fail "no TP2 checkpoint"
  $L export --checkpoint "$d/ckpt" --format hf --output "$d/from_ckpt" || fail "export --checkpoint $name"
  $L export --config "$cfg" --output "$d/from_config" || fail "export --config $name"
  cmp "$d/from_ckpt/model.safetensors" "$d/from_config/model.safetensors" || fail "$name: weights differ"
  cmp "$d/from_ckpt/config.json" "$d/from_config/config.json" || fail "$name: config.json differs"
  # An explicit iteration directory and a matching --config work too.
  $L export --checkpoint "$d/ckpt/iter_0000010" --config "$cfg" --output "$d/again" || fail "export with --config"
  cmp "$d/again/model.safetensors" "$d/from_config/model.safetensors" || fail "$name: iter dir export differs"
done

d=$TEST_TMPDIR/test-tiny-gpt2
expect_exit2 "model.hidden_size: checkpoint 32, config 64" \
  $L export --checkpoint "$d/ckpt" --config configs/test-tiny-gpt2.json --set model.hidden_size=64 --output "$d/x"
# The advice is one that export takes (not checkpoint.load, a training key).
expect_exit2 "drop --config (the checkpoint carries its own model config)" \
  $L export --checkpoint "$d/ckpt" --config configs/test-tiny-gpt2.json --set model.hidden_size=64 --output "$d/x"
out=$($L export --checkpoint "$d/ckpt" --config configs/test-tiny-gpt2.json --set model.hidden_size=64 --output "$d/x" 2>&1)
grep -q "checkpoint.load" <<<"$out" && fail "export advises checkpoint.load, a training key: $out"
# --set without --config edits the checkpoint's own config: a model field that differs, or an unknown
# key, is refused (it was silently ignored); one equal to the checkpoint's is taken.
expect_exit2 "model.hidden_size: checkpoint 32, config 64" \
  $L export --checkpoint "$d/ckpt" --set model.hidden_size=64 --output "$d/x"
expect_exit2 "model.bogus" $L export --checkpoint "$d/ckpt" --set model.bogus=64 --output "$d/x"
[[ ! -e $d/x ]] || fail "a refused export wrote $d/x"
$L export --checkpoint "$d/ckpt" --set model.hidden_size=32 --output "$d/same" || fail "export --set of the same value"
cmp "$d/same/model.safetensors" "$d/from_ckpt/model.safetensors" || fail "export --set of the same value differs"
# Data that is not found from here (a relative data.path read elsewhere) is named, not taken for data
# without a tokenizer record.
out=$($L export --checkpoint "$d/ckpt" --set data.path=no/such/prefix --output "$d/no_tokenizer" 2>&1) ||
  fail "export with data not found: $out"
grep -qF "the data 'no/such/prefix' is not found from $PWD" <<<"$out" || fail "no reason for the missing tokenizer: $out"
expect_exit2 "does not exist" $L export --checkpoint "$TEST_TMPDIR/nowhere" --output "$d/x"
expect_exit2 "needs --config" $L export --output "$d/x"
shard=$d/ckpt/iter_0000010/rank_00000.safetensors
printf '\x01' | dd of="$shard" bs=1 seek=200 conv=notrunc status=none
expect_exit2 "$shard" $L export --checkpoint "$d/ckpt" --output "$d/x"
expect_exit2 "fails its checksum" $L export --checkpoint "$d/ckpt" --output "$d/x"
[[ ! -e $d/x ]] || fail "a failed export wrote $d/x"
echo "PASS"
