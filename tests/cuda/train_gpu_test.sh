#!/usr/bin/env bash
# End to end on one GPU (issue 12): the tiny GPT-2 and Llama, 20 steps, GPU against CPU in f32
# (every loss and grad norm within 1e-5 relative, exported weights within the equivalence
# tolerance: tests/parallel/compare_dp_runs.py); two GPU runs bit-identical; resume on the GPU
# bitwise (tests/checkpoint/compare_resumed.py); a checkpoint saved on one device resumed on the
# other, both ways; a profiler capture range changes nothing; model.init_from on the GPU; TP2,
# PP2×v2 interleaved and DP2 with the distributed optimizer under mpirun on the one shared GPU
# against the one-process CPU run; bf16 against bf16 on the CPU, with and without
# training.gelu_fusion and training.bias_grad_fusion; LATTICE_CUBLASLT_PROBE changes no bit;
# training.gemm_autotune_dir's choices saved, reused and resumed bitwise; (emulator) GEMMs cuBLASLt
# refuses run as separate ops; a run larger than the GPU refused before it allocates.
# usage: train_gpu_test.sh LATTICE_BINARY DATA_PREFIX WORK_DIR   (run from the repository root)
# Prints "PASS <name>" or "FAIL <name>: why" per check and ends with "N passed, M failed".
set -uo pipefail
BIN=$1 DATA=$2 WORK=$3
mkdir -p "$WORK"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=${MPIRUN:-mpirun}
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
flunk() { echo "FAIL $1"; failed=$((failed + 1)); }
losses() { grep -o '"loss":[^,}]*' "$1"; }  # a metrics file's losses, in order

# train NAME NP CONFIG [--set ...]: trains 20 steps with metrics and export under $WORK/NAME.
train() {
  local name=$1 np=$2 cfg=$3
  shift 3
  local cmd=("$BIN" train --config "configs/$cfg" --set data.path="$DATA" --set training.train_iters=20
    --set training.eval_interval=5 --set training.eval_iters=2 --set logging.metrics_file="$WORK/$name.jsonl" "$@")
  rm -rf "$WORK/$name" "$WORK/$name.jsonl"
  if [[ $np -gt 1 ]]; then
    $MPIRUN --oversubscribe -np "$np" "${cmd[@]}" >"$WORK/$name.log" 2>&1
  else
    "${cmd[@]}" >"$WORK/$name.log" 2>&1
  fi || {
    # The error lines name the cause; under mpirun the last lines are only prterun's notice.
    echo "  $name exited $?: $( (grep -a -m2 '\[error\]' "$WORK/$name.log" || tail -3 "$WORK/$name.log") | tr -d '\0')"
    return 1
  }
}

# check NAME COMMAND...: PASS when the command succeeds, else FAIL with its last lines.
check() {
  local name=$1
  shift
  local out
  if out=$("$@" 2>&1); then pass "$name"; else flunk "$name: $(echo "$out" | tail -4)"; fi
  [[ -n $out ]] && echo "$out" | sed 's/^/  /' | tail -6
}

# check_resume LABEL CONFIG REF PREFIX [overrides...]: stop after step 10 with a checkpoint, resume
# to 20 (runs PREFIX_job1, PREFIX_job2) in RESUME_NP ranks (default 1); bitwise the uninterrupted GPU
# run REF.
check_resume() {
  local label=$1 cfg=$2 ref=$3 prefix=$4 np=${RESUME_NP:-1}
  shift 4
  local ck=(--set device=cuda --set checkpoint.dir="$WORK/${prefix}_ck" --set checkpoint.save_interval=5 "$@")
  rm -rf "$WORK/${prefix}_ck"
  if train "${prefix}_job1" "$np" "$cfg" "${ck[@]}" --set training.exit_interval=10 &&
    train "${prefix}_job2" "$np" "$cfg" "${ck[@]}" --export "$WORK/${prefix}_split"; then
    cat "$WORK/${prefix}_job1.jsonl" "$WORK/${prefix}_job2.jsonl" >"$WORK/${prefix}_split.jsonl"
    check "$label: GPU resume from step 10 is bitwise the uninterrupted GPU run" python3 \
      tests/checkpoint/compare_resumed.py "$WORK/$ref.jsonl" "$WORK/${prefix}_split.jsonl" "$WORK/$ref" \
      "$WORK/${prefix}_split"
  else
    flunk "$label: GPU resume jobs"
  fi
}

