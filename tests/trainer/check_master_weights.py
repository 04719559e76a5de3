#!/usr/bin/env python3
"""Compares how far a run moved its fp32 weights from the init with how far an fp32 run moved them.

usage: check_master_weights.py [--lost] INIT_DIR FP32_DIR RUN_DIR   (each holding model.safetensors)

d_ref = W_fp32 - W0 and d_run = W_run - W0 over all tensors; passes when
    ||d_run - d_ref|| <= BOUND * ||d_ref||   (L2 over every element)
and fails otherwise, printing both norms and the worst tensors.

The bound. AdamW's step m_hat / (sqrt(v_hat) + eps) is scale-free, so the two runs' displacements
differ only through their gradients' directions, not through the bf16 rounding of the weights
(the master weights are fp32). Per element the step is ~ +-lr with the gradient's sign; where the
bf16 and fp32 gradients agree in sign (all elements with a gradient well above bf16's relative
rounding, 2^-8, of its summands) the steps agree to O(2^-8); an element whose gradient is rounding
noise can step the other way, contributing up to 2|d| instead of 0. So the relative L2 difference
is about 2 sqrt(f) for a fraction f of sign-unstable elements: BOUND = 0.1 allows f ~ 0.25% (the
tiny GPT-2 measures 0.02). A run without master weights fails it twice over: its weights start at
the bf16 rounding of the init (an error of up to half an ulp, ~6e-5, per element: several times the
whole fp32 displacement) and then lose every update of the elements with |w| above ~lr·2^8.

--lost: instead check the failure mechanism of such a run: every element with |w0| >= 4e-3 (where
half a bf16 ulp, >= 2^-8 * 2^-8 / 2 ~ 7.6e-6, exceeds any single AdamW step of lr = 1e-6 by a factor
of several) still rounds to round_bf16(w0) (round to nearest even, computed here; the export holds
the last step's unrounded result, whose bf16 copy the model would use): every update was rounded
away. Elements nearer zero (the zero-initialized biases) can keep theirs in bf16."""
import sys

import numpy as np
from safetensors.numpy import load_file

BOUND = 0.1



def round_bf16(w):
    """Round to nearest even to bf16, returned as f32 (an independent reference of kernels/bf16.h)."""
    bits = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    return ((bits + 0x7FFF + lsb) & 0xFFFF0000).astype(np.uint32).view(np.float32)


lost = "--lost" in sys.argv
args = [a for a in sys.argv[1:] if a != "--lost"]
init, ref, run = (load_file(f"{d}/model.safetensors") for d in args[:3])
if lost:
    selected = moved = total = 0
    for name, w0 in init.items():
        big = np.abs(w0) >= 4e-3
        selected += int(big.sum())
        total += w0.size
        moved += int(np.sum(round_bf16(run[name])[big] != round_bf16(w0)[big]))
    print(f"{args[2]}: {moved} of the {selected} elements with |w0| >= 4e-3 ({selected / total:.0%} of all) "
          f"have a bf16 copy other than round_bf16(w0)")
    sys.exit(0 if moved == 0 and selected > 0 else 1)
diff_sq = ref_sq = run_sq = 0.0
worst = []
for name, w0 in init.items():
    d_ref = ref[name].astype(np.float64) - w0
    d_run = run[name].astype(np.float64) - w0
    e = float(np.sum((d_run - d_ref) ** 2))
    diff_sq += e
    ref_sq += float(np.sum(d_ref ** 2))
    run_sq += float(np.sum(d_run ** 2))
    worst.append((e, name))
rel = (diff_sq / ref_sq) ** 0.5
print(f"{args[2]}: ||d_run|| = {run_sq ** 0.5:.3e}, ||d_fp32|| = {ref_sq ** 0.5:.3e}, "
      f"||d_run - d_fp32|| / ||d_fp32|| = {rel:.4f} (bound {BOUND})")
if ref_sq == 0.0:
    sys.exit("FAIL: the fp32 run did not move at all")
if rel > BOUND:
    for e, name in sorted(worst, reverse=True)[:3]:
        print(f"  {name}: ||d_run - d_fp32|| = {e ** 0.5:.3e}")
    sys.exit(1)
