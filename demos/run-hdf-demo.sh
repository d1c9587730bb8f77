#!/usr/bin/env bash
# The HDF demo: converts the 12AX task to HDF files with tools/hdf_dump.py (once), then trains
# demos/demo-tf-lstm.12ax-hdf.config from them with cache_size = "0".
# Usage: demos/run-hdf-demo.sh [--dry-run] [++key value ...]     (env RETURNN_DEMO_DIR sets the work dir)
# --dry-run prints the commands and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source demos/launch-common.sh
DRY_RUN="${DRY_RUN:-0}"
parse_demo_args "$@"
PYTHON=$(find_python rnn.py)
export RETURNN_DEMO_DIR=${RETURNN_DEMO_DIR:-/tmp/$(id -un)/returnn/demo-tf-lstm.12ax-hdf}
make_demo_hdfs "$PYTHON" train:5000:11 dev:200:12
run_or_print "$PYTHON" rnn.py demos/demo-tf-lstm.12ax-hdf.config ${ARGS[@]+"${ARGS[@]}"}