# check_cross_device_resume LABEL CONFIG PREFIX COMPARE_ARGS... -- [overrides...]: a checkpoint holds
# no device: stop after step 10 on one device and resume to 20 on the other, both ways; the joined
# run must pass tests/parallel/compare_dp_runs.py COMPARE_ARGS (the reference) against it.
check_cross_device_resume() {
  local label=$1 cfg=$2 prefix=$3 compare=()
  shift 3
  while [[ $1 != -- ]]; do
    compare+=("$1")
    shift
  done
  shift
  local first second from to way
  for way in "cpu cuda CPU GPU" "cuda cpu GPU CPU"; do
    read -r first second from to <<<"$way"
    local run="${prefix}_${first}_to_${second}"
    local ck=(--set checkpoint.dir="$WORK/${run}_ck" --set checkpoint.save_interval=5 "$@")
    rm -rf "$WORK/${run}_ck"
    if train "${run}_job1" 1 "$cfg" "${ck[@]}" --set device="$first" --set training.exit_interval=10 &&
      train "${run}_job2" 1 "$cfg" "${ck[@]}" --set device="$second" --export "$WORK/$run"; then
      cat "$WORK/${run}_job1.jsonl" "$WORK/${run}_job2.jsonl" >"$WORK/$run.jsonl"
      check "$label: saved on the $from at step 10, resumed on the $to, vs the uninterrupted CPU run" \
        python3 tests/parallel/compare_dp_runs.py "${compare[@]}" "$WORK/$run.jsonl" "$WORK/$run"
    else
      flunk "$label: $from to $to resume jobs"
    fi
  done
}

for model in gpt2 llama; do
  cfg=test-tiny-$model.json
  train "${model}_cpu" 1 "$cfg" --export "$WORK/${model}_cpu" || { flunk "$model: CPU run"; continue; }
  if ! train "${model}_gpu" 1 "$cfg" --set device=cuda --export "$WORK/${model}_gpu"; then
    flunk "$model: GPU run"
    continue
  fi
  grep -m1 "cuda: local rank" "$WORK/${model}_gpu.log" | sed 's/^/  /'
  grep -m1 "memory pool.s high mark" "$WORK/${model}_gpu.log" | sed "s/^/  /"
  check "$model: GPU vs CPU, 20 steps (losses, grad norms, validation, exported weights)" \
    python3 tests/parallel/compare_dp_runs.py 20 "$WORK/${model}_cpu.jsonl" "$WORK/${model}_cpu" \
    "$WORK/${model}_gpu.jsonl" "$WORK/${model}_gpu"
  train "${model}_gpu2" 1 "$cfg" --set device=cuda --export "$WORK/${model}_gpu2" &&
    check "$model: two GPU runs are bit-identical" python3 tests/checkpoint/compare_resumed.py \
      "$WORK/${model}_gpu.jsonl" "$WORK/${model}_gpu2.jsonl" "$WORK/${model}_gpu" "$WORK/${model}_gpu2" ||
    flunk "$model: second GPU run"
  # logging.profile_step_start..end: cudaProfilerStart / Stop around steps 5..6 (no profiler attached:
  # the calls succeed and do nothing) leave the run bitwise as it was.
  if train "${model}_capture" 1 "$cfg" --set device=cuda --set logging.profile_step_start=5 \
    --set logging.profile_step_end=6 --export "$WORK/${model}_capture"; then
    grep -q "profiler capture range closed after step 6" "$WORK/${model}_capture.log" ||
      flunk "$model: the profiler capture range was not closed after step 6"
    check "$model: a run with a profiler capture range (steps 5..6) is bitwise the GPU run" python3 \
      tests/checkpoint/compare_resumed.py "$WORK/${model}_gpu.jsonl" "$WORK/${model}_capture.jsonl" \
      "$WORK/${model}_gpu" "$WORK/${model}_capture"
  else
    flunk "$model: the run with a profiler capture range"
  fi
  check_resume "$model" "$cfg" "${model}_gpu" "${model}"
  check_cross_device_resume "$model" "$cfg" "$model" 20 "$WORK/${model}_cpu.jsonl" "$WORK/${model}_cpu" --
  # model.init_from on the GPU reads the file on the host and copies: the CPU run's weights.
  init=(--set model.init_from="$WORK/${model}_cpu")
  if train "${model}_init_cpu" 1 "$cfg" "${init[@]}" --export "$WORK/${model}_init_cpu" &&
    train "${model}_init_gpu" 1 "$cfg" "${init[@]}" --set device=cuda --export "$WORK/${model}_init_gpu"; then
    check "$model: model.init_from on the GPU vs the CPU" python3 tests/parallel/compare_dp_runs.py 20 \
      "$WORK/${model}_init_cpu.jsonl" "$WORK/${model}_init_cpu" "$WORK/${model}_init_gpu.jsonl" "$WORK/${model}_init_gpu"
  else
    flunk "$model: model.init_from runs"
  fi
