#!/usr/bin/env bash
# Idempotent environment set-up: OpenMPI, a virtualenv in .venv/ with TensorFlow 2.15.1,
# Horovod 0.28.1 built against it with MPI, and this package installed in editable mode.
# A second run checks a stamp file and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
STAMP="$VENV/.setup-stamp"
TF_PKG="${TF_PKG:-tensorflow-cpu==2.15.1}"
HVD_VERSION="0.28.1"
want="tf=$TF_PKG hvd=$HVD_VERSION script=$(md5sum "$0" | cut -c1-12) setup=$(md5sum setup.py | cut -c1-12)"

say() { echo "[setup] $*"; }

# 1. OpenMPI (system packages; Horovod and mpi4py compile against it).
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    say "installing OpenMPI (apt-get install openmpi-bin libopenmpi-dev)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
  else
    echo "[setup] error: OpenMPI is missing. Install it first, e.g. 'sudo apt-get install openmpi-bin libopenmpi-dev'." >&2
    exit 1
  fi
else
  say "OpenMPI present: $(command -v mpirun)"
fi

# 2. Virtualenv.
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  say "environment up to date ($VENV)"
  exit 0
fi

export PATH="$VENV/bin:$PATH"
PIP="$VENV/bin/python -m pip"
say "installing Python packages into $VENV (TensorFlow, numpy<2, h5py, mpi4py, cmake, pytest)"
$PIP install -q --upgrade pip setuptools wheel packaging
$PIP install -q "$TF_PKG" "numpy<2" h5py mpi4py cmake pytest matplotlib

# 3. Horovod, built from source against the TensorFlow above, with MPI.
if ! "$VENV/bin/python" -c "import horovod.tensorflow as h; assert h.mpi_built()" >/dev/null 2>&1; then
  say "building horovod==$HVD_VERSION against TensorFlow with MPI (takes a few minutes)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITHOUT_GLOO=1 MAKEFLAGS="-j$(nproc)" \
    $PIP install -q --no-cache-dir --no-build-isolation "horovod==$HVD_VERSION"
else
  say "horovod already built with MPI"
fi

# 4. This package, editable, with the `returnn` console script.
say "installing this package (editable)"
$PIP install -q --no-deps --no-build-isolation -e "$ROOT"

"$VENV/bin/python" -c "import tensorflow as tf, horovod.tensorflow as hvd, h5py, mpi4py; print('[setup] ok: tensorflow', tf.__version__, '/ horovod mpi_built', hvd.mpi_built())"
echo "$want" > "$STAMP"
