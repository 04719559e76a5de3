#!/usr/bin/env python3
# Plots run folders (logging.run_dir) side by side: train and validation loss by step and by tokens,
# and throughput by step, in one PNG. Usage: tools/plot_runs.py --output runs.png RUN_DIR...
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt  # noqa: E402


LOG_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[([a-z]+)\] ")


def log_ends_in_error(run_dir):
    """log.txt's last record is at level error or critical (lattice report's rule: by the record, not the
    last line, which may continue a multi-line message)."""
    level = None
    try:
        with open(os.path.join(run_dir, "log.txt"), errors="replace") as f:
            for line in f:
                m = LOG_RECORD.match(line)
                if m:
                    level = m.group(1)
    except OSError:
        return False
    return level in ("error", "critical")


def locate(stored, run_folder, run_dir):
    """A path the run's config stores, as found from here: one inside the run's own folder
    (logging.run_dir) is looked for in RUN_DIR, where the folder is now; any other path as stored."""
    if not stored or not run_folder or os.path.isabs(stored) != os.path.isabs(run_folder):
        return stored
    inside = os.path.relpath(os.path.normpath(stored), os.path.normpath(run_folder))
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        return stored
    return run_dir if inside == os.curdir else os.path.join(run_dir, inside)


def metrics_file_of(config, run_dir):
    """(path, problem): the run's metrics file as `lattice report` finds it — logging.metrics_file
    located, RUN_DIR/metrics.jsonl when unset, and for a relative path not found from here (an old run
    folder stores it as given: relative to the directory the run was started from) the folder's own
    metrics.jsonl. problem is None when the file exists, else why it is not there."""
    logging = config.get("logging") or {}
    stored = logging.get("metrics_file") or ""
    own = os.path.join(run_dir, "metrics.jsonl")  # logging.run_dir's default name
    if not stored:
        return own, None if os.path.exists(own) else f"metrics file '{own}' not found"
    metrics = locate(stored, logging.get("run_dir") or "", run_dir)
    if os.path.exists(metrics):
        return metrics, None
    if os.path.isabs(metrics):
        return metrics, f"metrics file '{metrics}' not found"
    if os.path.exists(own):
        return own, None
    return metrics, (f"metrics file '{metrics}' not found: logging.metrics_file in "
                     f"'{os.path.join(run_dir, 'config.json')}' is a relative path, relative to the directory the "
                     f"run was started from, and the folder holds no metrics.jsonl of its own; cd to that directory "
                     f"and run plot_runs.py (or lattice report --plot) there")


def read_run(run_dir):
    """(tokens per step, {step: loss}, {step: val_loss}, {step: tokens/s}); a resumed run's repeated
    steps keep their last value. A metrics file that is not there: a run that failed before step 1
    (log.txt ends in an error) has none and gives no steps; otherwise the script stops, naming it."""
    config_file = os.path.join(run_dir, "config.json")
    try:
        with open(config_file) as f:
            config = json.load(f)
        tokens_per_step = config["training"]["global_batch_size"] * config["model"]["seq_length"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"plot_runs: '{config_file}' is not a run's config.json: {e}")
    metrics, problem = metrics_file_of(config, run_dir)
    loss, val, speed = {}, {}, {}
    if problem is not None:
        if log_ends_in_error(run_dir):
            print(f"plot_runs: {run_dir}: no metrics file (its log.txt ends in an error: the run failed before "
                  f"step 1): not drawn", file=sys.stderr)
            return tokens_per_step, loss, val, speed
        sys.exit(f"plot_runs: {run_dir}: {problem}")
    with open(metrics) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                if not line.endswith("\n"):
                    break  # the last line, cut off by a killed run (train drops it when it appends)
                sys.exit(f"plot_runs: metrics file '{metrics}' line {n} is not JSON")
            if "loss" in r:
                loss[r["step"]] = r["loss"]
                speed[r["step"]] = r["tokens_per_s"]
            if "val_loss" in r:
                val[r["step"]] = r["val_loss"]
    if not loss:
        print(f"plot_runs: {run_dir}: metrics file '{metrics}' has no training steps yet: not drawn", file=sys.stderr)
    return tokens_per_step, loss, val, speed


def labels(run_dirs):
    """Each run's label: its folder's name, with as many parent folders as it takes to tell runs of
    the same name apart (two sweeps' optimizer.lr=1e-3 points: sweep-a/optimizer.lr=1e-3, ...)."""
    parts = [os.path.normpath(os.path.abspath(d)).split(os.sep) for d in run_dirs]
    depth = 1
    while depth < max(len(p) for p in parts):
        names = [os.sep.join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            break
        depth += 1
    return [os.sep.join(p[-depth:]) for p in parts]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", "-o", required=True, help="PNG file to write")
    parser.add_argument("run_dirs", nargs="+")
    args = parser.parse_args()
    fig, (by_step, by_tokens, throughput) = plt.subplots(1, 3, figsize=(15, 4.5), dpi=100)
    for i, (run_dir, name) in enumerate(zip(args.run_dirs, labels(args.run_dirs))):
        tokens_per_step, loss, val, speed = read_run(run_dir)
        if not loss:  # read_run said why
            continue
        colour = f"C{i % 10}"
        # A line of one point draws nothing: a run of one step gets a marker.
        lone = {"marker": "o", "markersize": 4} if len(loss) == 1 else {}
        for ax, scale in ((by_step, 1), (by_tokens, tokens_per_step)):
            ax.plot([s * scale for s in sorted(loss)], [loss[s] for s in sorted(loss)], color=colour,
                    label=f"{name} train", **lone)
            if val:
                ax.plot([s * scale for s in sorted(val)], [val[s] for s in sorted(val)], color=colour,
                        linestyle="--", marker="o", markersize=3, label=f"{name} validation")
        throughput.plot(sorted(speed), [speed[s] for s in sorted(speed)], color=colour, label=name, **lone)
    by_step.set(title="loss by step", xlabel="step", ylabel="loss")
    by_tokens.set(title="loss by tokens", xlabel="tokens", ylabel="loss")
    throughput.set(title="throughput", xlabel="step", ylabel="tokens/s")
    for ax in (by_step, by_tokens, throughput):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(args.output, format="png")


if __name__ == "__main__":
    main()