done

# Multi-rank layouts on the one GPU (MPI stages CUDA tensors through host memory) against the
# one-process CPU run of the same config.
declare -A LAYOUTS=(
  [tp2]="2 test-tiny-gpt2.json --set parallel.tensor=2"
  [dp2do]="2 test-tiny-gpt2.json --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true"
  [pp2v2]="2 test-tiny-gpt2.json --set model.num_layers=4 --set parallel.pipeline=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set training.micro_batch_size=1"
  [llama_tp2sp]="2 test-tiny-llama.json --set parallel.tensor=2 --set parallel.sequence_parallel=true"
)
for name in tp2 dp2do pp2v2 llama_tp2sp; do
  read -r np cfg overrides <<<"${LAYOUTS[$name]}"
  # The reference: one CPU process with the layout's model overrides (not its parallel ones).
  ref_overrides=$(echo "$overrides" | grep -oE -- '--set (model|training)\.[^ ]+' | tr '\n' ' ')
  # shellcheck disable=SC2086  # the overrides are words
  train "${name}_ref" 1 "$cfg" $ref_overrides --export "$WORK/${name}_ref" || { flunk "$name: CPU reference"; continue; }
  # shellcheck disable=SC2086
  if train "${name}_gpu" "$np" "$cfg" $overrides --set device=cuda --export "$WORK/${name}_gpu"; then
    check "$name on the GPU ($np ranks) vs one CPU process" python3 tests/parallel/compare_dp_runs.py 20 \
      "$WORK/${name}_ref.jsonl" "$WORK/${name}_ref" "$WORK/${name}_gpu.jsonl" "$WORK/${name}_gpu"
  else
    flunk "$name: GPU run ($np ranks)"
  fi
done
# The distributed optimizer saves from its dp shards (each bucket's state gathered on the device,
# this rank's boxes copied from it to the host snapshot on the copy stream) and resumes into them.
RESUME_NP=2 check_resume "dp2do" test-tiny-gpt2.json dp2do_gpu dp2do_resume \
  --set parallel.distributed_optimizer=true --set parallel.overlap_param_gather=true

# bf16 mixed precision on the GPU against bf16 on the CPU (the oracle), one process and DP2 with the
# distributed optimizer (bf16 all-gathers), with the CPU fp32 run among the noise runs as the bf16
# equivalence tests do (tests/parallel/compare_dp_runs.py --bf16), and a bitwise GPU resume. Our own
# GELU and bias-gradient kernels (training.gelu_fusion and bias_grad_fusion false; their "auto"
# defaults are checked below).
for model in gpt2 llama; do
  cfg=test-tiny-$model.json
  bf=(--set training.precision=bf16 --set training.gelu_fusion=false --set training.bias_grad_fusion=false)
  if train "${model}_bf16_cpu" 1 "$cfg" "${bf[@]}" --export "$WORK/${model}_bf16_cpu" &&
    train "${model}_bf16_gpu" 1 "$cfg" "${bf[@]}" --set device=cuda --export "$WORK/${model}_bf16_gpu" &&
    train "${model}_bf16_gpu_dp2" 2 "$cfg" "${bf[@]}" --set device=cuda --set parallel.distributed_optimizer=true \
      --export "$WORK/${model}_bf16_gpu_dp2"; then
    check "$model: bf16 on the GPU (one process, DP2 + distributed optimizer) vs bf16 on the CPU" \
      python3 tests/parallel/compare_dp_runs.py --bf16 20 "$WORK/${model}_bf16_cpu.jsonl" "$WORK/${model}_bf16_cpu" \
      --noise "$WORK/${model}_cpu.jsonl" "$WORK/${model}_cpu" "$WORK/${model}_bf16_gpu.jsonl" "$WORK/${model}_bf16_gpu" \
      "$WORK/${model}_bf16_gpu_dp2.jsonl" "$WORK/${model}_bf16_gpu_dp2"
    # cuDNN took the attention: a refused graph would have warned and run the f32 kernels instead.
    if grep -q "takes the f32 attention kernels" "$WORK/${model}_bf16_gpu.log"; then
      flunk "$model: bf16 attention on cuDNN: $(grep -m1 "takes the f32 attention kernels" "$WORK/${model}_bf16_gpu.log")"
    else
      pass "$model: bf16 attention on cuDNN (no fallback to the f32 kernels logged)"
    fi
  else
    flunk "$model: bf16 runs"
  fi
  check_resume "$model (bf16)" "$cfg" "${model}_bf16_gpu" "${model}_bf16" "${bf[@]}"
  check_cross_device_resume "$model (bf16)" "$cfg" "${model}_bf16" --bf16 20 "$WORK/${model}_bf16_cpu.jsonl" \
    "$WORK/${model}_bf16_cpu" --noise "$WORK/${model}_cpu.jsonl" "$WORK/${model}_cpu" -- "${bf[@]}"
