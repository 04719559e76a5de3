#!/usr/bin/env bash
# Installs what Lattice needs and is missing: Debian packages (build, libraries, quickstart text,
# and Slurm for the launch tests, whose one-node cluster tools/slurm/local_cluster.sh starts privately:
# no daemon of the machine is started or configured),
# the PyPI packages the tests use as independent references, and the header-only cuDNN frontend for
# --config=cuda builds. Idempotent; quiet when all is there.
set -euo pipefail

DEBIAN_PACKAGES=(
  bazel-bootstrap g++ python3
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev catch2
  libopenmpi-dev openmpi-bin
  libopenblas-dev libopenblas0-openmp
  libpcre2-dev
  zlib1g-dev
  protobuf-compiler libprotobuf-dev
  fortunes
  slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins
)
PYTHON_PACKAGES=(safetensors numpy tokenizers tensorboard matplotlib)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

missing_py=()
for p in "${PYTHON_PACKAGES[@]}"; do
  python3 -c "import $p" 2>/dev/null || missing_py+=("$p")
done
if ((${#missing_py[@]})); then
  echo "installing Python packages: ${missing_py[*]}"
  python3 -m pip install -q "${missing_py[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${missing_py[@]}"
fi

# cuDNN's C++ frontend (header-only; bf16 attention through cuDNN SDPA in kernels/cuda) comes from
# PyPI's nvidia-cudnn-frontend wheel, whose include/ lands in site-packages/include. --no-deps: its
# Python dependencies (CUTLASS DSL, TVM FFI, cuda-bindings, hundreds of MB) serve only the Python
# API. A fixed symlink makes the headers reachable by Bazel: WORKSPACE's @cudnn_frontend repository
# points at it, and only --config=cuda targets depend on that repository.
CUDNN_FRONTEND_VERSION=1.32.0
CUDNN_FRONTEND_LINK=/usr/local/lib/lattice/cudnn_frontend
installed_fe=$(python3 -m pip show nvidia-cudnn-frontend 2>/dev/null | sed -n 's/^Version: //p' || true)
if [[ "$installed_fe" != "$CUDNN_FRONTEND_VERSION" ]]; then
  echo "installing Python package: nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION (C++ headers only)"
  python3 -m pip install -q --no-deps "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" 2>/dev/null ||
    python3 -m pip install -q --no-deps --break-system-packages "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
fi
fe_location=$(python3 -m pip show nvidia-cudnn-frontend | sed -n 's/^Location: //p')
fe_header=$(python3 -m pip show -f nvidia-cudnn-frontend | sed 's/^ *//' | grep -E '(^|/)cudnn_frontend\.h$' | head -n 1 || true)
fe_include=$(dirname "$fe_location/$fe_header")
if [[ ! -f "$fe_include/cudnn_frontend.h" ]]; then
  echo "install_deps.sh: nvidia-cudnn-frontend installed no cudnn_frontend.h (looked in $fe_include)" >&2
  exit 1
fi
if [[ "$(readlink "$CUDNN_FRONTEND_LINK/include" 2>/dev/null || true)" != "$fe_include" ]]; then
  SUDO=""
  if [[ $(id -u) -ne 0 && ! -w "$(dirname "$CUDNN_FRONTEND_LINK")" ]]; then SUDO="sudo"; fi
  $SUDO mkdir -p "$CUDNN_FRONTEND_LINK"
  $SUDO ln -sfn "$fe_include" "$CUDNN_FRONTEND_LINK/include"
  echo "linked $CUDNN_FRONTEND_LINK/include -> $fe_include"
fi
