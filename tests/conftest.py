"""Shared pytest setup: keep TensorFlow to one intra-op thread (small CI machines)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
except RuntimeError:  # runtime already initialised
    pass

# Engine code that reads a config key not declared in returnn/config_keys/declarations.py fails
# (here and in the rnn.py subprocesses the tests start, which inherit the environment).
os.environ["RETURNN_CHECK_KEYS"] = "1"


def pytest_configure(config):
    config.addinivalue_line("markers", "multinode: jobs across simulated nodes (network namespaces); slow, "
                                       "deselect with -m 'not multinode'")
    config.addinivalue_line("markers", "returnn_interop: model files moving between the real RETURNN (its own "
                                       "venv, RETURNN_VENV) and this engine; run alone: "
                                       "pytest tests/test_returnn_checkpoints.py")
