#!/usr/bin/env python3
"""Checks the NVTX ranges of one rank's training run, as tests/trainer/nvtx_recorder.cc recorded them
(lines "<thread> push <domain> <message>" / "<thread> pop <domain>").

usage: check_nvtx_ranges.py RECORD --steps N --microbatches M --chunks C [--eval-step S]... [--pipeline]

- every range is in the domain "lattice", and every thread pops exactly what it pushed;
- the top-level ranges named "step ..." are "step 1" .. "step N", in order;
- each step k holds the forward and the backward of every (micro-batch, chunk) of the step once
  ("forward step=k microbatch=m chunk=c"), each micro-batch's forward on a chunk before its backward
  there, then "grad norm", then "optimizer" (holding the AdamW ops);
- the forwards hold the ops they ran (attention_forward), the backwards theirs (attention_backward);
- with --pipeline, the rank waited for pipeline transfers inside its steps (recv_activation or
  recv_grad ranges);
- each --eval-step S is a top-level "evaluation step=S" holding forwards of step -1.
Fails with the first difference."""
import argparse
import sys


class Range:
    def __init__(self, message):
        self.message = message
        self.children = []

    def descendants(self):
        for c in self.children:
            yield c
            yield from c.descendants()


def fail(message):
    sys.exit(f"FAIL: {message}")


def parse(path):
    roots, stacks = {}, {}
    for n, line in enumerate(open(path), 1):
        parts = line.rstrip("\n").split(" ", 3)
        thread, what, domain = parts[0], parts[1], parts[2]
        if domain != "lattice":
            fail(f"{path}:{n}: domain {domain!r}, expected 'lattice'")
        stack = stacks.setdefault(thread, [])
        if what == "push":
            r = Range(parts[3])
            (stack[-1].children if stack else roots.setdefault(thread, [])).append(r)
            stack.append(r)
        elif not stack:
            fail(f"{path}:{n}: thread {thread} pops a range it never pushed")
        else:
            stack.pop()
    for thread, stack in stacks.items():
        if stack:
            fail(f"{path}: thread {thread} left {len(stack)} range(s) open: {[r.message for r in stack]}")
    main = [t for t, rs in roots.items() if any(r.message == "step 1" for r in rs)]
    if len(main) != 1:
        fail(f"{path}: expected one thread with a 'step 1' range, found {len(main)}")
    return roots[main[0]]


def check_step(step, k, args):
    kids = [c.message for c in step.children]
    expected = [f"{d} step={k} microbatch={m} chunk={c}" for d in ("forward", "backward")
                for m in range(args.microbatches) for c in range(args.chunks)]
    got = sorted(x for x in kids if x.startswith(("forward ", "backward ")))
    if got != sorted(expected):
        fail(f"step {k}: forwards and backwards {got}, expected {sorted(expected)}")
    for m in range(args.microbatches):
        for c in range(args.chunks):
            if kids.index(f"forward step={k} microbatch={m} chunk={c}") > kids.index(
                    f"backward step={k} microbatch={m} chunk={c}"):
                fail(f"step {k}: the backward of micro-batch {m}, chunk {c} comes before its forward")
    tail = [x for x in kids if x in ("grad norm", "optimizer")]
    if tail != ["grad norm", "optimizer"] or kids.index("grad norm") < max(
            i for i, x in enumerate(kids) if x.startswith("backward ")):
        fail(f"step {k}: expected 'grad norm' then 'optimizer' after the last backward, got {kids}")
    optimizer = next(c for c in step.children if c.message == "optimizer")
    if not any(d.message == "adamw_update" for d in optimizer.descendants()):
        fail(f"step {k}: the optimizer range holds no adamw_update op")
    for c in step.children:
        op = {"forward": "attention_forward", "backward": "attention_backward"}.get(c.message.split(" ")[0])
        if op and not any(d.message == op for d in c.descendants()):
            fail(f"step {k}: '{c.message}' holds no {op} op")
    if args.pipeline and not any(d.message.startswith(("recv_activation", "recv_grad")) for d in step.descendants()):
        fail(f"step {k}: no pipeline receive was waited for (recv_activation / recv_grad ranges)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("record")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--microbatches", type=int, required=True)
    p.add_argument("--chunks", type=int, default=1)
    p.add_argument("--eval-step", type=int, action="append", default=[])
    p.add_argument("--pipeline", action="store_true")
    args = p.parse_args()
    top = parse(args.record)
    steps = [r for r in top if r.message.startswith("step ")]
    names = [r.message for r in steps]
    if names != [f"step {k}" for k in range(1, args.steps + 1)]:
        fail(f"top-level step ranges {names}, expected step 1 .. step {args.steps}")
    for k, step in enumerate(steps, 1):
        check_step(step, k, args)
    evaluations = [r for r in top if r.message.startswith("evaluation ")]
    if [r.message for r in evaluations] != [f"evaluation step={s}" for s in args.eval_step]:
        fail(f"evaluation ranges {[r.message for r in evaluations]}, expected steps {args.eval_step}")
    for r in evaluations:
        if not any(c.message.startswith("forward step=-1 ") for c in r.children):
            fail(f"'{r.message}' holds no forward of step -1")
    ops = sum(1 for r in top for d in r.descendants())
    print(f"OK: {args.record}: {len(steps)} steps, {len(evaluations)} evaluation(s), {ops} nested ranges")


if __name__ == "__main__":
    main()
