#!/usr/bin/env bash
# Idempotent environment set-up: OpenMPI, a virtualenv (default .venv/), TensorFlow, a distributed
# backend, and this package in editable mode. A second run checks a stamp file and returns in seconds.
#
# Which TensorFlow (one line says which and why):
#   Python <= 3.11: TensorFlow 2.15.1 + Horovod 0.28.1 built against it with MPI (Horovod's last
#                   release builds only against TensorFlow <= 2.15);
#   Python >= 3.12: the newest TensorFlow + the mpi4py backend (TensorFlow 2.15 has no wheels there).
# Environment: PYTHON=python3.X chooses the interpreter; VENV=DIR the virtualenv; TF_STACK=horovod|latest
# overrides the choice; TF_PKG=... the TensorFlow requirement; SETUP_DECIDE_ONLY=1 prints the choice and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="${VENV:-$ROOT/.venv}"
case "$VENV" in /*) ;; *) VENV="$ROOT/$VENV" ;; esac
PY="${PYTHON:-python3}"
STAMP="$VENV/.setup-stamp"
HVD_VERSION="0.28.1"

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

command -v "$PY" >/dev/null 2>&1 || die "no '$PY' on PATH; set PYTHON=python3.X to the interpreter to use"
# The command must also run: a pyenv shim exists for every installed version but fails (exit 127)
# unless that version is selected. One line saying so, with the interpreter's own first complaint.
probe_err=$(mktemp)
pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>"$probe_err") && rc=0 || rc=$?
why=$(grep -v '^[[:space:]]*$' "$probe_err" | head -1 || true); rm -f "$probe_err"
if [ "$rc" != 0 ] || ! [[ "$pyver" =~ ^[0-9]+\.[0-9]+$ ]]; then
  case "$(command -v "$PY")" in
    */shims/*)  # pyenv: name the interpreter behind the shim when one version has it
      real=$(ls -d "$(dirname "$(dirname "$(command -v "$PY")")")"/versions/*/bin/"$(basename "$PY")" 2>/dev/null | tail -1 || true)
      hint="a pyenv shim of a version that is not selected: PYTHON=${real:-\$(pyenv root)/versions/<version>/bin/$(basename "$PY")}, or 'pyenv shell <version>' first" ;;
    *) hint="set PYTHON=python3.X to an interpreter that runs" ;;
  esac
  [ "$rc" != 0 ] || why="it printed no version"
  die "'$PY' ($(command -v "$PY")) does not run as Python (exit $rc${why:+: $why}); $hint"
fi
pyminor=${pyver#3.}
[ "${pyver%%.*}" = "3" ] && [ "$pyminor" -ge 9 ] || die "Python $pyver is too old (3.9 or newer needed); set PYTHON=python3.X"

stack="${TF_STACK:-auto}"
if [ "$stack" = "auto" ]; then
  if [ "$pyminor" -le 11 ]; then stack=horovod; else stack=latest; fi
  why="chosen for Python $pyver"
else
  why="TF_STACK=$stack"
fi
case "$stack" in
  horovod)
    TF_PKG="${TF_PKG:-tensorflow-cpu==2.15.1}"
    [ "$pyminor" -le 11 ] || die "TF_STACK=horovod needs Python <= 3.11 (TensorFlow 2.15 has no wheels for $pyver)"
    say "TensorFlow 2.15.1 + Horovod $HVD_VERSION ($why; Horovod builds only against TensorFlow <= 2.15)" ;;
  latest)
    TF_PKG="${TF_PKG:-tensorflow-cpu}"
    say "newest TensorFlow + mpi4py backend, no Horovod ($why; Horovod builds only against TensorFlow <= 2.15, which has no wheels for Python >= 3.12)" ;;
  *) die "TF_STACK must be auto, horovod or latest (got '$stack')" ;;
esac
[ "${SETUP_DECIDE_ONLY:-0}" != 1 ] || exit 0
want="stack=$stack tf=$TF_PKG hvd=$HVD_VERSION py=$pyver script=$(md5sum "$0" | cut -c1-12) setup=$(md5sum setup.py | cut -c1-12)"

# 1. OpenMPI (system packages; Horovod and mpi4py compile against it).
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    say "installing OpenMPI (apt-get install openmpi-bin libopenmpi-dev)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
  else
    die "OpenMPI is missing. Install it first, e.g. 'sudo apt-get install openmpi-bin libopenmpi-dev'."
  fi
else
  say "OpenMPI present: $(command -v mpirun)"
fi

# 1b. ip (iproute2) for the multi-node tests, which simulate nodes with network namespaces, and ps
# (procps), which the launch scripts' mpirun watchdog uses. Without root they are only named: the
# multi-node tests then skip with that reason.
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v ps >/dev/null 2>&1 || missing+=(procps)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    say "installing ${missing[*]} (apt-get; for the multi-node tests and the launch scripts)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    say "not installed: ${missing[*]} (multi-node tests will be skipped; launch scripts need ps)"
  fi
fi

# 2. Virtualenv (made again when it was made with another Python than the one asked for).
if [ -x "$VENV/bin/python" ]; then
  have=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
  if [ "$have" != "$pyver" ]; then
    say "recreating $VENV: it has Python $have, $PY is $pyver"
    rm -rf "$VENV"
  fi
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtualenv $VENV (Python $pyver)"
  "$PY" -m venv "$VENV" || die "'$PY -m venv' failed; on Debian/Ubuntu install python$pyver-venv"
fi

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  say "environment up to date ($VENV)"
  exit 0
fi

export PATH="$VENV/bin:$PATH" TF_CPP_MIN_LOG_LEVEL=2
PIP="$VENV/bin/python -m pip"
say "installing Python packages into $VENV ($TF_PKG, h5py, mpi4py, tensorboard, pytest, pytest-xdist)"
# TensorBoard imports pkg_resources, which setuptools 81 removed.
$PIP install -q --upgrade pip wheel packaging "setuptools<81"
if [ "$stack" = "horovod" ]; then
  $PIP install -q "$TF_PKG" "numpy<2" h5py mpi4py cmake pytest pytest-xdist matplotlib
else
  $PIP install -q "$TF_PKG" tensorboard h5py mpi4py pytest pytest-xdist matplotlib
fi

# 3. Horovod, built from source against the TensorFlow above, with MPI.
if [ "$stack" = "horovod" ]; then
  if ! "$VENV/bin/python" -c "import horovod.tensorflow as h; assert h.mpi_built()" >/dev/null 2>&1; then
    say "building horovod==$HVD_VERSION against TensorFlow with MPI (takes a few minutes)"
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
      HOROVOD_WITHOUT_GLOO=1 MAKEFLAGS="-j$(nproc)" \
      $PIP install -q --no-cache-dir --no-build-isolation "horovod==$HVD_VERSION"
  else
    say "horovod already built with MPI"
  fi
fi

# 4. This package, editable, with the `returnn` console script.
say "installing this package (editable)"
$PIP install -q --no-deps --no-build-isolation -e "$ROOT"

if [ "$stack" = "horovod" ]; then
  "$VENV/bin/python" -c "import tensorflow as tf, horovod.tensorflow as hvd, h5py, mpi4py; print('[setup] ok: tensorflow', tf.__version__, '/ horovod mpi_built', hvd.mpi_built())"
else
  "$VENV/bin/python" -c "import tensorflow as tf, h5py, mpi4py; print('[setup] ok: tensorflow', tf.__version__, '/ mpi4py', mpi4py.__version__)"
fi
"$VENV/bin/tensorboard" --version >/dev/null 2>&1 || die "$VENV/bin/tensorboard does not start"
echo "$want" > "$STAMP"
