#!/usr/bin/env python3
"""The training loop's stall per checkpoint save, from the metrics files of two runs of one model:
one saving asynchronously, one synchronously, both every INTERVAL steps (check.sh's GPU row; issue 5's
target: the async stall at most 5% of the synchronous save).

A step's `step_ms` leaves out the save that follows it (the loop saves after it records the step),
so a step's cost is the time between its metrics line and the one before. A save after step s
costs the loop what steps s+1 and s+2 took beyond two median steps of the run: the save itself, the
fence before step s+1's optimizer step (an overlapped snapshot), and the writer beside step s+2.
Steps 1 and 2 (start-up) and the steps around each save are left out of the median.

  save_stall.py ASYNC.jsonl SYNC.jsonl INTERVAL
"""
import json
import statistics
import sys


def step_times(path):
    """{step: ms since the line before} for the last run in a metrics file (after its run_start)."""
    lines = [json.loads(line) for line in open(path) if line.strip()]
    starts = [i for i, m in enumerate(lines) if "run_start" in m]
    run = lines[starts[-1] + 1:] if starts else lines
    stamps = {m["step"]: m["time"] for m in run if "loss" in m}
    return {s: (stamps[s] - stamps[s - 1]) * 1e3 for s in sorted(stamps) if s - 1 in stamps}


def stall_per_save(path, interval):
    """(mean stall per save in ms, median step ms, saves counted)."""
    t = step_times(path)
    saves = [s for s in t if s % interval == 0 and s + 2 in t]
    near = {s + k for s in saves for k in (1, 2)}
    base = [ms for s, ms in t.items() if s > 2 and s not in near]
    if not saves or len(base) < 3:
        sys.exit(f"save_stall.py: {path}: too few steps around saves every {interval} (steps {sorted(t)})")
    median = statistics.median(base)
    stalls = [t[s + 1] + t[s + 2] - 2 * median for s in saves]
    return statistics.mean(stalls), median, len(saves)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: " + __doc__.strip().splitlines()[-1].strip())
    interval = int(sys.argv[3])
    async_stall, async_median, n = stall_per_save(sys.argv[1], interval)
    sync_stall, sync_median, m = stall_per_save(sys.argv[2], interval)
    print(f"synchronous save: {sync_stall:.0f} ms per save ({m} saves; median step {sync_median:.1f} ms)")
    share = (f"{100 * async_stall / sync_stall:.1f}% of the synchronous save" if sync_stall > 0
             else "no synchronous cost seen")
    print(f"async save: stall {async_stall:.1f} ms per save = {share} (target: at most 5%), "
          f"{100 * async_stall / async_median:.1f}% of a median step of {async_median:.1f} ms ({n} saves)")


if __name__ == "__main__":
    main()
