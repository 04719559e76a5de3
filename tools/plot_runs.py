#!/usr/bin/env python3
# Plots run folders (logging.run_dir) side by side: train and validation loss by step and by tokens,
# and throughput by step, in one PNG. Usage: tools/plot_runs.py --output runs.png RUN_DIR...
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display on a cluster node
import matplotlib.pyplot as plt  # noqa: E402


def read_run(run_dir):
    """(tokens per step, {step: loss}, {step: val_loss}, {step: tokens/s}); a resumed run's repeated
    steps keep their last value."""
    config_file = os.path.join(run_dir, "config.json")
    try:
        with open(config_file) as f:
            config = json.load(f)
        tokens_per_step = config["training"]["global_batch_size"] * config["model"]["seq_length"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"plot_runs: '{config_file}' is not a run's config.json: {e}")
    metrics = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(metrics):
        metrics = config["logging"].get("metrics_file") or metrics
    loss, val, speed = {}, {}, {}
    if os.path.exists(metrics):
        with open(metrics) as f:
            for n, line in enumerate(f, 1):
                try:
                    r = json.loads(line)
                except ValueError:
                    sys.exit(f"plot_runs: metrics file '{metrics}' line {n} is not JSON")
                if "loss" in r:
                    loss[r["step"]] = r["loss"]
                    speed[r["step"]] = r["tokens_per_s"]
                if "val_loss" in r:
                    val[r["step"]] = r["val_loss"]
    return tokens_per_step, loss, val, speed


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", "-o", required=True, help="PNG file to write")
    parser.add_argument("run_dirs", nargs="+")
    args = parser.parse_args()
    fig, (by_step, by_tokens, throughput) = plt.subplots(1, 3, figsize=(15, 4.5), dpi=100)
    for i, run_dir in enumerate(args.run_dirs):
        tokens_per_step, loss, val, speed = read_run(run_dir)
        if not loss:
            print(f"plot_runs: {run_dir} has no training steps (a run that failed before step 1): not drawn",
                  file=sys.stderr)
            continue
        colour = f"C{i % 10}"
        name = os.path.basename(os.path.normpath(run_dir))
        for ax, scale in ((by_step, 1), (by_tokens, tokens_per_step)):
            ax.plot([s * scale for s in sorted(loss)], [loss[s] for s in sorted(loss)], color=colour,
                    label=f"{name} train")
            if val:
                ax.plot([s * scale for s in sorted(val)], [val[s] for s in sorted(val)], color=colour,
                        linestyle="--", marker="o", markersize=3, label=f"{name} validation")
        throughput.plot(sorted(speed), [speed[s] for s in sorted(speed)], color=colour, label=name)
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