done

# training.gelu_fusion (the GELU in cuBLASLt's GEMM epilogues) in bf16: within the same bounds of
# the CPU's bf16 run, not bitwise the unfused GPU run (the epilogue's GELU reads the f32 product, so
# differing losses show that it ran), and its resume bitwise too.
fuse=(--set training.precision=bf16 --set training.gelu_fusion=true --set training.bias_grad_fusion=false)
if train gpt2_fused_gpu 1 test-tiny-gpt2.json "${fuse[@]}" --set device=cuda --export "$WORK/gpt2_fused_gpu"; then
  check "gpt2: bf16 with training.gelu_fusion on the GPU vs bf16 on the CPU" \
    python3 tests/parallel/compare_dp_runs.py --bf16 20 "$WORK/gpt2_bf16_cpu.jsonl" "$WORK/gpt2_bf16_cpu" \
    --noise "$WORK/gpt2_cpu.jsonl" "$WORK/gpt2_cpu" "$WORK/gpt2_fused_gpu.jsonl" "$WORK/gpt2_fused_gpu"
  if grep -q "GELU in the MLP's GEMM epilogues" "$WORK/gpt2_fused_gpu.log" &&
    ! cmp -s <(losses "$WORK/gpt2_fused_gpu.jsonl") <(losses "$WORK/gpt2_bf16_gpu.jsonl"); then
    pass "gpt2: training.gelu_fusion is logged and changes the bf16 run (the epilogues ran)"
  else
    flunk "gpt2: training.gelu_fusion is logged and changes the bf16 run (the epilogues ran)"
  fi
  check_resume "gpt2 (bf16, training.gelu_fusion)" test-tiny-gpt2.json gpt2_fused_gpu gpt2_fused "${fuse[@]}"
  # LATTICE_CUBLASLT_PROBE (kernels/cuda/matmul_probe.h) runs other algorithms into scratch at each
  # GEMM shape's first call (the bias, GELU and residual epilogues among them here): the run itself
  # must not change, and its exit report must count the shapes (on the emulator too, whose cuBLASLt
  # offers three algorithms that compute alike).
  if LATTICE_CUBLASLT_PROBE=4 train gpt2_probe_gpu 1 test-tiny-gpt2.json "${fuse[@]}" --set device=cuda \
    --export "$WORK/gpt2_probe_gpu"; then
    check "gpt2: LATTICE_CUBLASLT_PROBE leaves the run bitwise (bf16, training.gelu_fusion)" python3 \
      tests/checkpoint/compare_resumed.py "$WORK/gpt2_fused_gpu.jsonl" "$WORK/gpt2_probe_gpu.jsonl" \
      "$WORK/gpt2_fused_gpu" "$WORK/gpt2_probe_gpu"
    if grep -q "^cuBLASLt probe: [1-9][0-9]* GEMM shapes" "$WORK/gpt2_probe_gpu.log"; then
      pass "gpt2: LATTICE_CUBLASLT_PROBE reports the GEMM shapes it timed"
      grep "^cuBLASLt probe" "$WORK/gpt2_probe_gpu.log" | head -3 | sed 's/^/  /'
    else
      flunk "gpt2: LATTICE_CUBLASLT_PROBE reports the GEMM shapes it timed: $(grep -a -m2 'cuBLASLt probe' \
        "$WORK/gpt2_probe_gpu.log")"
    fi
  else
    flunk "gpt2: bf16 run with training.gelu_fusion and LATTICE_CUBLASLT_PROBE"
  fi
else
  flunk "gpt2: bf16 run with training.gelu_fusion"
fi

# training.deterministic_attention false: cuDNN's plain attention backward (dQ summed by atomics),
# within the same bounds of the CPU's bf16 run, and the log's warning that runs no longer repeat.
nondet=(--set training.precision=bf16 --set training.gelu_fusion=false --set training.bias_grad_fusion=false
  --set training.deterministic_attention=false)
