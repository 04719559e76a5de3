#!/usr/bin/env bash
# Export and import across precisions (issue 11):
# - `lattice export --dtype bf16` writes BF16 safetensors, each tensor the round-to-nearest-even of
#   the F32 export (computed here independently), with config.json's torch_dtype "bfloat16";
# - a bf16 run's `train --export` writes its fp32 master weights by default (F32, torch_dtype
#   float32) and BF16 with --dtype bf16, their rounding;
# - model.init_from reads F32, BF16 and F16 files into either precision: a run of one step at lr 0
#   (nothing moves) exports exactly the file's values widened to fp32;
# - the metrics file's run_start and summary lines name the precision and the reduction dtype.
source tests/checkpoint/resume_lib.sh
tiny=(--config configs/test-tiny-gpt2.json --set data.path="$WORK/tiny" --set optimizer.warmup_iters=0)

$LATTICE export "${tiny[@]}" --output "$WORK/f32" >"$WORK/f32.log" 2>&1 || { cat "$WORK/f32.log"; fail "export"; }
$LATTICE export "${tiny[@]}" --dtype bf16 --output "$WORK/bf16" >"$WORK/bf16.log" 2>&1 ||
  { cat "$WORK/bf16.log"; fail "export --dtype bf16"; }
expect_exit2 "--dtype: fp16 not in {fp32,bf16}" $LATTICE export "${tiny[@]}" --dtype fp16 --output "$WORK/x"

run 1 "$WORK/train.log" train "${tiny[@]}" --set training.train_iters=3 --set training.precision=bf16 \
  --set logging.metrics_file="$WORK/train.jsonl" --export "$WORK/train-f32"
run 1 "$WORK/train16.log" train "${tiny[@]}" --set training.train_iters=3 --set training.precision=bf16 \
  --export "$WORK/train-bf16" --dtype bf16

# An F16 file of the init (numpy's float16), for model.init_from.
python3 - "$WORK" <<'PY'
import json, shutil, sys
import numpy as np
from safetensors.numpy import load_file, save_file
w = sys.argv[1]
f32 = load_file(f"{w}/f32/model.safetensors")
save_file({k: v.astype(np.float16) for k, v in f32.items()}, f"{w}/f16.safetensors", metadata={"format": "pt"})
PY
for file in f32/model.safetensors bf16/model.safetensors f16.safetensors; do
  for precision in fp32 bf16; do
    name=$(dirname "$file" | tr / _)-$(basename "$file" .safetensors)-$precision
    run 1 "$WORK/$name.log" train "${tiny[@]}" --set training.train_iters=1 --set optimizer.lr=0 \
      --set optimizer.min_lr=0 --set training.precision=$precision --set model.init_from="$WORK/$file" \
      --export "$WORK/$name"
    echo "$WORK/$file $WORK/$name" >>"$WORK/init_pairs"
  done
done

python3 - "$WORK" <<'PY'
import json, struct, sys
import numpy as np
w = sys.argv[1]

def read(path):
    """name -> (safetensors dtype, values widened exactly to float32), read from the raw format."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        if e["dtype"] == "BF16":
            v = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            v = np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[e["dtype"]]).astype(np.float32)
        out[name] = (e["dtype"], v.reshape(e["shape"]))
    return out

def round_bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)

def torch_dtype(d):
    return json.load(open(f"{d}/config.json"))["torch_dtype"]

def check_rounded(f32_dir, bf16_dir):
    a, b = read(f"{f32_dir}/model.safetensors"), read(f"{bf16_dir}/model.safetensors")
    assert {d for d, _ in a.values()} == {"F32"} and {d for d, _ in b.values()} == {"BF16"}
    assert torch_dtype(bf16_dir) == "bfloat16" and torch_dtype(f32_dir) == "float32"
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(b[k][1], round_bf16(a[k][1])), f"{bf16_dir}: {k} is not the rounding of the F32 export"
    print(f"{bf16_dir}: {len(a)} BF16 tensors = round_bf16 of {f32_dir}")

check_rounded(f"{w}/f32", f"{w}/bf16")
check_rounded(f"{w}/train-f32", f"{w}/train-bf16")

for line in open(f"{w}/init_pairs"):
    src, out = line.split()
    want, got = read(src), read(f"{out}/model.safetensors")
    for k, (_, v) in want.items():
        assert got[k][0] == "F32" and np.array_equal(got[k][1], v), f"{out}: {k} differs from the widened {src}"
    print(f"init_from {'/'.join(src.split('/')[-2:])} ({next(iter(want.values()))[0]}) -> {out.split('/')[-1]}: exact")

rows = [json.loads(l) for l in open(f"{w}/train.jsonl")]
start = [r["run_start"] for r in rows if "run_start" in r][0]
summary = [r["summary"] for r in rows if "summary" in r][0]
assert start["precision"] == summary["precision"] == "bf16", (start, summary)
assert start["grad_reduce_dtype"] == summary["grad_reduce_dtype"] == "fp32", (start, summary)
print("metrics: run_start and summary name precision bf16, grad_reduce_dtype fp32")
PY
echo PASS
