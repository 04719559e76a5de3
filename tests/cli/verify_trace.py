#!/usr/bin/env python3
"""Checks a rank's trace file (logging.trace_file) from `lattice train`: valid Chrome-trace JSON
with, for every step, a "step N" span holding forward then backward of every micro-batch, and one
grad norm and optimizer event per step.
Usage: verify_trace.py TRACE CONFIG STEPS (micro-batches per step = global / micro batch size)."""
import collections
import json
import sys

path, config_path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
training = json.load(open(config_path)).get("training", {})
micro = training.get("global_batch_size", 8) // training.get("micro_batch_size", 4)

trace = json.load(open(path))
assert trace["displayTimeUnit"] == "ms"
events = trace["traceEvents"]
assert not trace["otherData"]["truncated"], "trace truncated"
for e in events:
    assert e["pid"] == 0 and isinstance(e["tid"], int), f"bad pid/tid: {e}"
spans = [e for e in events if e["ph"] == "X"]
by_name = collections.defaultdict(list)
for e in spans:
    by_name[e["name"]].append(e)

step_span = {}
for s in range(1, steps + 1):
    (span,) = by_name[f"step {s}"]
    step_span[s] = (span["ts"], span["ts"] + span["dur"])

for kind in ("forward", "backward"):
    got = sorted((e["args"]["step"], e["args"]["microbatch"]) for e in by_name[kind])
    want = [(s, m) for s in range(1, steps + 1) for m in range(micro)]
    assert got == want, f"{kind}: {len(got)} events, expected one per micro-batch of every step ({len(want)})"
    for e in by_name[kind]:
        lo, hi = step_span[e["args"]["step"]]
        assert lo <= e["ts"] and e["ts"] + e["dur"] <= hi + 1e-3, f"{kind} outside its step: {e}"
fwd = {(e["args"]["step"], e["args"]["microbatch"]): e for e in by_name["forward"]}
for e in by_name["backward"]:
    f = fwd[(e["args"]["step"], e["args"]["microbatch"])]
    assert f["ts"] + f["dur"] <= e["ts"] + 1e-3, f"backward before its forward: {e}"
for name in ("optimizer", "grad norm", "read-back and rank sums"):
    assert sorted(e["args"]["step"] for e in by_name[name]) == list(range(1, steps + 1)), f"one {name} per step"
assert len(by_name["data wait"]) == steps * micro, "one data wait per micro-batch"
print(f"ok: {path}: {len(events)} events, forward/backward for {steps} steps x {micro} micro-batches")
