#!/usr/bin/env bash
# The Horovod demo: the 12AX HDF demo trained by 2 ranks (param sync) on this machine, TCP between
# ranks, one TF thread per rank. Usage: demos/run-horovod-demo.sh [-n N] [--dry-run] [++key value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
NP=2
LAUNCH_OPTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n) NP="$2"; shift 2 ;;
    --dry-run) LAUNCH_OPTS+=(--dry-run); shift ;;
    *) break ;;
  esac
done
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo "$(pwd)/.venv/bin/python" || echo python3 )}
export RETURNN_DEMO_DIR=${RETURNN_DEMO_DIR:-/tmp/$(id -un)/returnn/demo-horovod}
mkdir -p "$RETURNN_DEMO_DIR"
for part in train:20000:11 dev:200:12; do
  IFS=: read -r name num seed <<<"$part"
  [ -f "$RETURNN_DEMO_DIR/12ax.$name.hdf" ] || "$PYTHON" tools/hdf_dump.py \
    "{'class': 'Task12AXDataset', 'num_seqs': $num, 'fixed_random_seed': $seed}" "$RETURNN_DEMO_DIR/12ax.$name.hdf"
done
export PYTHON MPI_BTL=${MPI_BTL:-tcp,self} MPI_EXPORT="${MPI_EXPORT:-} RETURNN_DEMO_DIR"
exec demos/launch-mpirun.sh -n "$NP" "${LAUNCH_OPTS[@]}" demos/demo-tf-lstm.12ax-hdf.config demos/demo-horovod.config "$@"
