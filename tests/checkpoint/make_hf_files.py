#!/usr/bin/env python3
"""Independent safetensors/HF compatibility check for Lattice's checkpoint tests.

Uses the reference `safetensors` library (PyPI: safetensors, numpy) to write Hugging Face layout
files that the C++ tests import, and to read back files that Lattice wrote. Exit code 0 = ok.

  make_hf_files.py probe                        can the libraries be imported?
  make_hf_files.py basic OUT_F32 OUT_F16        small files for the reader tests
  make_hf_files.py gpt2 OUT                     tiny GPT-2 (HF GPT2LMHeadModel layout, F32)
  make_hf_files.py llama OUT                    tiny Llama (HF LlamaForCausalLM layout, F16)
  make_hf_files.py llama-dir DIR SHARDS         the same tensors as an HF model directory: config.json and
                                                model.safetensors (SHARDS 1), or model-0000x-of-0000y.safetensors
                                                shards and model.safetensors.index.json
  make_hf_files.py check-ours PATH              verify the file the C++ round-trip test wrote
  make_hf_files.py compare EXPORT_DIR REFERENCE FAMILY
                                                Lattice's export == the reference file's weights

Values are value(tag, i) = (((7 i + 13 tag) mod 2039) - 1019) / 64 where i is the row-major
index in the HF tensor and tag = 1 + the tensor's position in the sorted list of the file's
names: exact in f16 and f32, distinct within a tensor and different between tensors. The C++
test (hf_interop_test.cc) recomputes it in our [out, in] layout to check the name and transpose
mapping.
"""
import json
import os
import struct
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as e:  # the C++ test turns this into a failure that names the fix
    print(f"IMPORT-ERROR: {e}; run: pip install safetensors numpy", file=sys.stderr)
    sys.exit(3)

# Tiny model shapes; hf_interop_test.cc uses the same numbers.
GPT2 = dict(layers=2, hidden=16, heads=4, ffn=32, vocab=11, seq=8)
LLAMA = dict(layers=2, hidden=16, heads=4, kv_heads=2, ffn=24, vocab=13, seq=8)


def value(tag, n):
    i = np.arange(n, dtype=np.int64)
    return ((((7 * i + 13 * tag) % 2039) - 1019) / 64.0).astype(np.float64)


def fill(shapes, dtype):
    """shapes: {name: shape}; returns {name: array} with the documented values."""
    out = {}
    for tag, name in enumerate(sorted(shapes), start=1):
        shape = shapes[name]
        n = int(np.prod(shape)) if len(shape) else 1
        out[name] = value(tag, n).reshape(shape).astype(dtype)
    return out


def gpt2_shapes(prefix):
    c = GPT2
    H, F, V, S = c["hidden"], c["ffn"], c["vocab"], c["seq"]
    s = {f"{prefix}wte.weight": (V, H), f"{prefix}wpe.weight": (S, H)}
    for i in range(c["layers"]):
        p = f"{prefix}h.{i}."
        s[p + "ln_1.weight"] = (H,)
        s[p + "ln_1.bias"] = (H,)
        s[p + "attn.c_attn.weight"] = (H, 3 * H)
        s[p + "attn.c_attn.bias"] = (3 * H,)
        s[p + "attn.c_proj.weight"] = (H, H)
        s[p + "attn.c_proj.bias"] = (H,)
        s[p + "ln_2.weight"] = (H,)
        s[p + "ln_2.bias"] = (H,)
        s[p + "mlp.c_fc.weight"] = (H, F)
        s[p + "mlp.c_fc.bias"] = (F,)
        s[p + "mlp.c_proj.weight"] = (F, H)
        s[p + "mlp.c_proj.bias"] = (H,)
    s[f"{prefix}ln_f.weight"] = (H,)
    s[f"{prefix}ln_f.bias"] = (H,)
    return s


