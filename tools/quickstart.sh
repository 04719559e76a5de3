#!/usr/bin/env bash
# Quickstart: install, build, tokenize Debian's fortune-cookie texts (real English, offline) with
# the byte-level tokenizer, and train a small GPT on them. Idempotent: an existing dataset is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/build.sh

DATA=runs/quickstart/data/fortunes
if [[ ! -f $DATA.idx ]]; then
  mkdir -p "$(dirname "$DATA")"
  mapfile -t inputs < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
  bazel-bin/trainer/lattice data prepare --input "${inputs[@]}" --output-prefix "$DATA" \
    --tokenizer byte --text-document-separator percent-line --skip-empty-documents
fi
rm -f runs/quickstart/metrics.jsonl
python3 tools/unigram_baseline.py "$DATA"
bazel-bin/trainer/lattice train --config configs/quickstart.json --export runs/quickstart/hf "$@"
