#!/usr/bin/env bash
# logging.tensorboard_dir end to end: the tiny GPT-2 trains with validation, stops after step 6,
# a killed run's debris (garbage, a truncated record) is appended to its event file, and a DP2 job
# resumes from the step-4 checkpoint (repeating steps 5 and 6). The tensorboard package's own
# reader must then see every scalar of the metrics file, step by step, in one continued curve.
set -euo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset

tb=$WORK/tb
metrics=$WORK/metrics.jsonl
common=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set training.train_iters=12
        --set training.eval_interval=3 --set training.eval_iters=2 --set logging.log_interval=2
        --set logging.metrics_file="$metrics" --set logging.tensorboard_dir="$tb"
        --set logging.peak_gflops=10 --set checkpoint.dir="$WORK/ckpt" --set checkpoint.save_interval=4)

timeout 120 $LATTICE train "${common[@]}" --set training.exit_interval=6 >"$WORK/job1.log" 2>&1 ||
  { tail -20 "$WORK/job1.log"; fail "job 1"; }
first=$(ls "$tb"/events.out.tfevents.*)
[[ $(wc -l <<<"$first") -eq 1 ]] || fail "job 1 wrote $(wc -l <<<"$first") event files"
grep -q "tensorboard $first" "$WORK/job1.log" || fail "the run summary does not name $first"
# A killed run's end: bytes that are no record, then a record header promising 100 bytes that
# never come.
printf 'garbage\n' >>"$first"
printf '\x64\x00\x00\x00\x00\x00\x00\x00\x01\x02\x03\x04partial' >>"$first"
before=$(md5sum "$first")

timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE train "${common[@]}" \
  --set parallel.data=2 --set checkpoint.load="$WORK/ckpt/iter_0000004" >"$WORK/job2.log" 2>&1 ||
  { tail -20 "$WORK/job2.log"; fail "job 2"; }
[[ $(md5sum "$first") == "$before" ]] || fail "job 2 changed the first run's event file"

python3 tests/cli/verify_tensorboard.py "$tb" "$metrics" 2
echo "ok: tensorboard"
