#!/usr/bin/env bash
# Data parallelism end to end through `lattice train`: the tiny GPT-2 and Llama configs trained
# 20 steps by one process (no mpirun), by mpirun -np 2 (DP2, all_reduce + AdamW on every rank) and
# by mpirun -np 4 with the distributed optimizer (DP4, reduce_scatter + ZeRO-1; micro-batch 1 so
# that global batch 4 splits into 4 ranks) must give the same loss and grad norm at every step and
# the same exported parameters (compare_dp_runs.py, relative 1e-5).
set -euo pipefail
source tests/parallel/train_test_env.sh
STEPS=20
MPIRUN=(timeout 120 mpirun --allow-run-as-root --oversubscribe)

prepare_tiny_dataset

for config in test-tiny-gpt2 test-tiny-llama; do
  common=(train --config configs/$config.json --set data.path="$WORK/tiny" --set training.train_iters=$STEPS)
  timeout 120 $LATTICE "${common[@]}" --set logging.metrics_file="$WORK/$config-1.jsonl" --export "$WORK/$config-1"
  "${MPIRUN[@]}" -np 2 $LATTICE "${common[@]}" --set logging.metrics_file="$WORK/$config-dp2.jsonl" \
    --export "$WORK/$config-dp2"
  "${MPIRUN[@]}" -np 4 $LATTICE "${common[@]}" --set training.micro_batch_size=1 \
    --set parallel.distributed_optimizer=true --set logging.metrics_file="$WORK/$config-dp4.jsonl" \
    --export "$WORK/$config-dp4"
  python3 tests/parallel/compare_dp_runs.py $STEPS "$WORK/$config-1.jsonl" "$WORK/$config-1" \
    "$WORK/$config-dp2.jsonl" "$WORK/$config-dp2" "$WORK/$config-dp4.jsonl" "$WORK/$config-dp4"
  echo "ok: $config"
done