if train gpt2_nondet_gpu 1 test-tiny-gpt2.json "${nondet[@]}" --set device=cuda --export "$WORK/gpt2_nondet_gpu"; then
  check "gpt2: bf16 with cuDNN's plain attention backward on the GPU vs bf16 on the CPU" \
    python3 tests/parallel/compare_dp_runs.py --bf16 20 "$WORK/gpt2_bf16_cpu.jsonl" "$WORK/gpt2_bf16_cpu" \
    --noise "$WORK/gpt2_cpu.jsonl" "$WORK/gpt2_cpu" "$WORK/gpt2_nondet_gpu.jsonl" "$WORK/gpt2_nondet_gpu"
  if grep -q "cuDNN's plain backward, dQ summed by atomics" "$WORK/gpt2_nondet_gpu.log"; then
    pass "gpt2: training.deterministic_attention false is logged"
  else
    flunk "gpt2: training.deterministic_attention false is logged"
  fi
else
  flunk "gpt2: bf16 run with training.deterministic_attention false"
fi

# training.bias_grad_fusion (each linear layer's bias gradient in its weight-gradient GEMM's BGRADB
# epilogue) in bf16: within the same bounds of the CPU's bf16 run, logged, its GEMMs run with the
# epilogue (LATTICE_CUBLASLT_PROBE, which changes no bit, names each shape's epilogue) and none
# declined, and its resume bitwise (its "auto": below, with gelu_fusion's).
bgrad=(--set training.precision=bf16 --set training.gelu_fusion=false --set training.bias_grad_fusion=true)
if LATTICE_CUBLASLT_PROBE=2 train gpt2_bgrad_gpu 1 test-tiny-gpt2.json "${bgrad[@]}" --set device=cuda \
  --export "$WORK/gpt2_bgrad_gpu"; then
  check "gpt2: bf16 with training.bias_grad_fusion on the GPU vs bf16 on the CPU" \
    python3 tests/parallel/compare_dp_runs.py --bf16 20 "$WORK/gpt2_bf16_cpu.jsonl" "$WORK/gpt2_bf16_cpu" \
    --noise "$WORK/gpt2_cpu.jsonl" "$WORK/gpt2_cpu" "$WORK/gpt2_bgrad_gpu.jsonl" "$WORK/gpt2_bgrad_gpu"
  if grep -q "bias gradients in the weight-gradient GEMMs' epilogues (training.bias_grad_fusion true" \
    "$WORK/gpt2_bgrad_gpu.log" && grep -q "cuBLASLt probe: .*, bias gradient, beta 1)" "$WORK/gpt2_bgrad_gpu.log" &&
    ! grep -q "gemm_bias_grad runs it as separate ops" "$WORK/gpt2_bgrad_gpu.log"; then
    pass "gpt2: training.bias_grad_fusion is logged and its weight-gradient GEMMs took the epilogue"
  else
    flunk "gpt2: training.bias_grad_fusion is logged and its weight-gradient GEMMs took the epilogue: \
$(grep -a -m1 -e 'training.bias_grad_fusion' -e 'gemm_bias_grad runs it' "$WORK/gpt2_bgrad_gpu.log")"
  fi
  check_resume "gpt2 (bf16, training.bias_grad_fusion)" test-tiny-gpt2.json gpt2_bgrad_gpu gpt2_bgrad "${bgrad[@]}"
else
  flunk "gpt2: bf16 run with training.bias_grad_fusion"
fi

