#!/usr/bin/env bash
# A checkpoint written before the device-ready core (tests/checkpoint/legacy/, commit e412d9c)
# still loads: resumed at step 10 on its own layout, steps 11..20 repeat the old program's
# uninterrupted run (its reference.jsonl). Loss and grad norm within 1e-5 relative (a CPU whose
# OpenBLAS picks other kernels rounds differently), the LR exactly.
source tests/checkpoint/resume_lib.sh

for name in one dp2do; do
  np=1 overrides=()
  [[ $name == dp2do ]] && np=2 overrides=(--set parallel.distributed_optimizer=true)
  d=$WORK/$name
  mkdir -p "$d/ckpt"
  cp -r "tests/checkpoint/legacy/$name/iter_0000010" "$d/ckpt/"
  echo iter_0000010 >"$d/ckpt/latest"
  run "$np" "$d.log" train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" \
    --set checkpoint.dir="$d/ckpt" --set logging.metrics_file="$d.jsonl" "${overrides[@]}"
  grep -q "resumed from $d/ckpt/iter_0000010: step 10" "$d.log" || fail "$name: did not resume: $(tail -3 "$d.log")"
  python3 - "tests/checkpoint/legacy/$name/reference.jsonl" "$d.jsonl" <<'PY' || fail "$name: resumed run differs from the old program's"
import json, sys
ref = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
run = [r for r in map(json.loads, open(sys.argv[2])) if "loss" in r]
assert [r["step"] for r in run] == list(range(11, 21)), [r["step"] for r in run]
for r in run:
    w = ref[r["step"]]
    for key in ("loss", "grad_norm"):
        if abs(r[key] - w[key]) > 1e-5 * abs(w[key]):
            sys.exit(f"step {r['step']} {key}: {r[key]} vs the old program's {w[key]}")
    if r["lr"] != w["lr"]:
        sys.exit(f"step {r['step']} lr: {r['lr']} vs {w['lr']}")
print(f"steps 11..20 match the old program's run")
PY
done
echo PASS
