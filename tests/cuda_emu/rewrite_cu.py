#!/usr/bin/env python3
"""Rewrites one of kernels/cuda/*.cu into C++ for the CUDA emulator (tests/cuda_emu/emulator.h).

    rewrite_cu.py IN.cu OUT.cc [HEADER.cuh ...]

Only what g++ cannot parse changes, on the same lines (so errors and debuggers point at the .cu):
  kernel<<<grid, block[, shared bytes[, stream]]>>>(args)
      -> ::lattice::emu::launch(::lattice::emu::LaunchConfig(grid, block, ...),
                                [&](auto... a) { kernel(a...); }, args)
  extern __shared__ T name[];  ->  T* name = static_cast<T*>(::lattice::emu::dynamic_shared());
  __shared__ T name[N]...;     ->  static T name[N]...; ::lattice::emu::block_shared(name, sizeof name);
                                   (the block's copy, poisoned when each block starts)
  #pragma unroll               ->  (dropped)
  #include "HEADER.cuh"         ->  the header, rewritten the same way, in its place (for the
                                   headers given that launch kernels themselves)
Keywords, built-ins and intrinsics come from shim/cuda_runtime.h.
"""
import re
import sys

IDENT = re.compile(r"[A-Za-z0-9_:]")


def kernel_start(text, end):
    """Index where the kernel expression ending just before `end` begins (a name, maybe with <...>)."""
    i = end
    while i > 0:
        c = text[i - 1]
        if IDENT.match(c):
            i -= 1
        elif c == ">":  # template arguments: skip the balanced <...>
            depth, i = 1, i - 1
            while depth:
                i -= 1
                depth += {">": 1, "<": -1}.get(text[i], 0)
        else:
            break
    if i == end:
        raise SystemExit(f"rewrite_cu.py: no kernel name before <<< at offset {end}")
    return i


def closing_paren(text, open_index):
    depth = 0
    for i in range(open_index, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise SystemExit(f"rewrite_cu.py: unbalanced ( at offset {open_index}")


def rewrite_launches(text):
    out, pos = [], 0
    while True:
        start = text.find("<<<", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        k = kernel_start(text, start)
        close_cfg = text.index(">>>", start)
        config = text[start + 3:close_cfg]
        paren = close_cfg + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != "(":
            raise SystemExit(f"rewrite_cu.py: expected ( after >>> at offset {paren}")
        end = closing_paren(text, paren)
        args = text[paren + 1:end]
        kernel = text[k:start]
        call = (f"::lattice::emu::launch(::lattice::emu::LaunchConfig({config}), "
                f"[&](auto... a) {{ {kernel}(a...); }}" + (f", {args}" if args.strip() else "") + ")")
        out.append(text[pos:k])
        out.append(call)
        pos = end + 1


def rewrite(text):
    text = re.sub(r"extern\s+__shared__\s+([\w:]+)\s+(\w+)\s*\[\s*\]\s*;",
                  r"\1* \2 = static_cast<\1*>(::lattice::emu::dynamic_shared());", text)
    text = re.sub(r"__shared__\s+([\w:]+)\s+(\w+)((?:\s*\[[^\]]+\])+)\s*;",
                  r"static \1 \2\3; ::lattice::emu::block_shared(\2, sizeof \2);", text)
    text = re.sub(r"^[ \t]*#pragma unroll[^\n]*$", "", text, flags=re.M)
    return rewrite_launches(text)


def inline_headers(text, src, headers):
    """Replaces the #include of each header in `headers` (paths as included) with its rewritten text."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r'\s*#include "([^"]+)"', line)
        if m and m.group(1) in headers:
            with open(m.group(1)) as f:
                body = rewrite(f.read()).replace("#pragma once", "")
            lines[i] = f'#line 1 "{m.group(1)}"\n{body}\n#line {i + 2} "{src}"'
    return "\n".join(lines)


def main():
    src, dst, headers = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    with open(src) as f:
        text = f.read()
    text = inline_headers(rewrite(text), src, headers)
    with open(dst, "w") as f:
        f.write(f'#line 1 "{src}"\n' + text)


if __name__ == "__main__":
    main()
