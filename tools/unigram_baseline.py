#!/usr/bin/env python3
"""Prints the unigram (per-token) entropy of a Megatron indexed dataset's tokens in nats:
the loss a model that ignores context would reach. The quickstart's loss should fall well below it."""
import math
import struct
import sys
from collections import Counter

DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}

prefix = sys.argv[1]
with open(prefix + ".idx", "rb") as f:
    header = f.read(9 + 8 + 1)
code = header[17]
fmt = DTYPES[code]
with open(prefix + ".bin", "rb") as f:
    data = f.read()
n = len(data) // struct.calcsize(fmt)
counts = Counter(struct.unpack(f"<{n}{fmt}", data))
entropy = -sum(c / n * math.log(c / n) for c in counts.values())
print(f"unigram baseline of {prefix}: {entropy:.3f} nats/token over {n} tokens "
      f"(a model that learns context goes well below this)")
