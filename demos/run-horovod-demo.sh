#!/usr/bin/env bash
# The Horovod demo: the 12AX HDF demo trained by 2 ranks (param sync) on this machine, TCP between
# ranks, one TF thread per rank. Usage: demos/run-horovod-demo.sh [-n N] [--dry-run] [++key value ...]
# --dry-run prints the commands (HDF conversion when the files are missing, then mpirun) and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source demos/launch-common.sh
NP=2
DRY_RUN="${DRY_RUN:-0}"
parse_demo_args "$@"
check_np "$NP"
PYTHON=$(find_python rnn.py)
case "$PYTHON" in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac
export RETURNN_DEMO_DIR=${RETURNN_DEMO_DIR:-/tmp/$(id -un)/returnn/demo-horovod}
make_demo_hdfs "$PYTHON" train:20000:11 dev:200:12
export PYTHON DRY_RUN MPI_BTL=${MPI_BTL:-tcp,self} MPI_EXPORT="${MPI_EXPORT:-} RETURNN_DEMO_DIR"
exec demos/launch-mpirun.sh -n "$NP" demos/demo-tf-lstm.12ax-hdf.config demos/demo-horovod.config ${ARGS[@]+"${ARGS[@]}"}
