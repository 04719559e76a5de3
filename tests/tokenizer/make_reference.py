#!/usr/bin/env python3
"""Reference data for the tokenizer tests, made with the Hugging Face `tokenizers` library.

Usage: make_reference.py OUT_DIR

Writes into OUT_DIR:
  corpus.jsonl             deterministic documents ({"text": ...} per line, >= 1 MB in all)
  gpt2/tokenizer.json      BPE trained here: ByteLevel pre-tokenizer (GPT-2 regex), <|endoftext|>
  gpt2/vocab.json, gpt2/merges.txt   the same model as GPT-2 files
  expected_gpt2_megatron   gpt2's ids without added tokens: Megatron-LM's GPT2BPETokenizer, which
                           encodes "<|endoftext|>" in text as text (what gpt2-bpe matches)
  gpt2_prefix.json         gpt2 with ByteLevel(add_prefix_space=true), merges in the "a b" form
  llama3.json              BPE trained here: Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=false),
                           ignore_merges, three special tokens
  expected_<name>.jsonl    HF's ids for each document (add_special_tokens=False), one list per line
  hf_seconds.json          HF's single-thread encode time per tokenizer (for a speed comparison)
"""
import json
import os
import random
import sys
import time

try:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    sys.stderr.write("python3 cannot import `tokenizers`: run tools/install_deps.sh "
                     "(pip install tokenizers), then the README's test command\n")
    sys.exit(3)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this "
         "be or has had not but first new one their after also who they two been its time year "
         "people government world city school during while would could should about into over").split()
CONTRACTIONS = ["it's", "don't", "we're", "you've", "I'm", "they'll", "he'd", "IT'S", "DON'T",
                "WE'RE", "YOU'VE", "I'M", "THEY'LL", "HE'D", "She'S", "o'clock", "rock'n'roll"]
LATIN = "café naïve résumé Zürich façade São Paulo Łódź Ærøskøbing straße jalapeño Dvořák Ångström".split()
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "Z\u0335\u030c"]
GREEK = "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο Ελλάδα φιλοσοφία".split()
CYRILLIC = "Съешь же ещё этих мягких французских булок да выпей чаю Москва Україна".split()
CJK = ["我们今天去公园散步", "東京都は日本の首都です", "한국어 텍스트 예제입니다", "中文分词没有空格", "ひらがなとカタカナ"]
ARABIC = "اللغة العربية جميلة جدا مرحبا بالعالم".split()
DEVANAGARI = "हिन्दी भाषा में लिखा गया पाठ नमस्ते दुनिया".split()
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "❤️", "🧑🏿‍💻", "✨", "🤖"]
PUNCT = list(".,;:!?-—–()[]{}\"'`~@#$%^&*_+=<>/\\|…«»“”‘’")
SPECIALS = ["<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>"]
CODE = [
    "def f(x):\n    return x ** 2 + 1\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "if __name__ == '__main__':\n    main()\n",
    "SELECT id, name FROM users WHERE age >= 18;\r\n",
    "const x = {a: 1, b: [2, 3]};  // comment\n",
    "#include <vector>\nint main() { return 0; }\n",
    "    \n\n\t\t  x  =  y\t\n",
]


def number(rng):
    k = rng.random()
    if k < 0.3:
        return str(rng.randint(0, 9))
    if k < 0.6:
        return str(rng.randint(10, 99999))
    if k < 0.8:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randint(1, 6)}f}"
    if k < 0.9:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(6, 40)))
    return rng.choice(["٣٤٥", "१२३", "½", "²", "Ⅻ", "1,234,567", "3.14e-10"])


def whitespace(rng):
    return rng.choice([" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "  \n  ", "\t \t", "\u00a0",
                       "\u3000", " \r\n\r\n", "\n   ", "      "])


def token(rng):
    k = rng.random()
    if k < 0.40:
        w = rng.choice(WORDS)
        return w.capitalize() if rng.random() < 0.1 else (w.upper() if rng.random() < 0.03 else w)
    pools = [CONTRACTIONS, LATIN, COMBINING, GREEK, CYRILLIC, CJK, ARABIC, DEVANAGARI, EMOJI, PUNCT]
    if k < 0.52:
        return number(rng)
    if k < 0.53:
        return rng.choice(SPECIALS)
    if k < 0.54:
        return rng.choice(PUNCT) * rng.randint(2, 12)
    if k < 0.545:  # long pieces exercise the heap merge
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(60, 300)))
    return rng.choice(rng.choice(pools))


def document(rng):
    parts = []
    if rng.random() < 0.1:
        parts.append(rng.choice(CODE))
    for _ in range(rng.randint(1, 250)):
        parts.append(token(rng))
        parts.append(" " if rng.random() < 0.8 else whitespace(rng))
    if rng.random() < 0.1:
        parts.append(rng.choice(CODE))
    if rng.random() < 0.3:
        parts.append(rng.choice(["", " ", "  ", "\n", "\t", " \n"]))  # trailing whitespace
    text = "".join(parts)
    if rng.random() < 0.05:
        text = whitespace(rng) + text  # leading whitespace
    return text


def corpus():
    rng = random.Random(20240601)
    docs, size = [], 0
    while size < 1_100_000:
        d = document(rng)
        docs.append(d)
        size += len(d.encode("utf-8"))
    docs += ["", " ", "a", "\n", "<|endoftext|>", " <|endoftext|> ", "x<|eot_id|>y", "😀",
             "'s", "'S", " 's'LL", "\r\n\r\n", "   \t  ", "ab" * 200, "中" * 300]
    return docs


def train(pre_tokenizer, specials, docs, vocab_size, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "gpt2"), exist_ok=True)
    docs = corpus()
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")

    gpt2 = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], docs, 3000, False)
    gpt2.save(os.path.join(out, "gpt2", "tokenizer.json"))
    gpt2.model.save(os.path.join(out, "gpt2"))

    spec = json.loads(gpt2.to_str())
    spec["pre_tokenizer"]["add_prefix_space"] = True
    spec["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    gpt2_prefix = Tokenizer.from_str(json.dumps(spec))
    with open(os.path.join(out, "gpt2_prefix.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)

    # gpt2 as Megatron-LM's GPT2BPETokenizer encodes (tools/preprocess_data.py): regex + BPE with no
    # added tokens, so "<|endoftext|>" in a document is ordinary text, not the end-of-document id.
    spec = json.loads(gpt2.to_str())
    spec["added_tokens"] = []
    gpt2_megatron = Tokenizer.from_str(json.dumps(spec))

    llama3 = train(pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], docs, 4000, True)
    llama3.save(os.path.join(out, "llama3.json"))

    seconds = {}
    for name, tok in [("gpt2", gpt2), ("gpt2_megatron", gpt2_megatron), ("gpt2_prefix", gpt2_prefix),
                      ("llama3", llama3)]:
        t0 = time.perf_counter()
        encs = [tok.encode(d, add_special_tokens=False) for d in docs]
        seconds[name] = time.perf_counter() - t0
        with open(os.path.join(out, f"expected_{name}.jsonl"), "w") as f:
            for e in encs:
                f.write(json.dumps(e.ids) + "\n")
    with open(os.path.join(out, "hf_seconds.json"), "w") as f:
        json.dump(seconds, f)


if __name__ == "__main__":
    main()
