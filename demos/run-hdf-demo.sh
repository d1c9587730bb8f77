#!/usr/bin/env bash
# The HDF demo: converts the 12AX task to HDF files with tools/hdf_dump.py (once), then trains
# demos/demo-tf-lstm.12ax-hdf.config from them with cache_size = "0".
# Usage: demos/run-hdf-demo.sh [++key value ...]     (env RETURNN_DEMO_DIR sets the work dir)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export RETURNN_DEMO_DIR=${RETURNN_DEMO_DIR:-/tmp/$(id -un)/returnn/demo-tf-lstm.12ax-hdf}
mkdir -p "$RETURNN_DEMO_DIR"
if [ ! -f "$RETURNN_DEMO_DIR/12ax.train.hdf" ]; then
  "$PYTHON" tools/hdf_dump.py "{'class': 'Task12AXDataset', 'num_seqs': 5000, 'fixed_random_seed': 11}" "$RETURNN_DEMO_DIR/12ax.train.hdf"
fi
if [ ! -f "$RETURNN_DEMO_DIR/12ax.dev.hdf" ]; then
  "$PYTHON" tools/hdf_dump.py "{'class': 'Task12AXDataset', 'num_seqs': 200, 'fixed_random_seed': 12}" "$RETURNN_DEMO_DIR/12ax.dev.hdf"
fi
exec "$PYTHON" rnn.py demos/demo-tf-lstm.12ax-hdf.config "$@"
