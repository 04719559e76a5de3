#!/usr/bin/env bash
# What a resume says through `lattice train`: a checkpoint already at training.train_iters says
# "nothing left to train" (not "continues at step 21 of 20"), reports no throughput (nor writes one) and leaves the
# trace of the run that trained; a resume under another learning-rate
# schedule (training.train_iters, optimizer.lr) warns naming the changed fields and the learning
# rate of the next step under both schedules; an unchanged resume does not warn.
source tests/checkpoint/resume_lib.sh

common=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20
  --set checkpoint.dir="$WORK/ckpt")
run 1 "$WORK/first.log" "${common[@]}" --set training.exit_interval=10  # saves and stops after step 10
run 1 "$WORK/rest.log" "${common[@]}" --set logging.trace_file="$WORK/trace.json"
grep -qF "training continues at step 11 of 20" "$WORK/rest.log" || fail "no resume line: $(cat "$WORK/rest.log")"
grep -q "learning-rate schedule" "$WORK/rest.log" && fail "a schedule warning without a change"

trace_before=$(md5sum <"$WORK/trace.rank0.json")
run 1 "$WORK/done.log" "${common[@]}" --set logging.trace_file="$WORK/trace.json" \
  --set logging.metrics_file="$WORK/done.jsonl"
# Nothing trained: no throughput of 0 tokens/s (not in the log, not in the metrics' summary, which
# TensorBoard and report read), and the trace of the run that trained is kept.
grep -qF "throughput: not measured" "$WORK/done.log" || fail "no 'not measured' throughput: $(cat "$WORK/done.log")"
summary=$(grep '"summary"' "$WORK/done.jsonl") || fail "no summary line in the metrics file"
grep -q '"steps":0' <<<"$summary" || fail "the summary does not say 0 steps: $summary"
grep -q 'tokens_per_s\|gflops' <<<"$summary" && fail "a throughput in the summary of a run that trained none: $summary"
[[ $(md5sum <"$WORK/trace.rank0.json") == "$trace_before" ]] || fail "a run with nothing to train replaced the trace"
grep -qF "the checkpoint is at step 20, training.train_iters is 20: nothing left to train" "$WORK/done.log" ||
  fail "no 'nothing left' line: $(cat "$WORK/done.log")"
grep -qF "continues at step 21" "$WORK/done.log" && fail "says it continues past the end: $(cat "$WORK/done.log")"
echo "ok: nothing left to train"

# Stop after step 21 (exit_interval 21): one step under the new schedule.
run 1 "$WORK/longer.log" "${common[@]}" --set training.train_iters=40 --set optimizer.lr=2e-3 \
  --set training.exit_interval=21
for needle in "resuming with another learning-rate schedule than the checkpoint's (training.train_iters 20 -> 40, \
optimizer.lr 0.001 -> 0.002): step 21 trains at lr 1.0500e-03 instead of 1.0000e-04" "training.exit_interval"; do
  grep -qF -- "$needle" "$WORK/longer.log" || fail "lacks '$needle': $(cat "$WORK/longer.log")"
done
echo "ok: schedule change named"
# A longer run with a fixed decay_iters keeps the schedule of the steps both runs train (it adds a
# tail at min_lr): said, not warned about.
fixed=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set optimizer.decay_iters=20
  --set checkpoint.dir="$WORK/ckpt3")
run 1 "$WORK/fixed1.log" "${fixed[@]}" --set training.train_iters=20 --set training.exit_interval=10
run 1 "$WORK/fixed2.log" "${fixed[@]}" --set training.train_iters=40 --set training.exit_interval=12
grep -qF "resuming with training.train_iters 20 -> 40: the learning rate of every step through 20 is the checkpoint's" \
  "$WORK/fixed2.log" || fail "no 'same schedule' line: $(grep -i schedule "$WORK/fixed2.log")"
grep -q "another learning-rate schedule" "$WORK/fixed2.log" && fail "warned about a schedule that did not change"
echo "ok: an extension that keeps the schedule is not warned about"
# checkpoint.load naming an older checkpoint of checkpoint.dir (ckpt3 holds 10 and 12): a restart with
# the same arguments would go back to it, so say so.
run 1 "$WORK/back.log" "${fixed[@]}" --set training.train_iters=40 --set training.exit_interval=11 \
  --set checkpoint.load="$WORK/ckpt3/iter_0000010"
grep -qF "holds later checkpoints, up to iter_0000012: this run goes on from step 11" "$WORK/back.log" ||
  fail "no warning about the later checkpoints: $(grep -i warn "$WORK/back.log")"
grep -qF "holds later checkpoints" "$WORK/fixed2.log" && fail "checkpoint.load auto warned about later checkpoints"
echo "ok: an explicit checkpoint.load below the directory's newest is named"
# model.init_from is not read by a run that resumes: the checkpoint holds its weights (here the file
# is gone by then, as a moved or deleted download would be).
$LATTICE export --config configs/test-tiny-gpt2.json --output "$WORK/init" >/dev/null 2>&1 || fail "export of the init"
initd=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20
  --set checkpoint.dir="$WORK/ckpt4" --set model.init_from="$WORK/init/model.safetensors")
run 1 "$WORK/init1.log" "${initd[@]}" --set training.exit_interval=10
grep -qF "loading weights from $WORK/init/model.safetensors" "$WORK/init1.log" || fail "the first job did not load init_from"
rm -r "$WORK/init"
run 1 "$WORK/init2.log" "${initd[@]}"
grep -qF "model.init_from $WORK/init/model.safetensors is not read: the run resumes from $WORK/ckpt4/iter_0000010" \
  "$WORK/init2.log" || fail "no 'not read' line: $(head -30 "$WORK/init2.log")"
echo "ok: a resumed run does not read model.init_from"
grep -q "other data settings" "$WORK/rest.log" "$WORK/longer.log" && fail "a data warning without a change"

# Another data.split and data.seed: the checkpoint's sample order is not continued; both named, and
# what a changed split does to validation. The same dataset spelt another way is no change.
# (The checkpoint is now at step 21: 21 × 4 samples consumed.)
cp -r "$WORK/ckpt" "$WORK/ckpt2" || fail "copying the checkpoint"
run 1 "$WORK/data.log" "${common[@]}" --set checkpoint.dir="$WORK/ckpt2" --set training.train_iters=40 \
  --set optimizer.lr=2e-3 --set training.exit_interval=22 --set data.split=90,9,1 --set data.seed=99 --set data.path="$WORK/../$(basename "$WORK")/tiny"
for needle in "resuming with other data settings than the checkpoint's (data.split \"949,50,1\" -> \"90,9,1\", data.seed 1234 -> 99): \
its 84 consumed samples now index another sample order" "validation may score documents already trained on"; do
  grep -qF -- "$needle" "$WORK/data.log" || fail "lacks '$needle': $(grep -i warn "$WORK/data.log")"
done
grep -q "data.path" "$WORK/data.log" && fail "the same dataset by another path is named: $(grep -i warn "$WORK/data.log")"
echo "ok: data change named"
echo PASS
