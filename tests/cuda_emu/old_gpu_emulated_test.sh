#!/usr/bin/env bash
# A GPU older than the kernels' oldest architecture (compute capability 8.0: SASS for sm_80 and sm_90a,
# PTX for compute_90) is refused before anything is allocated, with exit 2 naming the GPU and what
# the kernels need, where CUDA would fail at the first kernel with "no kernel image is available".
# The emulated GPU reports the compute capability LATTICE_EMULATED_GPU_SM gives; 8.0 still trains.
set -euo pipefail
source tests/cuda_emu/emulated_train_env.sh
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run SM: two steps of the tiny GPT-2 on an emulated GPU of compute capability SM; exit status in $rc
  rc=0
  out=$(LATTICE_EMULATED_GPU_SM=$1 timeout 300 $LATTICE train --config configs/test-tiny-gpt2.json \
    --set data.path="$WORK/tiny" --set device=cuda --set training.train_iters=2 2>&1 </dev/null) || rc=$?
}

needle="GPU 'CPU emulator of a GPU' has compute capability 7.5, and lattice's CUDA kernels need 8.0 or later"
run 75
[[ $rc -eq 2 ]] || fail "sm_75: exit $rc (want 2): $(tail -3 <<<"$out")"
grep -qF -- "$needle" <<<"$out" || fail "sm_75: message lacks '$needle': $(tail -3 <<<"$out")"
grep -q "step *1/" <<<"$out" && fail "sm_75: trained before refusing"
echo "ok: sm_75 refused: $(grep -F -- "$needle" <<<"$out" | sed 's/^.*\] //')"

run 80
[[ $rc -eq 0 ]] || fail "sm_80: exit $rc (want 0): $(tail -3 <<<"$out")"
grep -q "step *1/" <<<"$out" || fail "sm_80: no step 1 in the log: $(tail -3 <<<"$out")"
echo "ok: sm_80 trains"
echo PASS
