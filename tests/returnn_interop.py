"""What the tests that run the real RETURNN share (tests/test_returnn_checkpoints.py,
tests/test_returnn_checkpoint_units.py): where its venv is, why it cannot run, and this engine's
network of a config body or net dict built in-process."""
from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Dict

import numpy as np

import pytest

from helpers import REPO, child_env

RETURNN_VENV = Path(os.environ.get("RETURNN_VENV") or REPO / ".bench-venv-returnn")
RETURNN_PYTHON = RETURNN_VENV / "bin" / "python"
TIMEOUT = 600


# ---------------------------------------------------------------- running the two engines

@functools.lru_cache(maxsize=None)
def returnn_unusable() -> str:
    """Why the real RETURNN cannot run here ('' when it can)."""
    if not RETURNN_PYTHON.exists():
        return "no RETURNN virtualenv at %s (set RETURNN_VENV)" % RETURNN_VENV
    code = "import os, returnn, tensorflow; print(os.path.realpath(returnn.__file__))"
    try:
        proc = subprocess.run([str(RETURNN_PYTHON), "-c", code], cwd=tempfile.gettempdir(), env=child_env(),
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "%s cannot run: %s" % (RETURNN_PYTHON, exc)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return "%s cannot import returnn/tensorflow: %s" % (RETURNN_PYTHON, (proc.stderr.strip().splitlines()
                                                                             or ["?"])[-1])
    if lines[-1].startswith(str(REPO.resolve() / "returnn")):
        return "%s imports this repository's package, not RETURNN" % RETURNN_PYTHON
    return ""


@pytest.fixture(scope="module", autouse=True)
def need_returnn():
    """Skips the module's tests, saying why, when the real RETURNN cannot run here."""
    reason = returnn_unusable()
    if reason:
        pytest.skip("real RETURNN unavailable: " + reason)


def rename_layers(body: str, names: Dict[str, str]) -> str:
    for old, new in names.items():
        body = re.sub(r'"%s"' % old, '"%s"' % new, body)
    return body


@contextlib.contextmanager
def our_network(body_or_dict, config: dict, extern_data: dict = None):
    """This engine's network of a config body (text with ``network`` and ``extern_data``) or of a
    net dict, built with ``config`` (e.g. ``behavior_version``) as the global config."""
    from returnn.config import Config, get_global_config, set_global_config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork
    if isinstance(body_or_dict, str):
        namespace: dict = {}
        exec(body_or_dict, namespace)  # noqa: S102 - the test's own config text
        net_dict, extern_data = namespace["network"], namespace["extern_data"]
    else:
        net_dict = body_or_dict
    old = get_global_config()
    set_global_config(Config(copy.deepcopy(config)))
    try:
        extern = extern_data_from_config(Config({"extern_data": copy.deepcopy(extern_data)}))
        yield TFNetwork(copy.deepcopy(net_dict), extern)
    finally:
        set_global_config(old)


def checkpoint_values(prefix: Path) -> Dict[str, np.ndarray]:
    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