def write_gpt2(out):
    # As transformers saved older GPT-2 checkpoints: "transformer." prefix, attention-mask buffers
    # and the tied lm_head.weight; all three are things an importer must cope with.
    c = GPT2
    shapes = gpt2_shapes("transformer.")
    for i in range(c["layers"]):
        shapes[f"transformer.h.{i}.attn.bias"] = (1, 1, c["seq"], c["seq"])
        shapes[f"transformer.h.{i}.attn.masked_bias"] = ()
    shapes["lm_head.weight"] = (c["vocab"], c["hidden"])
    tensors = fill(shapes, np.float32)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].copy()  # tied
    save_file(tensors, out, metadata={"format": "pt"})


def llama_shapes():
    c = LLAMA
    H, F, V = c["hidden"], c["ffn"], c["vocab"]
    D = H // c["heads"]
    s = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,), "lm_head.weight": (V, H)}
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = (H,)
        s[p + "self_attn.q_proj.weight"] = (c["heads"] * D, H)
        s[p + "self_attn.k_proj.weight"] = (c["kv_heads"] * D, H)
        s[p + "self_attn.v_proj.weight"] = (c["kv_heads"] * D, H)
        s[p + "self_attn.o_proj.weight"] = (H, c["heads"] * D)
        s[p + "post_attention_layernorm.weight"] = (H,)
        s[p + "mlp.gate_proj.weight"] = (F, H)
        s[p + "mlp.up_proj.weight"] = (F, H)
        s[p + "mlp.down_proj.weight"] = (H, F)
    return s


def write_llama(out):
    # F16 like most published Llama checkpoints, plus the rotary inv_freq buffer (F32) that older
    # transformers versions saved.
    c = LLAMA
    shapes = llama_shapes()
    D = c["hidden"] // c["heads"]
    for i in range(c["layers"]):
        shapes[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = (D // 2,)
    tensors = fill(shapes, np.float16)
    for i in range(c["layers"]):
        name = f"model.layers.{i}.self_attn.rotary_emb.inv_freq"
        tensors[name] = tensors[name].astype(np.float32)
    save_file(tensors, out, metadata={"format": "pt"})


def write_llama_dir(out, shards):
    # As transformers' save_pretrained lays a model out: whole tensors spread over the shards in name
    # order, each shard a safetensors file, the index mapping every tensor to its shard.
    os.makedirs(out, exist_ok=True)
    single = os.path.join(out, "model.safetensors")
    write_llama(single)
    tensors = load_file(single)
    c = LLAMA
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c["vocab"],
                   "hidden_size": c["hidden"], "intermediate_size": c["ffn"], "num_hidden_layers": c["layers"],
                   "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"]}, fh)
    if shards == 1:
        return
    os.remove(single)
    names = sorted(tensors)
    weight_map = {}
    for k in range(shards):
        part = names[k::shards]
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(out, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    total = sum(t.nbytes for t in tensors.values())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2)


