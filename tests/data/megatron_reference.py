#!/usr/bin/env python3
"""An independent reference for two of Megatron-LM's sampling rules, written from Megatron's Python
and helpers.cpp (not from lattice's C++), for tests/data/megatron_reference_test.

  megatron_reference.py split WEIGHTS N [N ...]
      one line per N: the four split bounds "b0 b1 b2 b3" exactly as megatron-core computes them
      (the split matrix's bookends times N, rounded).
  megatron_reference.py blend WEIGHTS SIZE
      line 1: the normalized weights as float.hex(), space separated;
      then SIZE lines "dataset_index dataset_sample_index" from build_blending_indices.

WEIGHTS is comma separated. Python floats are IEEE float64 with every operation rounded on its
own (no fused multiply-add), as in Megatron's helpers built without -march on x86-64.
"""
import functools
import re
import sys

import numpy


def normalize(weights):
    # megatron/core/datasets/utils.py normalize(): w / numpy.sum(w), float64.
    w = numpy.array(weights, dtype=numpy.float64)
    w_sum = numpy.sum(w)
    return (w / w_sum).tolist()


def parse_and_normalize_split(split):
    # megatron/core/datasets/blended_megatron_dataset_config.py
    split = list(map(float, re.findall(r"[.0-9]+", split)))
    split = split + [0.0 for _ in range(3 - len(split))]
    assert len(split) == 3
    assert all(map(lambda _: _ >= 0.0, split))
    return normalize(split)


def split_bounds(split, num_elements):
    # megatron/core/datasets/blended_megatron_dataset_config.py convert_split_vector_to_split_matrix
    # (its bookends, the running sums of the normalized weights) and blended_megatron_dataset_builder.py
    # _build_megatron_dataset_splits: each bookend times float(N), rounded by Python's round (halves
    # to even). A zero-weight split is None there (no dataset), an empty range here: same bounds.
    bookends = functools.reduce(lambda a, b: a + [a[len(a) - 1] + b], [[0], *split])
    return [int(round(c * float(num_elements))) for c in bookends]


def build_blending_indices(weights, size):
    # megatron/core/datasets/helpers.cpp build_blending_indices, in Python floats.
    current_samples = [0] * len(weights)
    dataset_index = []
    dataset_sample_index = []
    for sample_idx in range(size):
        sample_idx_double = max(float(sample_idx), 1.0)
        max_error_index = 0
        max_error = weights[0] * sample_idx_double - float(current_samples[0])
        for dataset_idx in range(1, len(weights)):
            error = weights[dataset_idx] * sample_idx_double - float(current_samples[dataset_idx])
            if error > max_error:
                max_error = error
                max_error_index = dataset_idx
        dataset_index.append(max_error_index)
        dataset_sample_index.append(current_samples[max_error_index])
        current_samples[max_error_index] += 1
    return dataset_index, dataset_sample_index


def main(argv):
    if len(argv) >= 3 and argv[0] == "split":
        split = parse_and_normalize_split(argv[1])
        for n in argv[2:]:
            print(" ".join(str(b) for b in split_bounds(split, int(n))))
        return 0
    if len(argv) == 3 and argv[0] == "blend":
        raw = [float(x) for x in argv[1].split(",")]
        # The builder normalizes the blend weights, then BlendedDataset normalizes them again.
        weights = normalize(normalize(raw))
        print(" ".join(float(w).hex() for w in weights))
        index, sample = build_blending_indices(weights, int(argv[2]))
        sys.stdout.write("".join(f"{i} {s}\n" for i, s in zip(index, sample)))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
