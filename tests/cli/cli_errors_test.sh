#!/usr/bin/env bash
# Each class of user mistake exits 2 with a message naming what to fix; every shipped config
# validates (exit 0).
set -uo pipefail
LATTICE=trainer/lattice
WORK=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

# expect CODE PATTERN -- command...: the exit code and a fragment of stderr+stdout. Each line says
# how long its command took, so that a slow or hung one is named in the log.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out start=$SECONDS
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $code ]] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL ($((SECONDS - start)) s): $* -> exit $got (want $code), output:"
    echo "$out" | head -5
    echo "  (wanted a message containing: $pattern)"
    failures=$((failures + 1))
  else
    echo "ok ($((SECONDS - start)) s): $* -> $code"
  fi
}

# (Their datasets are not made here: validate checks the config alone when data.path is empty.)
for config in configs/*.json; do
  expect 0 "config OK" -- $LATTICE validate --config "$config" --set data.path=
done

expect 2 "hiden_size" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set model.hiden_size=3
expect 2 "did you mean 'hidden_size'" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set model.hiden_size=3
expect 2 "model.num_attention_heads" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set model.num_attention_heads=5
expect 2 "training.global_batch_size" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set training.global_batch_size=5
expect 2 "model.num_kv_heads" -- $LATTICE validate --config configs/test-tiny-llama.json --set model.num_kv_heads=3
# A value a --set gave is blamed on that --set, not on the file (which holds another value); other --sets are not named.
expect 2 "configs/test-tiny-gpt2.json with --set training.global_batch_size=5: training.global_batch_size (5) must be" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set training.train_iters=3 --set training.global_batch_size=5
expect 2 "configs/test-tiny-gpt2.json with --set optimizer.lr=5e-5: optimizer.min_lr (0.0001) must be <= optimizer.lr" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set optimizer.lr=5e-5
expect 2 "parallel.backend is \"nccl\" but device is \"cpu\"" -- $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.backend=nccl
expect 2 "parallel.backend must be one of auto | nccl | mpi" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set parallel.backend=gloo
# Parallel layouts: validate checks them against a world size.
expect 0 "layout: 8 ranks = tensor 2 × pipeline 2 × data 2" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set data.path= --world-size 8 --set parallel.tensor=2 --set parallel.pipeline=2
expect 0 "theoretical pipeline bubble" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set data.path= --world-size 8 --set parallel.tensor=2 --set parallel.pipeline=2
expect 0 "micro-batches per step per data-parallel rank: 2" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set data.path= --world-size 2 --set parallel.pipeline=2
expect 2 "model.num_attention_heads" -- $LATTICE validate --config configs/test-tiny-gpt2.json --world-size 3 --set parallel.tensor=3
expect 2 "parallel.data" -- $LATTICE validate --config configs/test-tiny-gpt2.json --world-size 8 --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=1
expect 2 "parallel.virtual_stages" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set parallel.virtual_stages=2
expect 2 "parallel.overlap_param_gather" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set parallel.overlap_param_gather=true
expect 2 "did you mean 'schedule'" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set parallel.schedul=gpipe
expect 0 "layout: 4 ranks = tensor 1 × pipeline 1 × data 4" -- env OMPI_COMM_WORLD_SIZE=4 $LATTICE validate --config configs/test-tiny-gpt2.json --set data.path= --set training.micro_batch_size=1
# train: a parallel layout started as one process says how to launch it; under mpirun a layout that
# does not fit the job or the model ends every rank with exit 2 and names the field.
expect 2 "needs 2 ranks, but \`lattice train\` was started as one process: launch it with \`mpirun -np 2 lattice train" -- $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2
expect 2 "1 × 2 × 2 needs 4 ranks" -- $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2 --set parallel.data=2
expect 2 "needs 2 ranks" -- $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.tensor=2
source tests/parallel/mpi_env.sh
MPIRUN=(timeout 60 mpirun --allow-run-as-root --oversubscribe)
expect 2 "model.num_layers (2) must be divisible by parallel.pipeline × parallel.virtual_stages = 4 × 1" -- "${MPIRUN[@]}" -np 4 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=4
expect 2 "to be a multiple of parallel.pipeline = 2" -- "${MPIRUN[@]}" -np 2 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set model.num_layers=4 --set training.global_batch_size=6
expect 2 "the job has 3 ranks (mpirun -np / srun -n; validate: --world-size), which is not divisible by parallel.tensor × parallel.pipeline = 1 × 2" -- "${MPIRUN[@]}" -np 3 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2
expect 2 "model.num_kv_heads (2) must be divisible by parallel.tensor (4)" -- "${MPIRUN[@]}" -np 4 $LATTICE train --config configs/test-tiny-llama.json --set parallel.tensor=4
expect 2 "parallel.sequence_parallel = true needs parallel.tensor > 1" -- "${MPIRUN[@]}" -np 2 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.sequence_parallel=true
expect 2 "parallel.virtual_stages = 2 needs parallel.schedule = \"interleaved\"" -- "${MPIRUN[@]}" -np 2 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set model.num_layers=4
# A set-up error every rank shares is printed once, by rank 0, not once per rank; a rank whose set-up
# fails alone (here the second program of an MPMD launch) prints its own, naming itself.
expect_one_error() {  # expect_one_error PATTERN command...
  local pattern=$1; shift
  local out; out=$("$@" 2>&1); local got=$?
  if [[ $got -ne 2 ]] || [[ $(grep -c "\[error\]" <<<"$out") -ne 1 ]] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $got, want 2 and one error line containing: $pattern; output:"; echo "$out" | head -8
    failures=$((failures + 1))
  else
    echo "ok: one error line from $*"
  fi
}
expect_one_error "which is not divisible by parallel.tensor × parallel.pipeline = 3 × 1" \
  "${MPIRUN[@]}" -np 4 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.tensor=3
expect_one_error "rank 1 of 2: --set model.hiden_size=3: unknown key 'model.hiden_size'" \
  "${MPIRUN[@]}" -np 1 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.data=2 : \
  -np 1 $LATTICE train --config configs/test-tiny-gpt2.json --set parallel.data=2 --set model.hiden_size=3
# Memory: a model far larger than any machine's memory. validate warns (exit 0); train refuses before
# allocating anything (exit 2, naming needed and available), and --ignore-memory-check lets it go
# on to the next check (here the missing dataset).
huge=(--config configs/test-tiny-gpt2.json --set model.num_layers=48 --set model.hidden_size=16384 --set model.num_attention_heads=128)
expect 0 "but this machine has" -- $LATTICE validate "${huge[@]}" --set data.path=
# 154.6B parameters at 4 + 4 + 8 bytes each (fp32 weights, gradients, AdamW moments).
expect 2 "(its largest, pipeline stage 0: 576.05 GiB weights + 576.05 GiB gradients + 0 B main params + 1152.11 GiB AdamW moments" -- $LATTICE train "${huge[@]}"
expect 2 "or start anyway with --ignore-memory-check" -- $LATTICE train "${huge[@]}"
expect 2 "runs/test/data/tiny.bin' not found" -- $LATTICE train "${huge[@]}" --ignore-memory-check
expect 2 "starting anyway: --ignore-memory-check" -- $LATTICE train "${huge[@]}" --ignore-memory-check
# Under mpirun the ranks of one node share its memory (OMPI_COMM_WORLD_LOCAL_SIZE).
expect 2 "× 2 ranks on this node =" -- "${MPIRUN[@]}" -np 2 $LATTICE train "${huge[@]}" --set parallel.data=2
expect_one_error "× 2 ranks on this node =" "${MPIRUN[@]}" -np 2 $LATTICE train "${huge[@]}" --set parallel.data=2
# validate under mpirun: one report (one JSON document with --json), one error.
out=$("${MPIRUN[@]}" -np 2 $LATTICE validate --config configs/test-tiny-gpt2.json --set data.path= --json 2>/dev/null)
if python3 -c 'import json, sys; json.loads(sys.stdin.read())' <<<"$out"; then
  echo "ok: validate under mpirun prints one JSON document"
else
  echo "FAIL: validate --json under mpirun -np 2 is not one JSON document: $(head -c 300 <<<"$out")"
  failures=$((failures + 1))
fi
expect_one_error "model.activation" "${MPIRUN[@]}" -np 2 $LATTICE validate --config configs/test-tiny-gpt2.json --set model.activation=relu
expect 2 "model.activation" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set model.activation=relu
expect 2 "no-such-file.json" -- $LATTICE validate --config "$WORK/no-such-file.json"
printf '{"model": {"num_layers": 2,}}' >"$WORK/bad.json"
expect 2 "line 1" -- $LATTICE validate --config "$WORK/bad.json"
# Training needs its dataset: the message names the path and the command that makes it.
expect 2 "data prepare" -- $LATTICE train --config configs/test-tiny-gpt2.json --set data.path="$WORK/missing"
# Usage errors.
expect 2 "" -- $LATTICE train
expect 2 "" -- $LATTICE frobnicate
# A misspelt command gets the closest one (CLI11 alone only says "A subcommand is required").
expect 2 "unknown command 'trian'; did you mean 'train'?" -- $LATTICE trian --config configs/test-tiny-gpt2.json
expect 2 "lattice data: unknown command 'prepar'; did you mean 'prepare'?" -- $LATTICE data prepar --input x
expect 2 "unknown command 'frobnicate' (commands: train, validate, plan, data, bench, export" -- $LATTICE frobnicate
expect 2 "launch_mpirun: the lattice binary '/nonexistent' is not there: build it" -- env LATTICE=/nonexistent tools/launch_mpirun.sh -n 2 configs/test-tiny-gpt2.json
# Megatron-LM's way of giving a setting, a flag: the --set that does it.
expect 2 "lattice train: unknown option '--tensor-model-parallel-size'; config keys are set in the config file or with --set: --set parallel.tensor=VALUE (Megatron-LM's name for it)" -- $LATTICE train --config configs/test-tiny-gpt2.json --tensor-model-parallel-size 2
expect 2 "lattice validate: unknown option '--lr'; config keys are set in the config file or with --set: --set optimizer.lr=VALUE" -- $LATTICE validate --config configs/test-tiny-gpt2.json --lr=3e-4
expect 2 "lattice: unknown option '--bogus' (before a command lattice takes only --help and --version); commands: train" -- $LATTICE --bogus
expect 2 "--world-size: 'abc' is not a number of ranks from 1 to 16777216" -- $LATTICE validate --config configs/test-tiny-gpt2.json --world-size abc
expect 2 "--show: Value -1 not in range 0 to 9223372036854775807" -- $LATTICE data inspect x --show -1
expect 0 "  --no-eod    " -- $LATTICE data prepare --help
expect 2 "did you mean 'model.num_attention_heads'? ('num_heads' is a common name for it)" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set model.num_heads=4
# Numbers out of range get the right words (not "got number 1e+20" / "got string \"1e400\"").
expect 2 "training.train_iters must be an integer below 2^63, got 1e+20" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set training.train_iters=1e20
expect 2 "--set optimizer.lr=1e400: 1e400 is out of range" -- $LATTICE validate --config configs/test-tiny-gpt2.json --set optimizer.lr=1e400
expect 0 "train" -- $LATTICE --help
expect 2 "--profile-ops times training steps (--config), not --comm or --checkpoint" -- $LATTICE bench --comm --profile-ops
# Bad input to data prepare names the file and line.
printf '{"text": "a"}\nnot json\n' >"$WORK/bad.jsonl"
expect 2 "bad.jsonl" -- $LATTICE data prepare --input "$WORK/bad.jsonl" --output-prefix "$WORK/out"
if [[ -e $WORK/out.bin || -e $WORK/out.idx ]]; then
  echo "FAIL: a failed prepare left output files behind"
  failures=$((failures + 1))
fi
# An explicit --json-key that no input uses is warned about, even the default one.
printf 'plain text\n' >"$WORK/plain.txt"
expect 0 "--json-key text has no effect: no input is JSONL" -- $LATTICE data prepare --input "$WORK/plain.txt" --output-prefix "$WORK/plain" --json-key text
# A tokenizer file without --tokenizer would be ignored for the recorded tokenizer: refused, naming the flag.
expect 2 "--tokenizer-file $WORK/t.json is given without --tokenizer, which would ignore it" -- $LATTICE data inspect "$WORK/plain" --tokenizer-file "$WORK/t.json"
# A wrong-family HF file is refused, naming a tensor.
$LATTICE export --config configs/test-tiny-llama.json --output "$WORK/llama_hf" >/dev/null 2>&1
expect 2 "wte.weight" -- $LATTICE export --config configs/test-tiny-gpt2.json --set model.init_from="$WORK/llama_hf/model.safetensors" --output "$WORK/x"

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