def write_basic(out_f32, out_f16):
    save_file(
        {
            "vec": np.array([1.5, -2.0, 0.25], dtype=np.float32),
            "mat": (np.arange(6, dtype=np.float32) * 0.5 - 1.0).reshape(2, 3),
            "cube": (np.arange(24, dtype=np.float32) - 12.0).reshape(2, 3, 4),
            "scalar": np.array(3.25, dtype=np.float32),
            "ids": np.array([1, -2, 2147483647], dtype=np.int32),
        },
        out_f32,
        metadata={"source": "python", "format": "pt"},
    )
    save_file(
        {
            # normal, subnormal (2^-24), negative zero, max finite, inf
            "half": np.array([1.0, -0.5, 2.0**-24, -0.0, 65504.0, np.inf], dtype=np.float16),
            "half2d": (np.arange(12, dtype=np.float16) / np.float16(8)).reshape(3, 4),
        },
        out_f16,
    )


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check_ours(path):
    """The tensors tests/checkpoint/safetensors_test.cc writes: see 'our writer is readable by the Python library'."""
    expected = {
        "alpha": np.array([0.5, -1.25, 3.0], dtype=np.float32),
        "beta": (np.arange(6, dtype=np.float32) * 0.25).reshape(2, 3),
        "gamma": (np.arange(24, dtype=np.float32) - 12.0).reshape(2, 3, 4),
        "scalar": np.array(7.5, dtype=np.float32),
        "ids": np.array([1, -2, 3, 2147483647], dtype=np.int32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    got = load_file(path)
    if sorted(got) != sorted(expected):
        fail(f"names {sorted(got)} != {sorted(expected)}")
    for k, want in expected.items():
        have = got[k]
        if have.dtype != want.dtype or have.shape != want.shape or not np.array_equal(have, want):
            fail(f"{k}: got {have.dtype}{list(have.shape)} {have.ravel()[:8]}, want {want.dtype}{list(want.shape)}")
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    if meta != {"format": "pt", "step": "42"}:
        fail(f"metadata {meta}")
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    if n % 8 != 0:
        fail(f"header length {n} is not a multiple of 8")
    entries = sorted((v["data_offsets"][0], k) for k, v in header.items() if k != "__metadata__")
    order = [k for _, k in entries]
    if order != sorted(order):
        fail(f"data order {order} is not sorted by name")
    print("OK check-ours", sorted(got))


BUFFER_SUFFIXES = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")


def compare(export_dir, reference, family):
    ours = load_file(os.path.join(export_dir, "model.safetensors"))
    ref = load_file(reference)
    with open(os.path.join(export_dir, "config.json")) as fh:
        config = json.load(fh)
    tied = bool(config.get("tie_word_embeddings"))
    want = {}
    for k, v in ref.items():
        if k.endswith(BUFFER_SUFFIXES) or (tied and k == "lm_head.weight"):
            continue
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        want[k] = v
    if sorted(ours) != sorted(want):
        fail(f"names differ: extra {sorted(set(ours) - set(want))[:5]}, missing {sorted(set(want) - set(ours))[:5]}")
    for k in want:
        if ours[k].dtype != np.float32:
            fail(f"{k}: exported dtype {ours[k].dtype}, want float32")
        if ours[k].shape != want[k].shape or not np.array_equal(ours[k], want[k].astype(np.float32)):
            fail(f"{k}: values differ (shape {ours[k].shape} vs {want[k].shape})")
    if family == "gpt2":
        c = GPT2
        expect = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": c["hidden"],
                  "n_layer": c["layers"], "n_head": c["heads"], "n_positions": c["seq"], "n_inner": c["ffn"],
                  "vocab_size": c["vocab"], "activation_function": "gelu_new", "tie_word_embeddings": True}
    else:
        c = LLAMA
        expect = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": c["hidden"],
                  "num_hidden_layers": c["layers"], "num_attention_heads": c["heads"],
                  "num_key_value_heads": c["kv_heads"], "intermediate_size": c["ffn"],
                  "vocab_size": c["vocab"], "hidden_act": "silu", "tie_word_embeddings": False}
    for k, v in expect.items():
        if config.get(k) != v:
            fail(f"config.json {k} = {config.get(k)!r}, want {v!r}")
    print(f"OK compare {family}: {len(want)} tensors equal")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    cmd = argv[1]
    if cmd == "probe":
        print(f"safetensors ok, numpy {np.__version__}")
    elif cmd == "basic":
        write_basic(argv[2], argv[3])
    elif cmd == "gpt2":
        write_gpt2(argv[2])
    elif cmd == "llama":
        write_llama(argv[2])
    elif cmd == "llama-dir":
        write_llama_dir(argv[2], int(argv[3]))
    elif cmd == "check-ours":
        check_ours(argv[2])
    elif cmd == "compare":
        compare(argv[2], argv[3], argv[4])
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
