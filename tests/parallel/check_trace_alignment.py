#!/usr/bin/env python3
"""Checks that the per-rank trace files of a PP2 run (logging.trace_file) share one time origin:
put side by side, every pipeline transfer goes forward in time.

Usage: check_trace_alignment.py PREFIX STEPS MICROBATCHES [--slack-us US]
(PREFIX.rank0.json is the first stage, PREFIX.rank1.json the last; one model chunk per rank.)

For every step and micro-batch m, with both ranks' events on one timeline:
  - rank 0's forward of m ends before rank 1's forward of m starts (its input is rank 0's output),
    and before rank 1's recv_activation of m ends, when rank 1 waited for it;
  - rank 1's backward of m ends before rank 0's backward of m starts (its grad_output is rank 1's
    grad_input), and before rank 0's recv_grad of m ends, when rank 0 waited for it.
A CPU run times spans by the host clock, so these hold exactly up to the ranks' origin skew (the
barrier's exit skew, see parallel/trace.h); --slack-us allows that much. Also checks otherData: both
origins were taken after a barrier of the 2 ranks."""
import argparse
import json
import sys


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def load(path):
    with open(path) as f:
        return json.load(f)


def by_step(events):
    """{(kind, step, microbatch): (start, end)} for forward/backward/recv_* ('X' events); receives
    carry no step arg, so they get the step whose "step N" span holds them."""
    steps = []
    for e in events:
        if e.get("ph") == "X" and e["name"].startswith("step ") and e["name"][5:].isdigit():
            steps.append((e["ts"], e["ts"] + e["dur"], int(e["name"][5:])))
    out = {}
    for e in events:
        if e.get("ph") != "X" or e["name"] not in ("forward", "backward", "recv_activation", "recv_grad"):
            continue
        args = e.get("args", {})
        if e["name"] in ("forward", "backward"):
            step = args["step"]
            if step < 0:  # evaluation
                continue
        else:
            holding = [s for (a, b, s) in steps if a <= e["ts"] <= b]
            if not holding:
                continue
            step = holding[0]
        key = (e["name"], step, args["microbatch"])
        if key in out:
            fail(f"two {key} events on pid {e['pid']}")
        out[key] = (e["ts"], e["ts"] + e["dur"])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("prefix")
    p.add_argument("steps", type=int)
    p.add_argument("microbatches", type=int)
    p.add_argument("--slack-us", type=float, default=0.0)
    p.add_argument("--no-origin-check", action="store_true", help="skip the otherData check (old files)")
    a = p.parse_args()
    files = [load(f"{a.prefix}.rank{r}.json") for r in (0, 1)]
    if not a.no_origin_check:
        for r, f in enumerate(files):
            other = f["otherData"]
            if other.get("time_origin") != "barrier" or other.get("time_origin_ranks") != 2:
                fail(f"rank {r}: otherData does not say the origin was taken after a barrier of 2 ranks: {other}")
    r0, r1 = (by_step(f["traceEvents"]) for f in files)
    checked = waits = 0
    worst = None  # (margin, what): the smallest gap between cause and effect, negative = violated
    for step in range(1, a.steps + 1):
        for m in range(a.microbatches):
            pairs = [
                (("forward", r0), ("forward", r1), "end", "start"),
                (("forward", r0), ("recv_activation", r1), "end", "end"),
                (("backward", r1), ("backward", r0), "end", "start"),
                (("backward", r1), ("recv_grad", r0), "end", "end"),
            ]
            for (cause, cause_events), (effect, effect_events), cause_at, effect_at in pairs:
                ck, ek = (cause, step, m), (effect, step, m)
                if ck not in cause_events:
                    fail(f"no {cause} of step {step} micro-batch {m} on rank {0 if cause_events is r0 else 1}")
                if ek not in effect_events:
                    if effect.startswith("recv"):
                        continue  # the data was there already: no wait, no event
                    fail(f"no {effect} of step {step} micro-batch {m}")
                if effect.startswith("recv"):
                    waits += 1
                t_cause = cause_events[ck][1]
                t_effect = effect_events[ek][0 if effect_at == "start" else 1]
                margin = t_effect - t_cause
                what = (f"step {step} micro-batch {m}: rank {0 if cause_events is r0 else 1}'s {cause} ends at "
                        f"{t_cause:.3f} us, rank {0 if effect_events is r0 else 1}'s {effect} {effect_at}s at "
                        f"{t_effect:.3f} us")
                if worst is None or margin < worst[0]:
                    worst = (margin, what)
                checked += 1
    if checked == 0 or waits == 0:
        fail(f"{checked} orderings checked, {waits} with a receive wait: the trace has too few events")
    if worst[0] < -a.slack_us:
        fail(f"effect before cause by {-worst[0]:.3f} us (slack {a.slack_us} us): {worst[1]}")
    print(f"ok: {checked} cross-rank orderings ({waits} receive waits) hold; smallest margin {worst[0]:.3f} us "
          f"({worst[1]})")


if __name__ == "__main__":
    main()
