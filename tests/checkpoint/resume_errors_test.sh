#!/usr/bin/env bash
# A checkpoint that cannot be resumed exactly ends `lattice train` with exit 2 and one message that
# names the file or the fields — and nothing on disk changes (every file and its checksum compared
# before and after). Classes: truncated shard, missing shard, checksum mismatch, damaged
# metadata.json, an LR schedule position that is not the step, `latest` naming a missing directory,
# committed checkpoints without `latest`, an explicit path that does not exist, a different model
# (every differing field named), a global batch size under which the data would not continue at the
# checkpoint's sample; the checksum case again under mpirun -np 2 (MPI_Abort carries the exit code).
# `lattice validate` refuses the checkpoints the resume refuses by their metadata. Also `lattice
# bench`'s --config / --checkpoint choice.
source tests/checkpoint/resume_lib.sh

common=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20)
run 1 "$WORK/make.log" "${common[@]}" --set checkpoint.dir="$WORK/good" --set checkpoint.save_interval=5 \
  --set training.exit_interval=10
[[ $(cat "$WORK/good/latest") == iter_0000010 ]] || fail "no checkpoint to damage"

# case NAME DAMAGE NEEDLE [NP [extra lattice args...]]: a copy of the good checkpoint root, damaged by
# the shell command DAMAGE (run inside the copy), must make the resume fail with exit 2 and NEEDLE.
case_() {
  local name=$1 damage=$2 needle=$3 np=${4:-1}
  shift 4 || shift $#
  local d=$WORK/$name
  cp -a "$WORK/good" "$d"
  (cd "$d" && eval "$damage")
  local before
  before=$(snapshot "$d")
  local cmd=($LATTICE "${common[@]}" --set checkpoint.dir="$d" --set checkpoint.save_interval=5 "$@")
  [[ $np -gt 1 ]] && cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" "${cmd[@]}" --set parallel.data=$np)
  expect_exit2 "$needle" timeout 60 "${cmd[@]}"
  [[ $(snapshot "$d") == "$before" ]] || fail "$name: the failed resume changed $d"
  echo "ok: $name -> exit 2: $needle"
}

shard=iter_0000010/rank_00000.safetensors
case_ truncated "truncate -s -100 $shard" "checkpoint shard '$WORK/truncated/$shard' is"
grep -q "truncated" <<<"$(timeout 60 $LATTICE "${common[@]}" --set checkpoint.dir="$WORK/truncated" 2>&1)" ||
  fail "truncated: the message does not say so"
case_ missing "rm $shard" "checkpoint shard '$WORK/missing/$shard' is missing"
case_ checksum "printf '\\x01' | dd of=$shard bs=1 seek=300 conv=notrunc status=none" \
  "checkpoint shard '$WORK/checksum/$shard' fails its checksum"
case_ metadata "truncate -s 100 iter_0000010/metadata.json" "$WORK/metadata/iter_0000010/metadata.json"
case_ latest "echo iter_0000099 > latest" "iter_0000099"
case_ lr_schedule "python3 -c \"import json; p = 'iter_0000010/metadata.json'; d = json.load(open(p)); \
d.pop('metadata_crc32'); d['lr_schedule']['step'] = 9; json.dump(d, open(p, 'w'), indent=1)\"" \
  "lr_schedule.step is 9 but step is 10"
case_ metadata_crc "python3 -c \"import json; p = 'iter_0000010/metadata.json'; d = json.load(open(p)); \
d['optimizer_step_count'] = 3; json.dump(d, open(p, 'w'), indent=1)\"" "does not match its metadata_crc32"
case_ model "true" "model.hidden_size: checkpoint 32, config 64" 1 --set model.hidden_size=64 \
  --set model.num_attention_heads=8
grep -q "model.num_attention_heads: checkpoint 4, config 8" <<<"$(timeout 60 $LATTICE "${common[@]}" \
  --set checkpoint.dir="$WORK/model" --set model.hidden_size=64 --set model.num_attention_heads=8 2>&1)" ||
  fail "model: not every differing field is named"