# The fusion keys' "auto" (the default; trainer/device_selection.h), each with the other key false:
# bitwise the fused run on compute capability 9.0 and later, the unfused run before; gelu_fusion
# under selective recompute the unfused run (the recompute repeats the forward's GELU exactly); the
# log says which and why. The emulator, which has no architecture, stands for both
# (LATTICE_EMULATED_GPU_SM).
# check_auto KEY NAME REF WORDS REASON [--set ...]: the run NAME logs "WORDS (training.KEY auto:
# ...REASON" and is bitwise the run REF.
check_auto() {
  local key=$1 name=$2 ref=$3 words=$4 reason=$5 other=gelu_fusion
  shift 5
  [[ $key == gelu_fusion ]] && other=bias_grad_fusion
  if train "$name" 1 test-tiny-gpt2.json --set training.precision=bf16 --set "training.$other=false" \
    --set device=cuda "$@" --export "$WORK/$name"; then
    grep -q "$words (training.$key auto: .*$reason" "$WORK/$name.log" ||
      flunk "$name: the log does not say '$words (training.$key auto: ...$reason': \
$(grep -a -m1 "training.$key" "$WORK/$name.log")"
    check "gpt2: training.$key auto ($reason) is bitwise the run of $ref" python3 \
      tests/checkpoint/compare_resumed.py "$WORK/$ref.jsonl" "$WORK/$name.jsonl" "$WORK/$ref" "$WORK/$name"
  else
    flunk "gpt2: bf16 run with training.$key auto ($reason)"
  fi
}
auto_gelu() {  # auto_gelu NAME fused|unfused REASON [--set ...]
  local name=$1 expected=$2 reason=$3
  shift 3
  if [[ $expected == fused ]]; then
    check_auto gelu_fusion "$name" gpt2_fused_gpu "GELU in the MLP's GEMM epilogues" "$reason" "$@"
  else
    check_auto gelu_fusion "$name" gpt2_bf16_gpu "GELU in its own kernels, not in GEMM epilogues" "$reason" "$@"
  fi
}
auto_bias_grad() {  # auto_bias_grad NAME fused|unfused REASON
  if [[ $2 == fused ]]; then
    check_auto bias_grad_fusion "$1" gpt2_bgrad_gpu "bias gradients in the weight-gradient GEMMs' epilogues" "$3"
  else
    check_auto bias_grad_fusion "$1" gpt2_bf16_gpu "bias gradients in their own kernel, not in GEMM epilogues" "$3"
  fi
}
if grep -q "CPU emulator of a GPU" "$WORK/gpt2_gpu.log"; then
  LATTICE_EMULATED_GPU_SM=90 auto_gelu gpt2_auto_sm90 fused "compute capability 9.0"
  auto_gelu gpt2_auto_unknown unfused "not known"
  LATTICE_EMULATED_GPU_SM=90 auto_gelu gpt2_auto_recompute unfused "selective recompute" \
    --set model.recompute=selective
  LATTICE_EMULATED_GPU_SM=90 auto_bias_grad gpt2_bgrad_auto_sm90 fused "compute capability 9.0"
else
  sm=$(grep -m1 -o "sm_[0-9]*" "$WORK/gpt2_gpu.log" | tr -dc '0-9')
  expected=unfused
  [[ ${sm:-0} -ge 90 ]] && expected=fused
  auto_gelu gpt2_auto "$expected" "compute capability ${sm:0:-1}.${sm: -1}"
  auto_gelu gpt2_auto_recompute unfused "selective recompute" --set model.recompute=selective
  auto_bias_grad gpt2_bgrad_auto "$expected" "compute capability ${sm:0:-1}.${sm: -1}"
fi

# training.gemm_autotune_dir (kernels/cuda/matmul_autotune.h): each GEMM shape's algorithm chosen by
# timing at its first call and written to DIR/rank-00000.json at once; a run given the same DIR reads
# them and times nothing, so it, and a resume, are bitwise the tuning run; a file from another GPU is
# refused (exit 2) and left as it was. On the emulator LATTICE_EMU_CUBLASLT_SLOW_ALGOS makes its
# algorithms 0 and 2 slow for the tuning run, so timing must pick algorithm 1, whose split K changes
# the bits: the run then differs from the untuned one, which shows that the choices are used (a
# GPU's heuristic may already have chosen the fastest, so there only the bitwise checks apply). The
# runs after it make 0 and 1 slow: had they timed anew, they would take algorithm 2 and other bits.
tune=(--set training.precision=bf16 --set training.gelu_fusion=true --set device=cuda
  --set training.gemm_autotune_dir="$WORK/gemm_algorithms")
