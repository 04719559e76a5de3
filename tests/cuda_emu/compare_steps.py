#!/usr/bin/env python3
"""compare_steps.py A.jsonl B.jsonl NAME TOLERANCE: two runs' metrics files have the same steps, and
every loss and grad norm of B is within TOLERANCE (relative) of A's. Exit 1 with both lists if not."""
import json
import sys


def steps(path):
    rows = [json.loads(line) for line in open(path)]
    return [(r["step"], r["loss"], r["grad_norm"]) for r in rows if "loss" in r and "step" in r]


def main():
    a, b, name, tolerance = steps(sys.argv[1]), steps(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    if not a or [s[0] for s in a] != [s[0] for s in b]:
        sys.exit(f"{name}: steps {[s[0] for s in b]} against {[s[0] for s in a]}")
    worst = max(abs(y - x) / abs(x) for sa, sb in zip(a, b) for x, y in zip(sa[1:], sb[1:]))
    if worst > tolerance:
        sys.exit(f"{name}: {b} against {a}: relative difference {worst:.2e} > {tolerance:g}")
    print(f"ok {name}: {len(a)} steps, losses and grad norms within {worst:.2e} of each other (bound {tolerance:g})")


if __name__ == "__main__":
    main()
