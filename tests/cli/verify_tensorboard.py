#!/usr/bin/env python3
"""Reads a TensorBoard directory with the tensorboard package's own reader and checks that every
scalar equals the metrics file's value at its step (float32), across the runs in the file.

usage: verify_tensorboard.py EVENT_DIR METRICS_JSONL FILES
FILES: how many event files the directory must hold (one per run), each starting with the
file_version event.
A run's run_start line drops the values after its resumed_from_step, as TensorBoard's session
start does; a summary line belongs to the step line before it.
"""
import glob
import json
import os
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader

STEP_TAGS = {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr",
             "tokens_per_s": "train/tokens_per_s", "step_ms": "train/step_ms", "gflops": "train/gflops",
             "data_wait_ms": "train/data_wait_ms", "bubble": "train/bubble", "dp_comm_hidden": "train/dp_comm_hidden"}
SUMMARY_TAGS = ["tokens_per_s", "gflops", "wall_s", "mfu", "bubble_measured", "bubble_theory", "dp_comm_hidden",
                "peak_host_bytes", "peak_device_bytes"]


def expected_scalars(metrics_path):
    want = {}  # tag -> {step: value}
    last_step = None
    for line in open(metrics_path):
        j = json.loads(line)
        if "run_start" in j:
            resumed = j["run_start"]["resumed_from_step"]
            for by_step in want.values():
                for s in [s for s in by_step if s > resumed]:
                    del by_step[s]
        elif "summary" in j:
            for key in SUMMARY_TAGS:
                if key in j["summary"]:
                    want.setdefault("summary/" + key, {})[last_step] = j["summary"][key]
        elif "val_loss" in j:
            want.setdefault("val/loss", {})[j["step"]] = j["val_loss"]
        elif "loss" in j:
            last_step = j["step"]
            for key, tag in STEP_TAGS.items():
                if key in j:
                    want.setdefault(tag, {})[j["step"]] = j[key]
    return want


def main():
    event_dir, metrics_path, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
    paths = sorted(glob.glob(os.path.join(event_dir, "events.out.tfevents.*")))
    if len(paths) != files:
        sys.exit(f"FAIL: {len(paths)} event files, want {files}: {paths}")
    for path in paths:
        first = next(iter(event_file_loader.EventFileLoader(path).Load()))
        if first.file_version != "brain.Event:2":
            sys.exit(f"FAIL: {path} starts with {first}, not file_version brain.Event:2")
    print(f"{files} event file(s), each starting with brain.Event:2: {[os.path.basename(p) for p in paths]}")
    acc = event_accumulator.EventAccumulator(event_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    want = expected_scalars(metrics_path)
    got_tags = set(acc.Tags()["scalars"])
    if got_tags != set(want):
        sys.exit(f"FAIL: tags {sorted(got_tags)} != metrics file's {sorted(want)}")
    for tag in sorted(want):
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if steps != sorted(want[tag]):
            sys.exit(f"FAIL: {tag}: steps {steps} != metrics file's {sorted(want[tag])}")
        for e in events:
            expected = np.float32(want[tag][e.step])
            if np.float32(e.value) != expected:
                sys.exit(f"FAIL: {tag} step {e.step}: {e.value!r} != metrics file's {want[tag][e.step]!r} "
                         f"(float32 {expected!r})")
        print(f"{tag}: {len(events)} values equal (steps {steps[0]}..{steps[-1]})")
    print("ok: every scalar equals the metrics file")


if __name__ == "__main__":
    main()
