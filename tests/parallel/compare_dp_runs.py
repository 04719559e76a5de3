#!/usr/bin/env python3
"""Compares parallel training runs (any TP x PP x DP layout) with the one-process run of the same
config.

usage: compare_dp_runs.py [--bf16] STEPS REF_METRICS REF_EXPORT_DIR
                          [--noise NOISE_METRICS NOISE_EXPORT_DIR]... [METRICS EXPORT_DIR]...

Every step's loss and grad_norm must agree within relative 1e-5 (|a-b| / max(|a|, |b|, 1e-6)), and
so must every validation loss the reference run wrote (val_loss lines, same steps).

The exported parameters: every element within 1e-5 × the tensor's scale (max(max|a|, max|b|))
plus an absolute floor of 1e-3 × sum over steps of lr. Why not relative 1e-5 alone: data
parallelism sums the same fp32 numbers in a different order (per-rank partial sums, then the
reduction; pipeline and tensor parallelism accumulate and reduce in other orders too: split GEMM
reductions, tp all-reduces), so gradients differ by rounding, relative to the size of the summands
(hence per tensor scale, not per element); and AdamW divides each gradient by its own running RMS,
so for an element whose gradient is tiny or pure rounding noise (GPT-2's key bias: softmax is
invariant to it, its exact gradient is 0) the step is up to ~lr whatever the gradient's size, and
the rounding difference is amplified instead of shrinking with the gradient. A parameter can move
at most ~lr per step, so the floor is 0.1% of the farthest any parameter could travel in the run: a
wrong gradient scale, a missed or doubled rank shows up at the scale of that travel (and in the
loss and grad norm at once). The pure per-tensor relative difference is printed too.

--noise (repeatable): another ONE-PROCESS run of the same config that differs from the reference
only in how its fp32 sums are grouped (e.g. micro-batch 2, 4 or 8 instead of 1: the same tokens, the
same math). The largest distance of these runs from the reference is how well conditioned the run
itself is — rounding that a training step amplifies (a step where the gradient norm reacts to
last-bit changes in the weights) shows up there although nothing is parallel; one regrouping alone
is a noisy estimate (on the tiny Llama's step 16, regroupings land anywhere from 1e-6 to 2e-5), so
several are used. Each tolerance above then becomes max(tolerance, NOISE_FACTOR × that distance):
per step for loss, grad_norm and val_loss, per tensor (its largest element difference) for the
parameters. Where the run is well conditioned (every GPT-2 step) this
leaves 1e-5; a layout bug (a missed reduction, a wrong scale) differs by orders of magnitude more.
Fails loudly with the step / tensor, both values and the tolerance used.

--bf16 (bf16 mixed precision) changes two things. Under bf16 a layout rounds differently by
construction — a row-parallel layer rounds each rank's partial product to bf16 before the
reduction, where one process rounds the sum once — so from step 1 on (not only where a step
amplifies last-bit changes) the run differs by bf16-sized roundings, and elements whose gradient is
rounding noise take AdamW steps of ~lr in other directions. Hence:
- the noise is one level for the whole run, the largest distance of any noise run at any step
  (for loss, grad_norm and val_loss each), rather than per step: which step a bf16 rounding flip
  lands on is drawn anew by every run;
- each parameter tensor is compared by the L2 norm of its difference, ||a - b|| <= max(1e-5 ||a|| +
  floor sqrt(numel), NOISE_FACTOR x the largest ||a - noise||, 2 x the largest lr), instead of element
  by element: the extreme element of a tensor is an outlier drawn anew by every run, its L2 difference
  is stable. Except in a tensor of few elements (a norm weight, a bias), where one such element — a
  rounding-noise gradient whose AdamW step of ~lr went the other way — is the whole L2 difference, and
  lands in a run's tensor or not by the draw: the last term allows that one step (seen: the tiny
  Llama's 64-element post-attention norm weight of layer 0, one element 9.9e-4 apart at lr 1e-3, where
  the fp32 noise run had no such flip). A layout bug moves every element of the tensor, and over the
  run by far more than one step.
The bf16 suites pass the one-process fp32 run among the --noise runs: micro-batch regroupings change
only fp32 sums (at step 1 nothing at all); the fp32 run measures how far rounding every activation
to bf16 moves the run, which bounds the few extra roundings a layout adds. A layout bug (a missed
reduction, a wrong scale) still differs by orders of magnitude more."""
import json
import sys

