#!/usr/bin/env bash
# kill -9 of one rank in the middle of an asynchronous checkpoint write, then a restart: the
# restarted job resumes from the previous complete checkpoint and ends bit-identical to a run that
# was never interrupted.
#
# PP2 (2 ranks), tiny GPT-2, 20 steps, a save every 5 steps. The test hook LATTICE_TEST_SLOW_SAVE=
# 10:60 (checkpoint_writer.cc; read nowhere else) pauses the background write of step 10's shards
# for 60 s after their headers, so the kill lands mid-write deterministically: training goes on
# (steps 11..15 run while the write is in flight) and blocks at step 15's save, which waits for the
# previous one; then rank 1 gets SIGKILL. Afterwards latest must still name iter_0000005, step 10
# must exist only as iter_0000010.partial (never loaded: auto, export and an explicit path refuse
# or skip it), and the restart (checkpoint.load auto) must resume at step 5, clear the .partial at
# its first commit, and match the uninterrupted run at every step it logged, before and after the
# kill (compare_resumed.py), with byte-identical final parameters.
source tests/checkpoint/resume_lib.sh

common=(train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=20
        --set parallel.pipeline=2)
run 2 "$WORK/full.log" "${common[@]}" --set logging.metrics_file="$WORK/full.jsonl" --export "$WORK/full"

ckpt=(--set checkpoint.dir="$WORK/ckpt" --set checkpoint.save_interval=5 --set logging.metrics_file="$WORK/run.jsonl")
LATTICE_TEST_SLOW_SAVE=10:60 timeout 120 mpirun --allow-run-as-root --oversubscribe -x LATTICE_TEST_SLOW_SAVE -np 2 \
  $LATTICE "${common[@]}" "${ckpt[@]}" >"$WORK/killed.log" 2>&1 </dev/null &
job=$!

# Both ranks are inside step 10's write (their .tmp shard files exist) and rank 0 has logged step 15,
# whose save now waits for that write.
for _ in $(seq 600); do
  tmp=$(ls "$WORK/ckpt/iter_0000010.partial/" 2>/dev/null | grep -c '\.tmp$' || true)
  [[ $tmp -eq 2 ]] && grep -q '"step":15,' "$WORK/run.jsonl" 2>/dev/null && break
  kill -0 $job 2>/dev/null || { cat "$WORK/killed.log"; fail "the job ended before the kill"; }
  sleep 0.1
done
[[ $tmp -eq 2 ]] || { cat "$WORK/killed.log"; fail "the step 10 write never started on both ranks"; }
victim=$(rank_pid 1) || fail "rank 1 of the job not found"
kill -9 "$victim"
rc=0
wait $job || rc=$?
[[ $rc -ne 0 ]] || fail "the job survived the kill of rank 1"
grep -q "pausing the write of step 10" "$WORK/killed.log" || fail "the test hook did not pause the write"
echo "killed rank 1 (pid $victim) during the step 10 write; mpirun exited $rc"

[[ $(cat "$WORK/ckpt/latest") == iter_0000005 ]] || fail "latest is $(cat "$WORK/ckpt/latest") after the kill"
[[ -d $WORK/ckpt/iter_0000010.partial && ! -e $WORK/ckpt/iter_0000010 ]] || fail "step 10 is not a bare .partial: $(ls "$WORK/ckpt")"
out=$($LATTICE export --checkpoint "$WORK/ckpt" --output "$WORK/export5" 2>&1) || fail "export of latest: $out"
grep -q "step 5," <<<"$out" || fail "export took another checkpoint than step 5: $out"
expect_exit2 "never committed" $LATTICE "${common[@]}" --set parallel.pipeline=1 \
  --set checkpoint.load="$WORK/ckpt/iter_0000010.partial"

run 2 "$WORK/resumed.log" "${common[@]}" "${ckpt[@]}" --export "$WORK/resumed"
grep -q "resumed from $WORK/ckpt/iter_0000005: step 5" "$WORK/resumed.log" || fail "the restart did not resume at step 5"
[[ -z $(cd "$WORK/ckpt" && ls -d ./*.partial 2>/dev/null) ]] || fail "the .partial outlived the next commit: $(ls "$WORK/ckpt")"
[[ $(cat "$WORK/ckpt/latest") == iter_0000020 ]] || fail "latest is not iter_0000020"
python3 tests/checkpoint/compare_resumed.py "$WORK/full.jsonl" "$WORK/run.jsonl" "$WORK/full" "$WORK/resumed"
echo PASS
