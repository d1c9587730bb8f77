# Two commands for a new user: `make demo` and `make test`. Both install what is missing first.
VENV   := .venv
PY     := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Running as root under mpirun (tests, demos) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup demo demo-hdf demo-horovod test bench clean

setup:
	@bash tools/setup_env.sh

DEMO_DIR ?= /tmp/returnn-demo

# Trains the 12AX LSTM demo, then the same task from HDF files (cache_size = "0"); fresh each time.
demo: setup
	rm -rf $(DEMO_DIR)
	$(PY) rnn.py demos/demo-tf-lstm.12ax.config ++model $(DEMO_DIR)/12ax/model ++learning_rate_file $(DEMO_DIR)/12ax/newbob.data
	RETURNN_DEMO_DIR=$(DEMO_DIR)/12ax-hdf bash demos/run-hdf-demo.sh

demo-horovod: setup
	bash demos/run-horovod-demo.sh

test: setup
	$(PY) -m pytest -q tests

bench: setup
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/pipeline.py
	$(PY) benchmarks/hdf_read.py
	$(PY) benchmarks/scaling.py

clean:
	rm -rf $(VENV) build *.egg-info