import numpy as np
from safetensors.numpy import load_file

TOL = 1e-5
NOISE_FACTOR = 4.0


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


args = sys.argv[1:]
bf16_mode = args[:1] == ["--bf16"]  # parameters in L2, run-wide noise (see the docstring)
args = args[1:] if bf16_mode else args
steps, ref_metrics, ref_dir = int(args[0]), args[1], args[2]
args = args[3:]
ref = steps_of(ref_metrics, steps)
ref_val = val_losses(ref_metrics)
ref_params = load_file(f"{ref_dir}/model.safetensors")

# The reference's own rounding sensitivity: the largest distance of any --noise run (0 without).
step_noise = [{"loss": 0.0, "grad_norm": 0.0} for _ in ref]
val_noise = [0.0 for _ in ref_val]
param_noise = {name: 0.0 for name in ref_params}
while args[:1] == ["--noise"]:
    noise_metrics, noise_dir = args[1], args[2]
    args = args[3:]
    for i, (r0, r1) in enumerate(zip(ref, steps_of(noise_metrics, steps))):
        for key in ("loss", "grad_norm"):
            step_noise[i][key] = max(step_noise[i][key], rel(r0[key], r1[key]))
    noise_val = val_losses(noise_metrics)
    if [s for s, _ in noise_val] != [s for s, _ in ref_val]:
        sys.exit(f"FAIL: {noise_metrics}: validation steps differ from the reference's")
    val_noise = [max(n, rel(a, b)) for n, (_, a), (_, b) in zip(val_noise, ref_val, noise_val)]
    noise_params = load_file(f"{noise_dir}/model.safetensors")
    for name, a in ref_params.items():
        delta = a.astype(np.float64) - noise_params[name].astype(np.float64)
        d = float(np.linalg.norm(delta)) if bf16_mode else float(np.abs(delta).max(initial=0.0))
        param_noise[name] = max(param_noise[name], d)
    worst_step = max(range(len(ref)), key=lambda i: step_noise[i]["grad_norm"])
    print(f"{noise_metrics}: with it, the reference's own rounding sensitivity (one process: sums regrouped"
          f"{', or the other precision' if bf16_mode else ''}) is up to loss {max(n['loss'] for n in step_noise):.2e}, "
          f"grad_norm {step_noise[worst_step]['grad_norm']:.2e} (step {worst_step + 1}); tolerances are max(1e-5 rule, "
          f"{NOISE_FACTOR:g} x this) {'over the whole run / per tensor in L2' if bf16_mode else 'per step / tensor'}")

if bf16_mode:  # one noise level for the whole run
    step_noise = [{key: max(n[key] for n in step_noise) for key in ("loss", "grad_norm")} for _ in step_noise]
    val_noise = [max(val_noise, default=0.0) for _ in val_noise]