rm -rf "$WORK/gemm_algorithms"
choices=$WORK/gemm_algorithms/rank-00000.json
if LATTICE_EMU_CUBLASLT_SLOW_ALGOS=0,2 train gpt2_tuned 1 test-tiny-gpt2.json "${tune[@]}" \
  --export "$WORK/gpt2_tuned"; then
  timed=$(grep -c "cuBLASLt autotune: .* candidates: " "$WORK/gpt2_tuned.log")
  saved=$(python3 -c "import json, sys; print(len(json.load(open(sys.argv[1]))['gemms']))" "$choices" 2>&1)
  if [[ $timed -gt 0 && $saved == "$timed" ]]; then
    pass "gpt2: training.gemm_autotune_dir timed $timed GEMM shapes and saved each choice"
  else
    flunk "gpt2: training.gemm_autotune_dir timed $timed GEMM shapes and saved $saved choices"
  fi
  # The exit summary counts every shape as timed in this run; on the emulator algorithm 0, the
  # heuristic's first, is the slow one, so the chosen algorithms must take less time.
  summary=$(grep -o "cuBLASLt autotune: [0-9]* GEMM shapes .*" "$WORK/gpt2_tuned.log")
  if [[ $summary == "cuBLASLt autotune: $timed GEMM shapes ($timed timed in this run, 0 read from "* ]] &&
    { ! grep -q "CPU emulator of a GPU" "$WORK/gpt2_tuned.log" || [[ $summary == *"(-"*"%)" ]]; }; then
    pass "gpt2: the autotune exit summary weighs all $timed shapes: ${summary#*weighted by their calls, }"
  else
    flunk "gpt2: the autotune exit summary: '${summary:-none}'"
  fi
  check "gpt2: bf16 with GEMM autotuning on the GPU vs bf16 on the CPU" \
    python3 tests/parallel/compare_dp_runs.py --bf16 20 "$WORK/gpt2_bf16_cpu.jsonl" "$WORK/gpt2_bf16_cpu" \
    --noise "$WORK/gpt2_cpu.jsonl" "$WORK/gpt2_cpu" "$WORK/gpt2_tuned.jsonl" "$WORK/gpt2_tuned"
  if grep -q "CPU emulator of a GPU" "$WORK/gpt2_tuned.log"; then
    if [[ $(grep -c '"candidate": 1' "$choices") == "$saved" && -s $WORK/gpt2_fused_gpu.jsonl ]] &&
      ! cmp -s <(losses "$WORK/gpt2_tuned.jsonl") <(losses "$WORK/gpt2_fused_gpu.jsonl"); then
      pass "gpt2 (emulator): timing chose the one fast algorithm for every shape, and the run used it"
    else
      flunk "gpt2 (emulator): timing chose the one fast algorithm for every shape, and the run used it"
    fi
  fi
  export LATTICE_EMU_CUBLASLT_SLOW_ALGOS=0,1
  if train gpt2_tuned_again 1 test-tiny-gpt2.json "${tune[@]}" --export "$WORK/gpt2_tuned_again"; then
    grep -q "cuBLASLt autotune: .* candidates: " "$WORK/gpt2_tuned_again.log" &&
      flunk "gpt2: a run given the same training.gemm_autotune_dir timed shapes again"
    grep -q "cuBLASLt autotune: $timed GEMM shapes (0 timed in this run, $timed read from " \
      "$WORK/gpt2_tuned_again.log" ||
      flunk "gpt2: the rerun's autotune exit summary does not say that all $timed shapes came from the file"
    check "gpt2: a run given the same training.gemm_autotune_dir is bitwise the tuning run" python3 \
      tests/checkpoint/compare_resumed.py "$WORK/gpt2_tuned.jsonl" "$WORK/gpt2_tuned_again.jsonl" \
      "$WORK/gpt2_tuned" "$WORK/gpt2_tuned_again"
  else
    flunk "gpt2: the run given the same training.gemm_autotune_dir"
  fi
  check_resume "gpt2 (bf16, GEMM autotuning)" test-tiny-gpt2.json gpt2_tuned gpt2_tuned "${tune[@]}"
  # A file of another GPU's choices, and one cut short: exit 2 naming the key, and the file unchanged.
  refused() {  # refused LABEL EXPECTED_MESSAGE: runs over $WORK/gemm_algorithms_other
    cp "$WORK/gemm_algorithms_other/rank-00000.json" "$WORK/other_before.json"
    out=$("$BIN" train --config configs/test-tiny-gpt2.json --set data.path="$DATA" --set training.train_iters=2 \
      "${tune[@]}" --set training.gemm_autotune_dir="$WORK/gemm_algorithms_other" 2>&1)
    st=$?
    if [[ $st -eq 2 ]] && grep -q "training.gemm_autotune_dir: .*$2" <<<"$out" &&
      cmp -s "$WORK/other_before.json" "$WORK/gemm_algorithms_other/rank-00000.json"; then
      pass "$1 training.gemm_autotune_dir file: exit 2 naming the key, the file unchanged"
    else
      flunk "$1 training.gemm_autotune_dir file: exit $st: $(grep -a -m1 'error' <<<"$out")"
    fi
  }
  mkdir -p "$WORK/gemm_algorithms_other"
  sed 's/"gpu": "[^"]*"/"gpu": "NVIDIA B200"/' "$choices" >"$WORK/gemm_algorithms_other/rank-00000.json"
  refused "another GPU's" "holds algorithms chosen on NVIDIA B200"
  head -c 300 "$choices" >"$WORK/gemm_algorithms_other/rank-00000.json"
  refused "a truncated" "is not a valid file of cuBLASLt choices"
  unset LATTICE_EMU_CUBLASLT_SLOW_ALGOS
  # A directory that cannot be made (under a regular file): exit 2 naming the field, from the check of
  # every output path before training (not from the first GEMM's write of its choice).
  touch "$WORK/not_a_directory"
  out=$("$BIN" train --config configs/test-tiny-gpt2.json --set data.path="$DATA" --set training.train_iters=2 \
    "${tune[@]}" --set training.gemm_autotune_dir="$WORK/not_a_directory/choices" 2>&1)
  st=$?
  if [[ $st -eq 2 ]] && grep -q "training.gemm_autotune_dir '.*' is not writable: cannot create" <<<"$out" &&
    ! grep -qE "step +1/" <<<"$out" &&
    [[ -f $WORK/not_a_directory && ! -s $WORK/not_a_directory ]]; then
    pass "gpt2: an unwritable training.gemm_autotune_dir: exit 2 naming it, before step 1"
  else
    flunk "gpt2: an unwritable training.gemm_autotune_dir: exit $st: $(grep -a -m1 'error' <<<"$out")"
  fi
