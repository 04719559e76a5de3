#!/usr/bin/env bash
# The hidden share of data-parallel communication counts only what compute hides. With one gradient
# bucket the reduction can start only when backward has finished, so nothing hides it: the summary's
# dp_comm_hidden is ~0 (the compute thread's own work to launch and progress it is not "hidden");
# with small buckets, launched while backward goes on, some of it is hidden.
set -uo pipefail
source tests/parallel/train_test_env.sh
export OMP_NUM_THREADS=1
prepare_tiny_dataset
for buckets in one many; do
  size=1000
  [[ $buckets == many ]] && size=0.002
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 $LATTICE train --config configs/test-tiny-gpt2.json \
    --set data.path="$WORK/tiny" --set parallel.data=2 --set training.train_iters=10 --set model.num_layers=4 \
    --set parallel.bucket_size_mb=$size --set logging.metrics_file="$WORK/$buckets.jsonl" >"$WORK/$buckets.log" 2>&1 ||
    { tail -5 "$WORK/$buckets.log"; fail "train with $buckets bucket(s)"; }
done
python3 - "$WORK/one.jsonl" "$WORK/many.jsonl" <<'PY' || fail "dp_comm_hidden"
import json, sys
def summary(path):
    return [json.loads(l)["summary"] for l in open(path) if '"summary"' in l][-1]
one, many = summary(sys.argv[1]), summary(sys.argv[2])
print("one bucket:", one["dp_comm_hidden"], "small buckets:", many["dp_comm_hidden"])
assert one["dp_comm_hidden"] <= 0.05, f"one bucket, launched after backward, reported {one['dp_comm_hidden']} hidden"
assert many["dp_comm_hidden"] > one["dp_comm_hidden"], (one, many)
PY
echo PASS
