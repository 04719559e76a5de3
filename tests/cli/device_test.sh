#!/usr/bin/env bash
# device: "cuda" where it cannot run ends before any step with exit 2 and the one message that says
# why: a CPU-only binary says it was built without CUDA; a CUDA binary on a machine with no visible
# GPU says so with cudaGetDeviceCount's reason (CUDA_VISIBLE_DEVICES= hides any GPU there is), and
# on a machine with no NVIDIA driver (as CI's) says that, not CUDA's "driver version is insufficient".
# The binary under test is whichever build ran the suite (tools/test.sh runs it --config=cuda).
source tests/checkpoint/resume_lib.sh

if "$LATTICE" --version | grep -q "CPU + CUDA"; then
  needle="no CUDA device is visible (cudaGetDeviceCount: "
  # The driver as CUDA's runtime looks for it (dlopen of libcuda.so.1).
  if ! python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
    needle="no CUDA device is visible (cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime \
version): no NVIDIA driver is installed here"
  fi
else
  needle='device: "cuda" but this binary was built without CUDA: build with --config=cuda'
fi
for cmd in train bench; do
  rc=0
  out=$(CUDA_VISIBLE_DEVICES= timeout 60 "$LATTICE" "$cmd" --config configs/test-tiny-gpt2.json \
    --set data.path="$WORK/tiny" --set device=cuda 2>&1 </dev/null) || rc=$?
  [[ $rc -eq 2 ]] || fail "$cmd: exit $rc (want 2): $(tail -3 <<<"$out")"
  grep -qF -- "$needle" <<<"$out" || fail "$cmd: message lacks '$needle': $(tail -3 <<<"$out")"
  grep -q "step *1/" <<<"$out" && fail "$cmd: trained before refusing"
  echo "ok: $cmd: $(grep -F -- "$needle" <<<"$out" | head -1)"
done
# parallel.backend nccl in a parallel job: the device is chosen (and refused) before NCCL is set up,
# on every rank, with the same message.
rc=0
out=$(CUDA_VISIBLE_DEVICES= timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$LATTICE" train \
  --config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set device=cuda --set parallel.data=2 \
  --set parallel.backend=nccl 2>&1 </dev/null) || rc=$?
[[ $rc -eq 2 ]] || fail "mpirun -np 2, backend nccl: exit $rc (want 2): $(tail -3 <<<"$out")"
grep -qF -- "$needle" <<<"$out" || fail "backend nccl: message lacks '$needle': $(tail -3 <<<"$out")"
echo "ok: mpirun -np 2 with parallel.backend nccl: $(grep -F -- "$needle" <<<"$out" | head -1)"
echo PASS
