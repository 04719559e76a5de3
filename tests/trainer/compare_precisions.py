#!/usr/bin/env python3
"""bf16 mixed precision against fp32 on the same run (tests/trainer/bf16_quickstart_test.sh).

usage: compare_precisions.py FP32_METRICS BF16_METRICS

- every validation loss (the same steps in both): |bf16 - fp32| / fp32 < 1% (issue 11's figure);
- every training step's loss: |bf16 - fp32| / fp32 < STEP_BOUND.

STEP_BOUND: a step's loss is the mean over 4096 tokens of one batch, the same batch in both runs, so
its difference is the two models' difference on that batch, not sampling noise. At step 1 the
weights are equal and only the forward's rounding differs: bf16 activations (8-bit mantissa,
relative rounding 2^-9 per op) move the logits by ~1e-2 relative over the model's few dozen ops,
the loss by well under 1%. Later the weights drift apart too (every step's gradients differ at the
2^-8 level, and training amplifies differences), while both losses fall; a 3% bound leaves room for
that drift over 300 steps and is still far below what a broken recipe gives (a lost master weight
update, an fp32 statistic kept in bf16, a wrong gradient scale: differences of 10% or more within
the first hundred steps)."""
import json
import sys

VAL_BOUND = 0.01
STEP_BOUND = 0.03


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    steps = {r["step"]: r["loss"] for r in rows if "loss" in r}
    vals = {r["step"]: r["val_loss"] for r in rows if "val_loss" in r}
    return steps, vals


(f_steps, f_vals), (b_steps, b_vals) = load(sys.argv[1]), load(sys.argv[2])
if sorted(f_steps) != sorted(b_steps) or not f_steps:
    sys.exit(f"FAIL: the runs logged different steps ({len(f_steps)} vs {len(b_steps)})")
if sorted(f_vals) != sorted(b_vals) or not f_vals:
    sys.exit(f"FAIL: validation at different steps: {sorted(f_vals)} vs {sorted(b_vals)}")
worst = max(f_steps, key=lambda s: abs(b_steps[s] - f_steps[s]) / f_steps[s])
worst_rel = abs(b_steps[worst] - f_steps[worst]) / f_steps[worst]
print(f"training loss: largest relative difference {worst_rel:.4f} at step {worst} "
      f"(fp32 {f_steps[worst]:.4f}, bf16 {b_steps[worst]:.4f}; bound {STEP_BOUND})")
failed = worst_rel >= STEP_BOUND
for s in sorted(f_vals):
    rel = abs(b_vals[s] - f_vals[s]) / f_vals[s]
    print(f"validation loss at step {s}: fp32 {f_vals[s]:.4f}, bf16 {b_vals[s]:.4f}, relative {rel:.4f} "
          f"(bound {VAL_BOUND})")
    failed = failed or rel >= VAL_BOUND
sys.exit("FAIL" if failed else 0)
