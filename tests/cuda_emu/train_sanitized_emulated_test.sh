#!/usr/bin/env bash
# The trainer's device paths on the emulated kernels under AddressSanitizer and UBSan
# (lattice_emulated_sanitized; tests/cuda_emu/BUILD.bazel's SANITIZE): tiny GPT-2 in f32 and in bf16
# with cuBLASLt's GELU epilogues, tiny Llama in bf16, GPT-2 in bf16 with TP2 (vocab-parallel
# embedding and loss) under mpirun, and two layouts over the emulated NCCL. These reach kernels with
# the model's own views (the fused and batched GEMMs, the grouped bias gradients, the AdamW runs over
# the flat buffers) that the op tests build by hand; the bf16 GPT-2 run takes 17 rows of 257 logits,
# so that a row's last pack starts 16-byte aligned at the end of the allocation. A read or write
# outside an allocation, or undefined behaviour, ends a run with the sanitizer's report. Each run's
# losses and grad norms are compared with the unsanitized binary's, so that a sanitized run that
# computes something else cannot pass: within 1e-5 in f32 (issue 12's GPU-vs-CPU bound) and 1e-3 in
# bf16, since the instrumented build contracts multiply-adds where the plain one does not (measured:
# 5.5e-8 in f32, 3e-12 in bf16), and a bf16 rounding can amplify that.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
SANITIZED=$PWD/tests/cuda_emu/lattice_emulated_sanitized
export ASAN_OPTIONS=detect_leaks=0  # fiber stacks and the pool live to the end on purpose
fail() { echo "FAIL: $*"; exit 1; }

# check NAME RANKS TOLERANCE CONFIG [--set ...]: 4 steps with each binary, then every loss and grad
# norm of the two compared, relative.
check() {
  local name=$1 ranks=$2 tolerance=$3 config=$4
  shift 4
  local args=(train --config "$config" --set device=cuda --set data.path="$WORK/tiny"
              --set training.train_iters=4 --set training.eval_interval=0 "$@")
  local binary tag launch st
  for binary in "$LATTICE" "$SANITIZED"; do
    tag=plain
    [[ $binary == "$SANITIZED" ]] && tag=sanitized
    launch=()
    [[ $ranks -gt 1 ]] && launch=($MPIRUN -np "$ranks")
    "${launch[@]}" "$binary" "${args[@]}" --set logging.metrics_file="$WORK/$name-$tag.jsonl" \
      >"$WORK/$name-$tag.log" 2>&1 || { st=$?; cat "$WORK/$name-$tag.log"; fail "$name ($tag) exited $st"; }
  done
  python3 tests/cuda_emu/compare_steps.py "$WORK/$name-plain.jsonl" "$WORK/$name-sanitized.jsonl" "$name" \
    "$tolerance" || fail "$name"
}

gpt2=configs/test-tiny-gpt2.json
check gpt2-f32 1 1e-5 $gpt2
check gpt2-bf16-gelu-fusion 1 1e-3 $gpt2 --set training.precision=bf16 --set training.gelu_fusion=true \
  --set model.seq_length=17 --set training.micro_batch_size=1 --set training.global_batch_size=2
check llama-bf16 1 1e-3 configs/test-tiny-llama.json --set training.precision=bf16
check gpt2-bf16-tp2 2 1e-3 $gpt2 --set training.precision=bf16 --set parallel.tensor=2
# parallel.backend nccl on two emulated GPUs: the communicator, and the emulated NCCL's operations
# that run asynchronously on their streams, under the sanitizers too (an operation touching a buffer
# already freed would read as a heap-use-after-free). The watchdog at 300 s: instrumented ranks
# beside another test can be slow.
nccl=(--set parallel.backend=nccl --set parallel.timeout_s=300)
export LATTICE_EMULATED_GPUS=2
check gpt2-bf16-dp2-distopt-nccl 2 1e-3 $gpt2 --set training.precision=bf16 "${nccl[@]}" --set parallel.data=2 \
  --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true
check gpt2-f32-pp2-interleaved-nccl 2 1e-5 $gpt2 "${nccl[@]}" --set parallel.pipeline=2 --set parallel.virtual_stages=2 \
  --set parallel.schedule=interleaved --set model.num_layers=4 --set training.micro_batch_size=1
echo "train_sanitized_emulated_test: all runs clean"
