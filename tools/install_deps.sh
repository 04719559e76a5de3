#!/usr/bin/env bash
# Installs what Lattice needs and is missing: Debian packages (build, libraries, quickstart text)
# and the PyPI packages the tests use as independent references. Idempotent; quiet when all is there.
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
