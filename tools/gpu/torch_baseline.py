#!/usr/bin/env python3
"""Time a plain PyTorch training step of the Hugging Face model that matches a Lattice config.

Why it exists: Lattice's tokens/s means little on its own. This script builds the equivalent
GPT2LMHeadModel or LlamaForCausalLM (random init from the config, nothing downloaded), trains it
with AdamW on random token ids at the same micro-batch, sequence length and batch per optimizer
step (training.global_batch_size / micro_batch_size micro-batches accumulated, as one data-parallel
rank of `lattice bench` runs them), and prints one line to set beside Lattice's own number.

  python3 tools/gpu/torch_baseline.py --config configs/gpt2-124m.json [--set key=value ...]
      [--steps 10] [--warmup 3] [--dtype fp32|tf32|bf16] [--compile] [--device cuda]

fp32: fp32 weights and math, TF32 off. bf16: fp32 weights under torch.autocast(bfloat16).
The last line printed is the result, or "pytorch: failed: ..." with exit status 1.
"""
import argparse
import contextlib
import inspect
import json
import resource
import sys
import time


def load_config(path, overrides):
    """The Lattice JSON config with --set a.b=v applied (v parsed as JSON when it parses, as lattice does)."""
    with open(path) as f:
        cfg = json.load(f)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected key=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node, *parts = cfg, *key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return cfg


def build_model(m):
    """The HF model for cfg["model"], with Lattice's arch-preset defaults (trainer/config.cc)."""
    arch = m.get("arch", "gpt2")
    gpt2 = arch == "gpt2"
    H, heads = m["hidden_size"], m["num_attention_heads"]
    kv_heads = m.get("num_kv_heads", heads)
    act = m.get("activation", "gelu" if gpt2 else "swiglu")
    if "ffn_hidden_size" in m:
        ffn = m["ffn_hidden_size"]
    else:
        ffn = (8 * H // 3 + 255) // 256 * 256 if act == "swiglu" else 4 * H
    tie = m.get("tie_embeddings", gpt2)
    bias = m.get("bias", gpt2)
    eps = m.get("norm_eps", 1e-5)
    preset = {"norm": "layernorm" if gpt2 else "rmsnorm", "activation": "gelu" if gpt2 else "swiglu",
              "position_embedding": "learned" if gpt2 else "rope"}
    for key, want in preset.items():
        if m.get(key, want) != want:
            raise ValueError(f"model.{key}={m[key]!r} has no Hugging Face {arch} equivalent")

    import transformers

    common = dict(vocab_size=m["vocab_size"], tie_word_embeddings=tie, initializer_range=m.get("init_std", 0.02),
                  attn_implementation="sdpa")

    if gpt2:
        if kv_heads != heads or not bias:
            raise ValueError("GPT-2 in Hugging Face has no grouped-query attention and always has biases")
        config = transformers.GPT2Config(
            n_layer=m["num_layers"], n_embd=H, n_head=heads, n_inner=ffn, n_positions=m["seq_length"],
            layer_norm_epsilon=eps, activation_function="gelu_new",
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **common)
        cls = transformers.GPT2LMHeadModel
    elif arch == "llama":
        theta = m.get("rope_theta", 10000.0)
        # transformers 5 moved rope_theta into rope_parameters; 4.x takes it directly.
        if "rope_parameters" in inspect.signature(transformers.LlamaConfig.__init__).parameters:
            rope = {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
        else:
            rope = {"rope_theta": theta}
        config = transformers.LlamaConfig(
            num_hidden_layers=m["num_layers"], hidden_size=H, num_attention_heads=heads,
            num_key_value_heads=kv_heads, intermediate_size=ffn, max_position_embeddings=m["seq_length"],
            rms_norm_eps=eps, hidden_act="silu", attention_bias=bias, mlp_bias=bias, **rope, **common)
        cls = transformers.LlamaForCausalLM
    else:
        raise ValueError(f"model.arch={arch!r}: expected gpt2 or llama")
    return cls(config)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--dtype", choices=["fp32", "tf32", "bf16"], default="fp32")  # tf32: fp32 with TF32 matmuls
    p.add_argument("--compile", action="store_true")
    p.add_argument("--device", default="cuda")
    args = p.parse_args()

    cfg = load_config(args.config, args.set)
    m, t, o = cfg["model"], cfg.get("training", {}), cfg.get("optimizer", {})
    B, T = t.get("micro_batch_size", 1), m["seq_length"]
    accum = t.get("global_batch_size", B) // B
    if accum < 1 or accum * B != t.get("global_batch_size", B):
        raise ValueError(f"training.global_batch_size {t.get('global_batch_size')} is not a multiple of "
                         f"micro_batch_size {B}")

    import torch

    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available (use --device cpu)")
    torch.backends.cuda.matmul.allow_tf32 = args.dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = args.dtype == "tf32"
    torch.manual_seed(t.get("seed", 1234))
    device = torch.device(args.device)

    with device:  # initialize on the device: a 1.5B model's init on the host takes minutes
        model = build_model(m).to(device).train()
    n_params = sum(q.numel() for q in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=o.get("lr", 3e-4), betas=(o.get("beta1", 0.9), o.get("beta2", 0.95)),
                            eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.1), fused=cuda)
    step_model = torch.compile(model) if args.compile else model
    ids = torch.randint(0, m["vocab_size"], (B, T), device=device)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())

    def step():
        for _ in range(accum):
            with autocast:
                loss = step_model(input_ids=ids, labels=ids).loss / accum
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.steps):
            step()
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        peak_gib = torch.cuda.max_memory_allocated() / 2**30
    else:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        seconds = time.perf_counter() - t0
        peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # process peak RSS (KiB on Linux)

    ms = seconds / max(args.steps, 1) * 1e3
    tok_s = accum * B * T * args.steps / seconds
    label = args.dtype + ("+compile" if args.compile else "")
    print(f"pytorch: {m.get('arch', 'gpt2')} {label} micro-batch {B} x {accum} seq {T}: {tok_s:,.0f} tokens/s, "
          f"{ms:.2f} ms/step, {n_params / 1e6:.1f}M params, peak memory {peak_gib:.2f} GiB")


if __name__ == "__main__":
    try:
        main()
    except (Exception, KeyboardInterrupt) as e:  # one plain line, e.g. torch.OutOfMemoryError
        msg = (str(e).strip().splitlines() or [""])[0]
        print(f"pytorch: failed: {type(e).__name__}: {msg}", flush=True)
        sys.exit(1)
