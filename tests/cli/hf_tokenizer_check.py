#!/usr/bin/env python3
"""The tokenizer of a Lattice Hugging Face export, checked with the `tokenizers` library.

  hf_tokenizer_check.py train OUT_DIR
      writes OUT_DIR/corpus.jsonl and a small byte-level BPE trained on it by `tokenizers`, as
      OUT_DIR/tokenizer.json and as GPT-2 files OUT_DIR/vocab.json + OUT_DIR/merges.txt
  hf_tokenizer_check.py verify EXPORT_DIR PREFIX CORPUS.jsonl
      loads EXPORT_DIR's tokenizer (tokenizer.json, else vocab.json + merges.txt) as Hugging Face
      tools do, checks config.json's eos/bos ids against tokenizer_config.json's eos token, that
      encoding each document of CORPUS plus eos gives exactly the tokens `lattice data prepare`
      wrote to PREFIX.bin, and that decoding gives each document back.
"""
import json
import os
import struct
import sys

from tokenizers import ByteLevelBPETokenizer, Tokenizer, decoders, models, pre_tokenizers, trainers

DOCS = ["the quick brown fox jumps over the lazy dog\n", "héllo wörld, 12345 naïve café\n",
        "日本語のテキスト and ASCII\n", "  spaces\tand\ttabs  \n", "numbers 3.14159 2.71828 1e-9\n"]


def train(out):
    os.makedirs(out, exist_ok=True)
    docs = [DOCS[i % len(DOCS)] + f"line {i}\n" for i in range(60)]
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)


def dataset_tokens(prefix):
    with open(prefix + ".idx", "rb") as f:
        header = f.read(18)
    code = header[17]
    fmt = {8: "H", 4: "i"}[code]
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    return list(struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data))


def verify(export_dir, prefix, corpus):
    path = lambda name: os.path.join(export_dir, name)
    if os.path.exists(path("tokenizer.json")):
        tok = Tokenizer.from_file(path("tokenizer.json"))
    else:
        tok = ByteLevelBPETokenizer(path("vocab.json"), path("merges.txt"))
    config = json.load(open(path("config.json")))
    tok_config = json.load(open(path("tokenizer_config.json")))
    eos = tok.token_to_id(tok_config["eos_token"])
    assert eos is not None, f"eos token {tok_config['eos_token']!r} is not in the tokenizer"
    assert config["eos_token_id"] == eos and config["bos_token_id"] == eos, (config, eos)
    assert tok_config["model_max_length"] == config.get("n_positions", config.get("max_position_embeddings"))
    docs = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    want = []
    for d in docs:
        ids = tok.encode(d).ids
        assert tok.decode(ids) == d, (d, tok.decode(ids))
        want += ids + [eos]
    got = dataset_tokens(prefix)
    assert got == want, f"dataset tokens differ from Hugging Face's: first difference at {next(i for i, (a, b) in enumerate(zip(got + [None], want + [None])) if a != b)}"
    print(f"ok: {export_dir}: {len(docs)} documents, {len(got)} tokens round-trip, eos/bos id {eos}")


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2])
    else:
        verify(*sys.argv[2:5])