case_ batch "true" "set training.global_batch_size to 4" 1 --set training.global_batch_size=8
# Committed checkpoints but no `latest`: not a fresh start (which would overwrite them and let
# keep_last retire them); the message says how to resume, and that works.
case_ no_latest "rm latest" "checkpoint.dir '$WORK/no_latest' holds committed checkpoints (the newest is iter_0000010)" 1 \
  --set checkpoint.save_interval=2 --set checkpoint.keep_last=1
expect_exit2 "(echo iter_0000010 > $WORK/no_latest/latest) or set checkpoint.load=$WORK/no_latest/iter_0000010; to \
start fresh, give this run another checkpoint.dir" $LATTICE "${common[@]}" --set checkpoint.dir="$WORK/no_latest"
echo iter_0000010 >"$WORK/no_latest/latest"
run 1 "$WORK/no_latest.log" "${common[@]}" --set checkpoint.dir="$WORK/no_latest" --set training.exit_interval=12
grep -qF "resumed from $WORK/no_latest/iter_0000010: step 10" "$WORK/no_latest.log" ||
  fail "no_latest: did not resume after \`latest\` was written as advised"
echo "ok: no_latest -> resumed once \`latest\` was written as advised"
case_ checksum_np2 "printf '\\x01' | dd of=$shard bs=1 seek=300 conv=notrunc status=none" "fails its checksum" 2
expect_exit2 "$WORK/nowhere" $LATTICE "${common[@]}" --set checkpoint.load="$WORK/nowhere"
# `lattice validate` runs the resume's checks that read no shard, so a config it passes does not then
# fail at the start of training: the same messages, exit 2; a checkpoint that fits is named.
validate=(validate --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20)
expect_exit2 "model.hidden_size: checkpoint 32, config 64" $LATTICE "${validate[@]}" \
  --set checkpoint.dir="$WORK/model" --set model.hidden_size=64 --set model.num_attention_heads=8
expect_exit2 "set training.global_batch_size to 4" $LATTICE "${validate[@]}" --set checkpoint.dir="$WORK/batch" \
  --set training.global_batch_size=8
expect_exit2 "lr_schedule.step is 9 but step is 10" $LATTICE "${validate[@]}" --set checkpoint.dir="$WORK/lr_schedule"
expect_exit2 "$WORK/nowhere" $LATTICE "${validate[@]}" --set checkpoint.load="$WORK/nowhere"
expect_exit2 "model.init_from: '$WORK/nowhere' not found" $LATTICE "${validate[@]}" --set model.init_from="$WORK/nowhere"
out=$($LATTICE "${validate[@]}" --set checkpoint.dir="$WORK/good" 2>&1) || fail "validate of a checkpoint that fits: $out"
grep -qF "checkpoint: resumes from $WORK/good/iter_0000010 (step 10)" <<<"$out" || fail "validate names no checkpoint: $out"
echo "ok: validate refuses what the resume would refuse"
# checkpoint.load=none in a root that holds checkpoints starts fresh, but says that its saves replace
# theirs; --dtype without --export (the exported weights' dtype, not the training's) is refused
# before anything runs, naming training.precision.
cp -a "$WORK/good" "$WORK/load_none"
run 1 "$WORK/load_none.log" "${common[@]}" --set checkpoint.dir="$WORK/load_none" --set checkpoint.load=none \
  --set training.train_iters=2
grep -qF "checkpoint.load none: starting from step 0 in checkpoint.dir $WORK/load_none, which holds checkpoints up to iter_0000010" \
  "$WORK/load_none.log" || fail "load=none into a root with checkpoints: no warning"
expect_exit2 "train: --dtype bf16 needs --export DIR: it is the exported weights' dtype; to train in bf16 give --set training.precision=bf16" \
  $LATTICE "${common[@]}" --set checkpoint.dir="$WORK/dtype" --dtype bf16
[[ -e "$WORK/dtype" ]] && fail "--dtype without --export created checkpoint.dir"
echo "ok: load=none warns; --dtype without --export is refused"
# lattice bench: --config (training steps) or --checkpoint (the checkpoint benchmark), one of them.
expect_exit2 "needs --config" $LATTICE bench
expect_exit2 "not both" $LATTICE bench --config configs/test-tiny-gpt2.json --checkpoint "$WORK/bench"
echo PASS