failed = False
for metrics, export in zip(args[0::2], args[1::2]):
    run = steps_of(metrics, steps)
    worst = {"loss": 0.0, "grad_norm": 0.0}
    widened = 0  # checks whose tolerance the reference's noise widened beyond 1e-5
    for r0, r1, noise in zip(ref, run, step_noise):
        for key in ("loss", "grad_norm"):
            d = rel(r0[key], r1[key])
            tol = max(TOL, NOISE_FACTOR * noise[key])
            worst[key] = max(worst[key], d)
            widened += d > TOL
            if not d <= tol:
                failed = True
                print(f"FAIL: {metrics}: step {r0['step']} {key} {r1[key]!r} vs one process {r0[key]!r} "
                      f"(relative difference {d:.3e} > {tol:.3e})")
    val = val_losses(metrics)
    if [s for s, _ in val] != [s for s, _ in ref_val]:
        failed = True
        print(f"FAIL: {metrics}: validation at steps {[s for s, _ in val]}, one process at {[s for s, _ in ref_val]}")
    for (step, a), (_, b), noise in zip(ref_val, val, val_noise):
        d = rel(a, b)
        tol = max(TOL, NOISE_FACTOR * noise)
        worst["val_loss"] = max(worst.get("val_loss", 0.0), d)
        widened += d > TOL
        if not d <= tol:
            failed = True
            print(f"FAIL: {metrics}: step {step} val_loss {b!r} vs one process {a!r} (relative difference {d:.3e} > {tol:.3e})")
    floor = 1e-3 * sum(r["lr"] for r in ref)
    one_flip = 2.0 * max(r["lr"] for r in ref)  # bf16: one noise element's AdamW step the other way
    params = load_file(f"{export}/model.safetensors")
    if sorted(params) != sorted(ref_params):
        sys.exit(f"FAIL: {export}: tensors {sorted(params)} vs one process {sorted(ref_params)}")
    worst_param, worst_name = 0.0, ""
    for name, a in ref_params.items():
        b = params[name]
        if a.shape != b.shape:
            sys.exit(f"FAIL: {export}: {name} shape {b.shape} vs one process {a.shape}")
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if bf16_mode:
            d = float(np.linalg.norm(a64 - b64))
            base = TOL * float(np.linalg.norm(a64)) + floor * a.size ** 0.5
            allowed = max(base, NOISE_FACTOR * param_noise[name], one_flip)
            rel_d = d / max(float(np.linalg.norm(a64)), 1e-12)
            if rel_d > worst_param:
                worst_param, worst_name = rel_d, name
            widened += d > base
            if d > allowed:
                failed = True
                print(f"FAIL: {export}: {name}: ||diff|| {d:.3e} > {allowed:.3e} (max of {TOL} x ||a|| + floor "
                      f"{floor:.3e} x sqrt(numel), {NOISE_FACTOR:g} x the reference's own ||diff|| "
                      f"{param_noise[name]:.3e} and one noise element's step {one_flip:.1e})")
            continue
        scale = max(np.abs(a64).max(initial=0.0), np.abs(b64).max(initial=0.0), 1e-6)
        diff = np.abs(a64 - b64)
        d = diff.max(initial=0.0) / scale
        if d > worst_param:
            worst_param, worst_name = d, name
        base = TOL * scale + floor
        allowed = max(base, NOISE_FACTOR * param_noise[name])
        widened += diff.max(initial=0.0) > base
        excess = diff - allowed
        if excess.max(initial=-1.0) > 0:
            failed = True
            i = np.unravel_index(np.argmax(excess), diff.shape)
            print(f"FAIL: {export}: {name}{list(i)} = {b64[i]!r} vs one process {a64[i]!r}: |diff| {diff[i]:.3e} "
                  f"> {allowed:.3e} (max of {TOL} x tensor scale {scale:.3e} + floor {floor:.3e} and "
                  f"{NOISE_FACTOR:g} x the reference's own difference {param_noise[name]:.3e})")
    print(f"{metrics}: max relative difference vs one process over {steps} steps: loss {worst['loss']:.2e}, "
          f"grad_norm {worst['grad_norm']:.2e}"
          + (f", val_loss {worst['val_loss']:.2e} ({len(ref_val)} evaluations)" if "val_loss" in worst else "")
          + (f"; final parameters max ||diff|| / ||tensor|| {worst_param:.2e} ({worst_name})" if bf16_mode else
             f"; final parameters max |diff| / tensor scale {worst_param:.2e} ({worst_name}), within "
          f"{TOL} x scale + {floor:.2e}") + (f"; {widened} check(s) needed the noise-widened tolerance" if widened else ""))
if failed:
    sys.exit("FAIL: parallel training does not match one process")
print("ok: parallel runs match one process")
