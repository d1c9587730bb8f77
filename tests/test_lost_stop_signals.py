"""A stop signal whose exception C code cleared on the way (numpy and h5py run Python inside C
calls and may clear an error: seen as a SIGTERM'd forward pass that finished and wrote its output
in 1 of 12 runs), and one that lands between a temporary output's creation and the ``try`` that
drops it (seen as a ``.out.hdf.tmp-*`` left behind). Each case runs in its own process, as the
remembered signal is per process."""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from helpers import PYTHON, REPO, child_env

_PRELUDE = """
import os, signal, sys
import numpy as np
from returnn.errors import StopSignal
from returnn.interrupts import EarlyStop, StopRequest
EarlyStop().install()

def lose_a_signal():
    # the handler raises, and the exception is cleared before it reaches anyone (as C code does)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10 ** 6):
            pass
    except StopSignal:
        pass
"""


def _run(tmp_path: Path, body: str) -> str:
    script = tmp_path / "case.py"
    script.write_text(_PRELUDE + textwrap.dedent(body))
    proc = subprocess.run([PYTHON, str(script), str(tmp_path)], cwd=str(REPO), env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def test_a_lost_signal_keeps_the_forward_output_from_being_put_into_place(tmp_path):
    """The writer's close() raises the remembered signal instead of renaming the output into place;
    the temporary file is gone."""
    out = _run(tmp_path, """
        from returnn.datasets.hdf_write import SimpleHDFWriter
        path = os.path.join(sys.argv[1], "out.hdf")
        writer = SimpleHDFWriter(path, dim=2)
        writer.insert_batch(np.ones((1, 3, 2), "float32"), np.array([3]), ["seq-0"])
        lose_a_signal()
        try:
            writer.close()
            print("closed")
        except StopSignal as exc:
            print("stopped", exc.signum, os.path.exists(path), sorted(os.listdir(sys.argv[1])))
    """)
    assert out == "stopped 15 False ['case.py']", out


def test_a_lost_signal_keeps_a_dump_and_a_search_output_from_being_written(tmp_path):
    out = _run(tmp_path, """
        from returnn.datasets.generating import Task12AXDataset
        from returnn.datasets.hdf_write import dump_dataset_to_hdf
        from returnn.tf.search_task import write_hypotheses
        lose_a_signal()
        for name, write in [("dump.hdf", lambda p: dump_dataset_to_hdf(Task12AXDataset(num_seqs=3), p)),
                            ("search.txt", lambda p: write_hypotheses(p, [("seq-0", "a b")], "txt"))]:
            path = os.path.join(sys.argv[1], name)
            try:
                write(path)
                print("written", name)
            except StopSignal as exc:
                print("stopped", name, os.path.exists(path))
        print(sorted(os.listdir(sys.argv[1])))
    """)
    assert out.splitlines() == ["stopped dump.hdf False", "stopped search.txt False", "['case.py']"], out


def test_a_lost_signal_before_training_is_a_stop_request(tmp_path):
    """The training loop's handlers take over a signal lost during start-up: the loop stops after
    its first step and saves, as for a signal arriving in the loop."""
    out = _run(tmp_path, """
        lose_a_signal()
        request = StopRequest()
        request.install()
        print(request.requested, request.signum)
        request.uninstall()
    """)
    assert out == "True 15", out


def test_a_temporary_output_created_just_before_a_signal_is_removed_at_exit(tmp_path):
    """A file registered by the writer but never handed to its cleanup (the signal landed right after
    its creation) is removed by the exit path; a file that existed before is never touched."""
    out = _run(tmp_path, """
        from returnn.datasets import hdf_write
        mine = os.path.join(sys.argv[1], ".mine.tmp")
        hdf_write.OutputSink(mine)  # created; the object is lost as when a signal lands before the assignment
        theirs = os.path.join(sys.argv[1], ".theirs.tmp")
        open(theirs, "w").close()
        try:
            hdf_write.OutputSink(theirs)
        except OSError:
            pass
        removed = hdf_write.discard_unfinished_outputs()
        print([os.path.basename(p) for p in removed], sorted(os.listdir(sys.argv[1])))
    """)
    assert out == "['.mine.tmp'] ['.theirs.tmp', 'case.py']", out
