# Two commands for a new user: `make demo` and `make test`. Both install what is missing first.
# `make setup` picks TensorFlow 2.15.1 + Horovod on Python <= 3.11, else the newest TensorFlow + mpi4py
# (PYTHON=python3.X make setup chooses the interpreter). `make test-latest-tf` tests the second path
# in its own venv (LATEST_VENV).
VENV   ?= .venv
PY     := $(VENV)/bin/python
LATEST_VENV ?= .venv-latest-tf
# The single-process engine and the 2-rank (mpi4py) tests; LATEST_TF_TESTS=tests runs everything.
LATEST_TF_TESTS ?= tests/test_engine.py tests/test_distributed.py tests/test_config_keys.py tests/test_first_hour.py \
	tests/test_tensorboard.py tests/test_layers.py tests/test_losses.py tests/test_optimizers.py tests/test_checkpoint.py \
	tests/test_rec_subnet.py tests/test_rec_search.py tests/test_layers_attention.py tests/test_layers_gather.py \
	tests/test_lstm_kernels.py tests/test_dense_dot.py tests/test_packed_frames.py tests/test_compiled_function.py \
	tests/test_tf_import.py tests/test_train_loop.py tests/test_chunk_options.py
BASE_PATH := $(PATH)
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Running as root under mpirun (tests, demos) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export TF_CPP_MIN_LOG_LEVEL := 2

.PHONY: setup demo demo-hdf demo-horovod test test-latest-tf bench clean

setup:
	@VENV=$(VENV) bash tools/setup_env.sh

DEMO_DIR ?= /tmp/returnn-demo

# Trains the 12AX LSTM demo, then the same task from HDF files (cache_size = "0"); fresh each time.
demo: setup
	rm -rf $(DEMO_DIR)
	$(PY) rnn.py demos/demo-tf-lstm.12ax.config ++model $(DEMO_DIR)/12ax/model ++learning_rate_file $(DEMO_DIR)/12ax/newbob.data
	RETURNN_DEMO_DIR=$(DEMO_DIR)/12ax-hdf bash demos/run-hdf-demo.sh

demo-horovod: setup
	bash demos/run-horovod-demo.sh

# The suite runs on TEST_WORKERS pytest-xdist workers (default: one per core; TEST_WORKERS=0 runs it in
# this one process); tests that share a module fixture or a timing-sensitive resource stay together
# (tests/conftest.py: groups by file, and a lock that keeps other MPI jobs away from the stall-timeout
# tests). The 25 slowest tests are listed at the end.
TEST_WORKERS ?= auto
PYTEST_ARGS ?= -q -n $(TEST_WORKERS) --dist loadgroup --durations=25

test: setup
	$(PY) -m pytest $(PYTEST_ARGS) tests

# The newest TensorFlow with the mpi4py backend (no Horovod), in its own venv.
test-latest-tf: export PATH := $(abspath $(LATEST_VENV))/bin:$(BASE_PATH)
test-latest-tf:
	@VENV=$(LATEST_VENV) TF_STACK=latest bash tools/setup_env.sh
	$(LATEST_VENV)/bin/python -m pytest $(PYTEST_ARGS) $(LATEST_TF_TESTS)

bench: setup
	$(PY) benchmarks/engine_overhead.py
	$(PY) benchmarks/pipeline.py
	$(PY) benchmarks/hdf_read.py
	$(PY) benchmarks/scaling.py
	$(PY) benchmarks/step_scaling.py

clean:
	rm -rf $(VENV) $(LATEST_VENV) build *.egg-info
