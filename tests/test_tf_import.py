"""Importing TensorFlow (returnn/util/tf_import.py): the garbage collector's passes over its objects."""
from __future__ import annotations

import os
import subprocess

import pytest

from helpers import PYTHON, REPO


@pytest.mark.parametrize("enabled_before", [True, False])
def test_tensorflow_is_imported_with_the_garbage_collector_paused_and_frozen_after(enabled_before):
    """import_tensorflow: TensorFlow's objects end up in the permanent generation (full collections
    skip them) and the collector is left as it was."""
    code = ("import gc, sys\n"
            "%s\n"
            "from returnn.util.tf_import import import_tensorflow\n"
            "import_tensorflow()\n"
            "print('tensorflow' in sys.modules, gc.isenabled(), gc.get_freeze_count())\n"
            % ("" if enabled_before else "gc.disable()"))
    proc = subprocess.run([PYTHON, "-c", code], cwd=str(REPO), capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr
    imported, enabled, frozen = proc.stdout.split()
    assert imported == "True" and enabled == str(enabled_before)
    assert int(frozen) > 100000  # TensorFlow's modules, functions, classes: hundreds of thousands
