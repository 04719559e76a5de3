#!/usr/bin/env bash
# `lattice plan` from the command line: a GPU count no layout can use exits 2 naming --gpus, and so
# does a plan where no layout fits (after its table); the cpu preset's commands set one thread; --json is
# one JSON list with the documented fields; every printed command line's --set arguments pass
# `lattice validate` for that many ranks, the user's own --set included; --gpu FILE reads a spec and a
# bad one exits 2 naming --gpu.
set -uo pipefail
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

out=$($LATTICE plan --config configs/gpt2-124m.json --gpus 7 2>&1)
code=$?
[[ $code -eq 2 ]] || fail "--gpus 7: exit $code, want 2"
grep -qF -- "--gpus 7: no layout" <<<"$out" || fail "--gpus 7: message does not name --gpus: $out"

# No layout fits: the table (nearest first), then exit 2 with one error, so a script sees it.
out=$($LATTICE plan --config configs/llama3-70b.json --gpus 8 --top 2 2>&1)
code=$?
[[ $code -eq 2 ]] || fail "70B on 8 GPUs: exit $code, want 2"
grep -qF "none of the" <<<"$out" && [[ $(grep -c "\[error\] plan: none of the .* fits" <<<"$out") -eq 1 ]] &&
  [[ $(grep -c 'mpirun -np 8' <<<"$out") -eq 2 ]] || fail "70B on 8 GPUs: $out"
# The cpu preset's commands run one thread per process (a process per core).
out=$($LATTICE plan --config configs/gpt2-124m.json --gpus 2 --gpu cpu --top 2 2>&1) || fail "plan --gpu cpu: $out"
[[ $(grep -c 'mpirun -np 2 -x OMP_NUM_THREADS=1 lattice train' <<<"$out") -eq 2 ]] || fail "--gpu cpu commands: $out"

$LATTICE plan --config configs/llama3-8b.json --gpus 16 --top 4 --json >"$WORK/plan.json" 2>"$WORK/plan.err" ||
  fail "--json exited $?: $(cat "$WORK/plan.err")"
python3 - "$WORK/plan.json" <<'PY' || fail "--json output"
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and len(rows) == 4, rows
for r in rows:
    for k in ["tensor", "pipeline", "data", "virtual_stages", "micro_batch_size", "sequence_parallel",
              "distributed_optimizer", "recompute", "memory_bytes", "fits", "step_s", "tokens_per_s", "mfu", "bubble"]:
        assert k in r, k
    assert r["tensor"] * r["pipeline"] * r["data"] == 16
print("ok: --json has", len(rows), "layouts")
PY

# Every command line of the table is a layout `lattice validate` accepts on that many ranks.
for gpus in 4 16; do
  $LATTICE plan --config configs/llama3-8b.json --gpus $gpus --top 5 >"$WORK/plan.txt" 2>&1 || fail "plan --gpus $gpus"
  lines=$(grep -c 'mpirun -np' "$WORK/plan.txt")
  [[ $lines -eq 5 ]] || fail "--top 5 printed $lines layouts"
  while IFS= read -r line; do
    read -ra sets <<<"${line#*--config configs/llama3-8b.json}"
    if ! $LATTICE validate --config configs/llama3-8b.json --set data.path= "${sets[@]}" --world-size $gpus \
        >/dev/null 2>"$WORK/validate.err"; then
      fail "validate rejects: ${sets[*]}: $(cat "$WORK/validate.err")"
    fi
  done < <(grep 'mpirun -np' "$WORK/plan.txt")
done
echo "ok: every printed layout validates"

# The user's --set values are part of the planned model: every command line repeats them (quoted
# where the shell would split them), a validated command line gives its row's memory, and --json's
# "set" holds each key once.
user=(--set model.num_layers=16 --set training.global_batch_size=64 --set "training.sample_prompt=it's here")
$LATTICE plan --config configs/llama3-8b.json --gpus 8 --top 3 "${user[@]}" >"$WORK/user.txt" 2>&1 || fail "plan with --set"
[[ $(grep -c 'mpirun -np' "$WORK/user.txt") -eq 3 ]] || fail "plan with --set: $(cat "$WORK/user.txt")"
while IFS= read -r line; do
  eval "sets=(${line#*--config configs/llama3-8b.json})"
  [[ " ${sets[*]} " == *" model.num_layers=16 "* && " ${sets[*]} " == *" training.sample_prompt=it's here "* ]] ||
    fail "the command line lost the user's --set: $line"
  memory=$(awk '{print $11, $12}' <<<"$line")
  peak=$($LATTICE validate --config configs/llama3-8b.json --set data.path= "${sets[@]}" --world-size 8 2>/dev/null |
    awk '/^  peak/ {print $2, $3}')
  [[ "$peak" == "$memory" ]] || fail "the row says $memory, validating its command line $peak: $line"
done < <(grep 'mpirun -np' "$WORK/user.txt")
$LATTICE plan --config configs/llama3-8b.json --gpus 8 --top 3 --json "${user[@]}" >"$WORK/user.json" 2>/dev/null ||
  fail "plan --json with --set"
python3 - "$WORK/user.json" <<'PY' || fail "--json set with the user's --set"
import json, sys
for r in json.load(open(sys.argv[1])):
    keys = [s.split("=")[0] for s in r["set"]]
    assert len(keys) == len(set(keys)), r["set"]
    assert "model.num_layers=16" in r["set"] and "training.global_batch_size=64" in r["set"], r["set"]
PY
echo "ok: the plan's command lines keep the user's --set"

cat >"$WORK/gpu.json" <<'JSON'
{"name": "test-gpu", "peak_bf16_flops": 1e15, "memory_bytes": 2e11, "gpus_per_node": 4}
JSON
out=$($LATTICE plan --config configs/llama3-8b.json --gpus 8 --gpu "$WORK/gpu.json" --top 2 2>&1) ||
  fail "--gpu FILE: $out"
grep -qF "8 × test-gpu (4 per node" <<<"$out" || fail "--gpu FILE not used: $out"
echo '{"peak_bf16_flop": 1e15}' >"$WORK/bad.json"
out=$($LATTICE plan --config configs/llama3-8b.json --gpus 8 --gpu "$WORK/bad.json" 2>&1)
code=$?
[[ $code -eq 2 ]] && grep -qF -- "--gpu $WORK/bad.json: unknown key \"peak_bf16_flop\"" <<<"$out" ||
  fail "bad --gpu file: exit $code: $out"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all plan CLI checks passed"
