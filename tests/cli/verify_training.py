#!/usr/bin/env python3
"""Checks a metrics file: one line per step with the documented keys, a first loss near ln(vocab)
(uniform prediction at init) and a loss that clearly falls."""
import json
import math
import sys

path, steps, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(path)]
train = [r for r in rows if "loss" in r]
assert [r["step"] for r in train] == list(range(1, steps + 1)), "one metrics line per step"
for r in train:
    for key in ("step", "loss", "grad_norm", "lr", "tokens_per_s", "step_ms"):
        assert key in r, f"metrics line lacks {key}: {r}"
        assert math.isfinite(r[key])
first, last = train[0]["loss"], sum(r["loss"] for r in train[-5:]) / 5
assert abs(first - math.log(vocab)) < 0.1, f"loss at init {first} is not ~ln({vocab})={math.log(vocab):.3f}"
assert last < first - 1.0, f"loss did not fall: first {first}, mean of last five {last}"
print(f"ok: {path}: loss {first:.3f} -> {last:.3f} over {steps} steps")
