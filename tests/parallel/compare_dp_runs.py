#!/usr/bin/env python3
"""Compares parallel training runs (any TP x PP x DP layout) with the one-process run of the same
config.

usage: compare_dp_runs.py STEPS REF_METRICS REF_EXPORT_DIR [METRICS EXPORT_DIR]...

Every step's loss and grad_norm must agree within relative 1e-5 (|a-b| / max(|a|, |b|, 1e-6)), and
so must every validation loss the reference run wrote (val_loss lines, same steps).

The exported parameters: every element within 1e-5 × the tensor's scale (max(max|a|, max|b|))
plus an absolute floor of 1e-3 × sum over steps of lr. Why not relative 1e-5 alone: data
parallelism sums the same fp32 numbers in a different order (per-rank partial sums, then the
reduction; pipeline and tensor parallelism accumulate and reduce in other orders too), so gradients
differ by rounding, relative to the size of the summands (hence per
tensor scale, not per element); and AdamW divides each gradient by its own running RMS, so for an
element whose gradient is tiny or pure rounding noise (GPT-2's key bias: softmax is invariant to
it, its exact gradient is 0) the step is up to ~lr whatever the gradient's size, and the rounding
difference is amplified instead of shrinking with the gradient. A parameter can move at most ~lr
per step, so the floor is 0.1% of the farthest any parameter could travel in the run: a wrong
gradient scale, a missed or doubled rank shows up at the scale of that travel (and in the loss
and grad norm at once). The pure per-tensor relative difference is printed too.
Fails loudly with the step / tensor and both values."""
import json
import sys

import numpy as np
from safetensors.numpy import load_file

TOL = 1e-5


def steps_of(path, steps):
    rows = [json.loads(line) for line in open(path)]
    train = [r for r in rows if "loss" in r]
    got = [r["step"] for r in train]
    if got != list(range(1, steps + 1)):
        sys.exit(f"FAIL: {path}: steps {got}, expected 1..{steps}")
    return train


def val_losses(path):
    return [(r["step"], r["val_loss"]) for r in (json.loads(line) for line in open(path)) if "val_loss" in r]


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-6)


steps, ref_metrics, ref_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ref = steps_of(ref_metrics, steps)
ref_params = load_file(f"{ref_dir}/model.safetensors")
failed = False
for metrics, export in zip(sys.argv[4::2], sys.argv[5::2]):
    run = steps_of(metrics, steps)
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for r0, r1 in zip(ref, run):
        for key in worst:
            d = rel(r0[key], r1[key])
            worst[key] = max(worst[key], d)
            if not d <= TOL:
                failed = True
                print(f"FAIL: {metrics}: step {r0['step']} {key} {r1[key]!r} vs one process {r0[key]!r} "
                      f"(relative difference {d:.3e} > {TOL})")
    ref_val, val = val_losses(ref_metrics), val_losses(metrics)
    if [s for s, _ in val] != [s for s, _ in ref_val]:
        failed = True
        print(f"FAIL: {metrics}: validation at steps {[s for s, _ in val]}, one process at {[s for s, _ in ref_val]}")
    for (step, a), (_, b) in zip(ref_val, val):
        d = rel(a, b)
        worst["val_loss"] = max(worst.get("val_loss", 0.0), d)
        if not d <= TOL:
            failed = True
            print(f"FAIL: {metrics}: step {step} val_loss {b!r} vs one process {a!r} (relative difference {d:.3e} > {TOL})")
    floor = 1e-3 * sum(r["lr"] for r in ref)
    params = load_file(f"{export}/model.safetensors")
    if sorted(params) != sorted(ref_params):
        sys.exit(f"FAIL: {export}: tensors {sorted(params)} vs one process {sorted(ref_params)}")
    worst_param, worst_name = 0.0, ""
    for name, a in ref_params.items():
        b = params[name]
        if a.shape != b.shape:
            sys.exit(f"FAIL: {export}: {name} shape {b.shape} vs one process {a.shape}")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        scale = max(np.abs(a64).max(initial=0.0), np.abs(b64).max(initial=0.0), 1e-6)
        diff = np.abs(a64 - b64)
        d = diff.max(initial=0.0) / scale
        if d > worst_param:
            worst_param, worst_name = d, name
        excess = diff - (TOL * scale + floor)
        if excess.max(initial=-1.0) > 0:
            failed = True
            i = np.unravel_index(np.argmax(excess), diff.shape)
            print(f"FAIL: {export}: {name}{list(i)} = {b64[i]!r} vs one process {a64[i]!r}: |diff| {diff[i]:.3e} "
                  f"> {TOL} x tensor scale {scale:.3e} + floor {floor:.3e}")
    print(f"{metrics}: max relative difference vs one process over {steps} steps: loss {worst['loss']:.2e}, "
          f"grad_norm {worst['grad_norm']:.2e}"
          + (f", val_loss {worst['val_loss']:.2e} ({len(ref_val)} evaluations)" if "val_loss" in worst else "")
          + f"; final parameters max |diff| / tensor scale {worst_param:.2e} ({worst_name}), within "
          f"{TOL} x scale + {floor:.2e}")
if failed:
    sys.exit("FAIL: parallel training does not match one process")
print("ok: parallel runs match one process")
