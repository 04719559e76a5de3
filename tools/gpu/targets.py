#!/usr/bin/env python3
"""Issue 12's bf16 targets against check.sh's benchmark logs (LOGDIR/bench-NAME.log, `lattice bench`'s
output): for each model, the fastest row that ran, met or not. GPT-2 124M and 1.5B are targets in
tokens/s; the ~1B Llama is a share of the bf16 GEMM peak that the same run measured. Rows timed under
--profile-ops are left out, as its events slow the step. A row with non-deterministic attention
(training.deterministic_attention false) counts, and is named as such, beside the best deterministic row.

  targets.py LOGDIR
"""
import glob
import os
import re
import sys

# (model, row-name prefix, figure, target, unit)
TARGETS = [
    ("GPT-2 124M", "gpt2-124m-bf16", "tokens_per_s", 520_000, "tokens/s"),
    ("GPT-2 1.5B", "gpt2-1.5b-bf16", "tokens_per_s", 53_000, "tokens/s"),
    ("Llama ~1B", "llama-1b-bf16", "gemm_peak_share", 55.0, "% of the measured bf16 GEMM peak"),
]


def bench_rows(logdir):
    """{row name: {"tokens_per_s", "gemm_peak_share", "gpu"}} for every bench log with a tokens/s line."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(logdir, "bench-*.log"))):
        name = os.path.basename(path)[len("bench-"):-len(".log")]
        text = open(path, errors="replace").read()
        tokens = re.search(r"^tokens/s\s*:\s*([0-9.]+)", text, re.M)
        share = re.search(r"^ratio achieved / peak\s*:\s*([0-9.]+)%", text, re.M)
        gpu = re.search(r"uses visible GPU \d+ of \d+ \(([^,)]+)", text)
        if tokens:
            rows[name] = {"tokens_per_s": float(tokens.group(1)),
                          "gemm_peak_share": float(share.group(1)) if share else None,
                          "gpu": gpu.group(1) if gpu else "an unnamed GPU"}
    return rows


def describe(name, row, figure, target, unit):
    value = row[figure]
    met = "met" if value >= target else "unmet"
    if figure == "tokens_per_s":
        return f"{value:,.0f} tokens/s ({name}) = {100 * value / target:.1f}% of {target:,}: {met}"
    return f"{value:.1f}{unit} ({name}) against {target:g}%: {met}"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: " + __doc__.strip().splitlines()[-1].strip())
    rows = bench_rows(sys.argv[1])
    gpus = sorted({r["gpu"] for r in rows.values()})
    print(f"issue 12's bf16 targets (set for one H200), measured on {', '.join(gpus) or 'no GPU'}:")
    for model, prefix, figure, target, unit in TARGETS:
        ran = {n: r for n, r in rows.items()
               if n.startswith(prefix) and "-profile" not in n and r[figure] is not None}
        if not ran:
            print(f"  {model}: no row ran: unmeasured")
            continue
        best = max(ran, key=lambda n: ran[n][figure])
        line = f"  {model}: {describe(best, ran[best], figure, target, unit)}"
        if "nondeterministic" in best:
            deterministic = {n: r for n, r in ran.items() if "nondeterministic" not in n}
            line += " (non-deterministic attention)"
            if deterministic:
                d = max(deterministic, key=lambda n: deterministic[n][figure])
                line += f"; deterministic: {describe(d, deterministic[d], figure, target, unit)}"
        print(line)


if __name__ == "__main__":
    main()
