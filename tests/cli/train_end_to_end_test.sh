#!/usr/bin/env bash
# End to end through the binary: prepare a byte-level dataset from real text, train the tiny
# GPT-2 and Llama configs, check the metrics file (run_start, keys, every step, time stamps, summary,
# loss falling from ln(257)), the step lines' elapsed time and ETA and the end-of-run summary,
# check the trace timeline (forward/backward per micro-batch, optimizer per step), and check that
# the exported model re-imports (the file, and its directory for training) and re-exports to identical bytes.
set -euo pipefail
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
TEXT=/usr/share/games/fortunes
[[ -d $TEXT ]] || { echo "FAIL: $TEXT missing: run tools/test.sh (it installs Debian's fortunes)"; exit 1; }

$LATTICE data prepare --input "$TEXT/fortunes" "$TEXT/literature" "$TEXT/science" \
  --output-prefix "$WORK/tiny" --text-document-separator percent-line

for config in test-tiny-gpt2 test-tiny-llama; do
  metrics=$WORK/$config.jsonl
  $LATTICE train --config configs/$config.json --set data.path="$WORK/tiny" \
    --set training.train_iters=60 --set logging.metrics_file="$metrics" --export "$WORK/$config-hf" \
    --set logging.trace_file="$WORK/$config-trace.json" 2>"$WORK/$config.log"
  python3 tests/cli/verify_training.py "$metrics" 60 257
  # Progress on the step lines and the end-of-run summary, which names the outputs.
  for line in "step     60/60 | .* | elapsed [0-9]*:[0-9][0-9]:[0-9][0-9] | ETA 0:00:00" \
              "run summary: 60 step(s) (1..60 of 60), 3840 tokens, wall time" \
              "outputs: metrics $metrics; export $WORK/$config-hf; trace $WORK/$config-trace.rank0.json"; do
    grep -q "$line" "$WORK/$config.log" || { tail -8 "$WORK/$config.log"; echo "FAIL: no log line '$line'"; exit 1; }
  done
  python3 tests/cli/verify_trace.py "$WORK/$config-trace.rank0.json" configs/$config.json 60
  # Lossless HF round trip through the CLI: import the exported file, export it again (with the same
  # data, whose recorded tokenizer gives config.json its eos/bos ids).
  $LATTICE export --config configs/$config.json --set model.init_from="$WORK/$config-hf/model.safetensors" \
    --set data.path="$WORK/tiny" --output "$WORK/$config-hf2"
  cmp "$WORK/$config-hf/model.safetensors" "$WORK/$config-hf2/model.safetensors"
  cmp "$WORK/$config-hf/config.json" "$WORK/$config-hf2/config.json"
  # model.init_from may name the HF model directory itself (model.safetensors + config.json).
  $LATTICE train --config configs/$config.json --set data.path="$WORK/tiny" --set training.train_iters=2 \
    --set model.init_from="$WORK/$config-hf" 2>&1 | tee "$WORK/$config-init-dir.log"
  grep -q "imported .* tensors from '$WORK/$config-hf'" "$WORK/$config-init-dir.log"
  echo "ok: $config"
done
