#!/usr/bin/env python3
"""Helper of tools/bench_data_prepare.sh.

  bench_data_prepare.py corpus OUT.jsonl MB        deterministic varied corpus, {"text": ...} per line
  bench_data_prepare.py train CORPUS.jsonl OUT.json  byte-level BPE tokenizer.json (HF `tokenizers`)
  bench_data_prepare.py encode CORPUS.jsonl TOKENIZER.json
      encodes every document with Tokenizer.encode_batch (threads from RAYON_NUM_THREADS) and
      prints one JSON line: {"seconds", "mb", "mb_per_s", "documents", "tokens"}; only the
      encode_batch call is timed (reading and JSON parsing are not), and mb counts the JSONL
      file's bytes, as lattice's summary does.
"""
import json
import os
import random
import sys
import time

WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be or "
         "has had not but first new one their after also who they two been its time year people government "
         "world city school during while would could should about into over model training data token "
         "pipeline throughput memory gradient parallel tensor layer attention").split()
RARE = ("café naïve Zürich façade São Łódź straße jalapeño Dvořák Ångström Москва Україна Ελλάδα "
        "東京都は日本の首都です 我们今天去公园散步 한국어 हिन्दी العربية 😀 👍🏽 ✨").split()
CODE = ["def f(x):\n    return x ** 2 + 1\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "SELECT id, name FROM users WHERE age >= 18;\n", "const x = {a: 1, b: [2, 3]};  // comment\n"]


def sentence(rng):
    n = rng.randint(4, 30)
    words = []
    for _ in range(n):
        k = rng.random()
        if k < 0.85:
            w = rng.choice(WORDS)
            words.append(w.capitalize() if rng.random() < 0.08 else w)
        elif k < 0.93:
            words.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
        else:
            words.append(rng.choice(RARE))
    return " ".join(words) + rng.choice([".", ".", ".", "?", "!", ";", ","])


def document(rng):
    parts = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.05:
            parts.append(rng.choice(CODE))
        else:
            parts.append(" ".join(sentence(rng) for _ in range(rng.randint(1, 8))))
    return "\n\n".join(parts)


def corpus(out, mb):
    rng = random.Random(20240601)
    target = int(float(mb) * 1e6)
    size = 0
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        while size < target:
            line = json.dumps({"text": document(rng)}, ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode("utf-8"))
    os.replace(out + ".tmp", out)


def texts(path, limit_bytes=None):
    out, size = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"])
            size += len(line)
            if limit_bytes and size >= limit_bytes:
                break
    return out


def train(path, out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=16384, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts(path, limit_bytes=8_000_000), trainer=trainer)
    tok.save(out + ".tmp")
    os.replace(out + ".tmp", out)


def encode(path, tokenizer):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer)
    docs = texts(path)
    start = time.perf_counter()
    encs = tok.encode_batch(docs, add_special_tokens=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(e.ids) for e in encs)
    mb = os.path.getsize(path) / 1e6
    print(json.dumps({"seconds": seconds, "mb": mb, "mb_per_s": mb / seconds, "documents": len(docs),
                      "tokens": tokens}))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"corpus": corpus, "train": train, "encode": encode}[cmd](*args)
