#!/usr/bin/env python3
# Checks `lattice report`'s table and CSV against the run folders' metrics files, read here on their
# own: verify_run_report.py TABLE CSV OVERRIDE_KEY RUN_DIR=STATUS...
import csv
import json
import math
import sys


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def expected(run_dir):
    """The report's numbers from RUN_DIR/metrics.jsonl (absent = None); None when there is no file."""
    try:
        lines = [json.loads(l) for l in open(f"{run_dir}/metrics.jsonl") if l.strip()]
    except FileNotFoundError:
        return None
    last_start = max(i for i, r in enumerate(lines) if "run_start" in r)
    summaries = [r["summary"] for r in lines[last_start:] if "summary" in r]
    summary = summaries[-1] if summaries else {}
    steps = [r for r in lines if "loss" in r]
    vals = [r for r in lines if "val_loss" in r]
    return {
        "steps": steps[-1]["step"] if steps else 0,
        "train_loss": steps[-1]["loss"] if steps else None,
        "val_loss": vals[-1]["val_loss"] if vals else None,
        "tokens_per_s": summary.get("tokens_per_s"),
        "mfu": summary.get("mfu"),
        "bubble": summary.get("bubble_measured"),
        "dp_comm_hidden": summary.get("dp_comm_hidden"),
        # the training device's peak: GPU memory for a GPU run, else the host's RSS
        "peak_mem_gib": (lambda b: None if b is None else b / 2**30)(
            summary.get("peak_device_bytes", summary.get("peak_host_bytes"))),
        "lr": json.load(open(f"{run_dir}/config.json"))["optimizer"]["lr"],
    }


def main():
    table_file, csv_file, key = sys.argv[1:4]
    runs = [a.rsplit("=", 1) for a in sys.argv[4:]]  # run folders may hold "="
    columns = ["run", key, "status", "steps", "train_loss", "val_loss", "tokens_per_s", "mfu", "bubble",
               "dp_comm_hidden", "peak_mem_gib"]
    rows = list(csv.reader(open(csv_file)))
    if rows[0] != columns:
        fail(f"CSV header {rows[0]}, expected {columns} (only {key} differs between the runs)")
    if len(rows) != 1 + len(runs):
        fail(f"CSV has {len(rows) - 1} runs, expected {len(runs)}")
    table = [l.split() for l in open(table_file).read().splitlines()]
    if table[0] != columns or len(table[1]) != 1 or set(table[1][0]) != {"-"}:
        fail(f"table header {table[0]} / {table[1][:1]}")
    for (run_dir, status), row, cells in zip(runs, rows[1:], table[2:]):
        got = dict(zip(columns, row))
        shown = dict(zip(columns, cells))
        if got["run"] != run_dir or got["status"] != status or shown["status"] != status:
            fail(f"{run_dir}: row {row} / {cells}, expected status {status}")
        want = expected(run_dir)
        if want is None:  # failed before its first step
            if got["steps"] != "0" or any(got[c] for c in columns[4:]):
                fail(f"{run_dir}: a run without metrics shows {row}")
            continue
        if float(got[key]) != want["lr"] or int(got["steps"]) != want["steps"] or int(shown["steps"]) != want["steps"]:
            fail(f"{run_dir}: lr/steps {got[key]} {got['steps']}, expected {want['lr']} {want['steps']}")
        for c, digits in (("train_loss", 4), ("val_loss", 4), ("tokens_per_s", 1), ("mfu", 4), ("bubble", 3),
                          ("dp_comm_hidden", 3), ("peak_mem_gib", 2)):
            w = want[c]
            if w is None:
                if got[c] != "" or shown[c] != "-":
                    fail(f"{run_dir}: {c} is absent from the metrics file but shows '{got[c]}' / '{shown[c]}'")
            elif got[c] == "" or float(got[c]) != w or shown[c] != f"{w:.{digits}f}":
                fail(f"{run_dir}: {c} '{got[c]}' / '{shown[c]}', metrics file {w!r}")
    print(f"ok: report of {len(runs)} runs matches their metrics files")


if __name__ == "__main__":
    main()
