#!/usr/bin/env bash
# bf16 attention when the installed cuDNN refuses its SDPA graph (kernels/cuda/cuda_backend.cc's
# cudnn_runs), on the CPU emulator with the refusal injected (LATTICE_EMU_CUDNN_REFUSES,
# tests/cuda_emu/sdpa_emu.cc): the run goes on with the f32 attention kernels, bit for bit the run
# that forces them (LATTICE_CUDA_ATTENTION=gemm), and warns once per shape and direction naming
# cuDNN's reason; a refused backward alone takes the f32 backward from cuDNN's forward (the shared
# lse contract); LATTICE_CUDA_ATTENTION=cudnn turns the refusal into an error that names it.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
fail() { echo "FAIL: $*"; exit 1; }

# train NAME [ENV=VALUE ...]: the tiny GPT-2 in bf16 on the emulated GPU, 20 steps with evaluations.
train() {
  local name=$1
  shift
  env "$@" "$LATTICE" train --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" \
    --set training.train_iters=20 --set training.eval_interval=5 --set training.eval_iters=2 \
    --set training.precision=bf16 --set device=cuda --set logging.metrics_file="$WORK/$name.jsonl" \
    >"$WORK/$name.log" 2>&1
}
losses() { grep -oE '"(loss|grad_norm|val_loss)":[^,}]*' "$WORK/$1.jsonl"; }
warnings() { grep "bf16 attention .* takes the f32 attention kernels" "$WORK/$1.log" || true; }

train cudnn || fail "the run on (emulated) cuDNN: $(tail -3 "$WORK/cudnn.log")"
[[ -z $(warnings cudnn) ]] || fail "a run cuDNN takes warned: $(warnings cudnn)"

train forced_gemm LATTICE_CUDA_ATTENTION=gemm || fail "the run forcing the f32 kernels: $(tail -3 "$WORK/forced_gemm.log")"
# The emulated cuDNN (the f32 flash kernel) and the forced GEMM path round differently, so the
# bitwise match below says which kernels the refused run took.
! cmp -s <(losses cudnn) <(losses forced_gemm) || fail "the cuDNN run and the forced f32 run do not differ"
train refused LATTICE_EMU_CUDNN_REFUSES=all || fail "a refused cuDNN ended the run: $(tail -3 "$WORK/refused.log")"
cmp <(losses refused) <(losses forced_gemm) ||
  fail "the run cuDNN refused is not bitwise the run that forces the f32 kernels"
# Training and evaluation share the shape here: one warning per direction, each with cuDNN's reason.
[[ $(warnings refused | grep -c "attention forward .*LATTICE_EMU_CUDNN_REFUSES=all") -eq 1 &&
  $(warnings refused | grep -c "attention backward .*LATTICE_EMU_CUDNN_REFUSES=all") -eq 1 &&
  $(warnings refused | wc -l) -eq 2 ]] || fail "expected one warning per direction, got: $(warnings refused)"
echo "refused: bitwise the forced f32 run; $(warnings refused | head -1)"

train refused_backward LATTICE_EMU_CUDNN_REFUSES=backward || fail "a refused backward ended the run"
[[ $(warnings refused_backward | wc -l) -eq 1 && -n $(warnings refused_backward | grep "attention backward") ]] ||
  fail "a refused backward alone: expected its one warning, got: $(warnings refused_backward)"
# The first loss is the forward's alone: cuDNN's, as in the run it takes whole.
first_loss() { grep -m1 -oE '"loss":[^,}]*' "$WORK/$1.jsonl"; }
[[ $(first_loss refused_backward) == "$(first_loss cudnn)" ]] ||
  fail "the first loss with cuDNN's forward differs: $(first_loss refused_backward) vs $(first_loss cudnn)"
echo "refused backward: cuDNN's forward, the f32 backward, 20 steps"

if train required LATTICE_CUDA_ATTENTION=cudnn LATTICE_EMU_CUDNN_REFUSES=all; then
  fail "LATTICE_CUDA_ATTENTION=cudnn with cuDNN refusing: the run went on"
fi
grep -q "LATTICE_CUDA_ATTENTION=cudnn, but cuDNN SDPA refused" "$WORK/required.log" ||
  fail "LATTICE_CUDA_ATTENTION=cudnn: the error does not name the refusal: $(tail -3 "$WORK/required.log")"
echo "required: $(grep -m1 "LATTICE_CUDA_ATTENTION=cudnn, but" "$WORK/required.log")"
echo "PASS"
