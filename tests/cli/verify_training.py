#!/usr/bin/env python3
"""Checks a metrics file of one fresh run: a run_start line first, one line per step with the
documented keys, a summary line last, a "time" on every line, a first loss near ln(vocab)
(uniform prediction at init) and a loss that clearly falls."""
import json
import math
import sys

path, steps, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(path)]
start = rows[0].get("run_start")
assert start is not None, f"the first line is not a run_start line: {rows[0]}"
assert start["resumed_from_step"] == 0 and len(start["config_hash"]) == 16, start
assert [r for r in rows if "run_start" in r] == [rows[0]], "one run_start line per run"
for r in rows:
    assert isinstance(r.get("time"), float) and r["time"] > 1.6e9, f"metrics line lacks a Unix time: {r}"
train = [r for r in rows if "loss" in r]
assert [r["step"] for r in train] == list(range(1, steps + 1)), "one metrics line per step"
for r in train:
    for key in ("step", "loss", "grad_norm", "lr", "tokens_per_s", "step_ms"):
        assert key in r, f"metrics line lacks {key}: {r}"
        assert math.isfinite(r[key])
summary = rows[-1].get("summary")
assert summary is not None, f"the last line is not the summary: {rows[-1]}"
assert summary["steps"] == steps and summary["final_loss"] == train[-1]["loss"] and summary["wall_s"] > 0, summary
first, last = train[0]["loss"], sum(r["loss"] for r in train[-5:]) / 5
assert abs(first - math.log(vocab)) < 0.1, f"loss at init {first} is not ~ln({vocab})={math.log(vocab):.3f}"
assert last < first - 1.0, f"loss did not fall: first {first}, mean of last five {last}"
print(f"ok: {path}: loss {first:.3f} -> {last:.3f} over {steps} steps")
