#!/usr/bin/env bash
# Benchmark of `lattice data prepare` against Hugging Face `tokenizers` (encode_batch) on the same
# machine, corpus and tokenizer: a deterministic ~32 MB varied JSONL corpus and a 16k byte-level
# BPE tokenizer.json trained on it by the tokenizers library (both cached under $WORK). Prints both
# throughputs in MB of JSONL per second, their ratio, and checks the token counts agree.
# Usage: tools/bench_data_prepare.sh [WORKERS=2] [MB=32]; WORK (default runs/bench_data_prepare).
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS=${1:-2}
MB=${2:-32}
WORK=${WORK:-runs/bench_data_prepare}
LATTICE=${LATTICE:-bazel-bin/trainer/lattice}
mkdir -p "$WORK"
python3 -c "import tokenizers" 2>/dev/null || { echo "python3 cannot import tokenizers: run tools/install_deps.sh"; exit 2; }
[[ -x $LATTICE ]] || tools/build.sh

CORPUS=$WORK/corpus_${MB}mb.jsonl
TOKENIZER=$WORK/tokenizer_${MB}mb.json
[[ -f $CORPUS ]] || python3 tools/bench_data_prepare.py corpus "$CORPUS" "$MB"
[[ -f $TOKENIZER ]] || python3 tools/bench_data_prepare.py train "$CORPUS" "$TOKENIZER"

# lattice: read + JSON parse + tokenize + write, timed by its own summary line.
log=$("$LATTICE" data prepare --input "$CORPUS" --output-prefix "$WORK/out" --tokenizer hf \
  --tokenizer-file "$TOKENIZER" --workers "$WORKERS" --progress none 2>&1 | tee /dev/stderr | grep "data prepare:")
# Hugging Face: encode_batch only (reading and JSON parsing not timed), WORKERS threads.
hf=$(RAYON_NUM_THREADS=$WORKERS TOKENIZERS_PARALLELISM=true python3 tools/bench_data_prepare.py encode "$CORPUS" "$TOKENIZER")

python3 - "$log" "$hf" "$WORKERS" <<'PY'
import json, re, sys
log, hf, workers = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
m = re.search(r"(\d+) documents.*?, (\d+) tokens, ([\d.]+) MB read in ([\d.]+) s", log)
docs, tokens, mb, secs = int(m[1]), int(m[2]), float(m[3]), float(m[4])
lat = mb / secs
print(f"corpus {mb:.1f} MB, {docs} documents, {workers} threads each")
print(f"{'lattice data prepare':<28}{lat:8.2f} MB/s  ({secs:.2f} s, {tokens - docs} tokens + {docs} EOD)")
print(f"{'HF tokenizers encode_batch':<28}{hf['mb_per_s']:8.2f} MB/s  ({hf['seconds']:.2f} s, {hf['tokens']} tokens)")
print(f"ratio lattice / HF: {lat / hf['mb_per_s']:.2f}x (target >= 1.0x)")
ok = tokens - docs == hf["tokens"] and docs == hf["documents"]
print("token counts agree" if ok else f"MISMATCH: lattice {tokens - docs} tokens / {docs} docs vs HF {hf['tokens']} / {hf['documents']}")
sys.exit(0 if ok else 1)
PY
