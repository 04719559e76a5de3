#!/usr/bin/env python3
"""Checks that a run assembled from several jobs (killed, stopped or preempted, then resumed: their
metrics appended to one file) is BITWISE the uninterrupted run on the same layout.

usage: compare_resumed.py REF_METRICS RUN_METRICS [REF_EXPORT RUN_EXPORT]

Every step 1..N of the reference must appear in RUN_METRICS; where a step appears several times
(a job that died after it, and the resumed job that took it again) EVERY occurrence must equal the
reference: loss, grad_norm and lr as exact doubles (the metrics file writes round-trip precision),
validation losses too. The exported model.safetensors files, when given, must be byte-identical."""
import filecmp
import json
import sys


def rows(path):
    return [json.loads(line) for line in open(path) if line.strip()]


ref_path, run_path = sys.argv[1], sys.argv[2]
ref = {r["step"]: r for r in rows(ref_path) if "loss" in r}
ref_val = {r["step"]: r["val_loss"] for r in rows(ref_path) if "val_loss" in r}
seen = set()
for r in rows(run_path):
    if "loss" in r:
        want = ref.get(r["step"])
        if want is None:
            sys.exit(f"FAIL: {run_path}: step {r['step']} is not in the reference {ref_path}")
        for key in ("loss", "grad_norm", "lr"):
            if r[key] != want[key]:
                sys.exit(f"FAIL: {run_path}: step {r['step']} {key} {r[key]!r} != uninterrupted {want[key]!r}")
        seen.add(r["step"])
    elif "val_loss" in r and r["val_loss"] != ref_val.get(r["step"]):
        sys.exit(f"FAIL: {run_path}: step {r['step']} val_loss {r['val_loss']!r} != uninterrupted {ref_val.get(r['step'])!r}")
missing = sorted(set(ref) - seen)
if missing:
    sys.exit(f"FAIL: {run_path}: steps {missing} missing (the reference has 1..{max(ref)})")
if len(sys.argv) > 4:
    a, b = f"{sys.argv[3]}/model.safetensors", f"{sys.argv[4]}/model.safetensors"
    if not filecmp.cmp(a, b, shallow=False):
        sys.exit(f"FAIL: {b} differs from the uninterrupted run's {a}")
print(f"ok: {run_path}: {len(seen)} steps bitwise equal to the uninterrupted run"
      + (", final parameters byte-identical" if len(sys.argv) > 4 else ""))