else
  flunk "gpt2: bf16 run with training.gemm_autotune_dir"
fi

# Where cuBLASLt refuses a problem the wrapper has another way for (an epilogue, a batch with a
# shared operand, the residual read as C), whether its heuristic says so or only the call: each such
# GEMM runs as separate ops from then on, the log names it, and training still matches the CPU (f32
# within the GPU-vs-CPU bounds; bf16 with training.gelu_fusion and bias_grad_fusion within the bf16
# ones). Only the emulator can be made to refuse (LATTICE_EMU_CUBLASLT_REFUSE); on a GPU the runs
# above take what its cuBLASLt accepts.
if grep -q "CPU emulator of a GPU" "$WORK/gpt2_gpu.log"; then
  for when in heuristic launch; do
    label="gpt2 (emulator): cuBLASLt refusing at its $when"
    if LATTICE_EMU_CUBLASLT_REFUSE=$when train "gpt2_refused_$when" 1 test-tiny-gpt2.json --set device=cuda \
      --export "$WORK/gpt2_refused_$when" &&
      LATTICE_EMU_CUBLASLT_REFUSE=$when train "gpt2_refused_bf16_$when" 1 test-tiny-gpt2.json "${fuse[@]}" \
        --set training.bias_grad_fusion=true --set device=cuda --export "$WORK/gpt2_refused_bf16_$when"; then
      log=$WORK/gpt2_refused_bf16_$when.log
      named=$(grep -E "cuBLASLt (has no algorithm for|refused) " "$log" | grep -c "separate ops")
      if grep -q "epilogue GELU aux bias" "$log" && grep -q "epilogue DGELU" "$log" && grep -q "batch 3 " "$log" &&
        grep -q "epilogue bias gradient" "$log"; then
        pass "$label: the log names the $named GEMM shapes run as separate ops (GELU, DGELU, bias gradient and q, k, v among them)"
      else
        flunk "$label: the log names $named GEMM shapes run as separate ops, not the GELU, DGELU, bias gradient and q, k, v ones"
      fi
      check "$label: f32 vs CPU" python3 tests/parallel/compare_dp_runs.py 20 "$WORK/gpt2_cpu.jsonl" \
        "$WORK/gpt2_cpu" "$WORK/gpt2_refused_$when.jsonl" "$WORK/gpt2_refused_$when"
      check "$label: bf16 with training.gelu_fusion and bias_grad_fusion vs bf16 on the CPU" python3 tests/parallel/compare_dp_runs.py \
        --bf16 20 "$WORK/gpt2_bf16_cpu.jsonl" "$WORK/gpt2_bf16_cpu" --noise "$WORK/gpt2_cpu.jsonl" "$WORK/gpt2_cpu" \
        "$WORK/gpt2_refused_bf16_$when.jsonl" "$WORK/gpt2_refused_bf16_$when"
    else
      flunk "$label: the runs"
    fi
  done
fi

# The memory check, before anything is allocated: GPT-2 1.5B with 64 sequences of 1024 per micro-batch
# needs about 342 GiB (the memory plan), more than any GPU has: exit 2, naming the GPU and its memory.
out=$("$BIN" train --config configs/bench-gpt2-1.5b.json --set device=cuda --set data.path="$DATA" \
  --set training.micro_batch_size=64 --set training.global_batch_size=64 2>&1)
st=$?
if [[ $st -eq 2 ]] && grep -q "a rank needs about 341.5[0-9]* GiB.*but this GPU has" <<<"$out"; then
  pass "a run larger than the GPU's memory: exit 2 before it allocates, naming the GPU's memory"
  grep -o "but this GPU has [^)]*)" <<<"$out" | head -1 | sed 's/^/  /'
else
  flunk "a run larger than the GPU's memory: exit $st: $(tail -2 <<<"$out")"
fi

echo "train_gpu_test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
