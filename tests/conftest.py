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
    if config.pluginmanager.hasplugin("xdist") and not config.pluginmanager.has_plugin("returnn-file-groups"):
        config.pluginmanager.register(_FileGroups(), "returnn-file-groups")
    config.addinivalue_line("markers", "multinode: jobs across simulated nodes (network namespaces); slow, "
                                       "deselect with -m 'not multinode'")
    config.addinivalue_line("markers", "returnn_interop: model files moving between the real RETURNN (its own "
                                       "venv, RETURNN_VENV) and this engine; run alone: "
                                       "pytest tests/test_returnn_checkpoints.py")


# ---------------------------------------------------------------- parallel runs (pytest-xdist)
# `make test` runs the suite on several workers (`-n N --dist loadgroup`). Tests are independent
# unless they share an expensive module fixture or a resource; those files form a group that runs on
# one worker, one test after another (the timing-sensitive MPI groups also exclude other MPI jobs:
# EXCLUSIVE_MPI_GROUPS). No test uses a fixed port (MPI and Horovod pick free ones); temporary files
# are per test (tmp_path); mpirun jobs, signals and process lookups go by pid; network namespaces
# carry the creating pid in their names.
#
# The groups are decided by file here, and the scheduler below applies them: pytest-xdist's own
# xdist_group marks work by rewriting node ids, which pytest 9 no longer allows.
import contextlib  # noqa: E402
import fcntl  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Dict, Optional  # noqa: E402

import pytest  # noqa: E402

GROUP_BY_FILE = {
    # MPI jobs whose tests measure timeouts of a few seconds: 2-rank jobs that assert on stall
    # timeouts (horovod_stall_timeout 6 in test_stall_phases) and on how fast a failing rank ends the
    # job; simulated nodes (network namespaces, 2 nodes x 2 ranks) with lost-node timeouts
    "test_stall_phases.py": "mpi-timing",
    "test_distributed_faults.py": "mpi-timing",
    "test_multinode.py": "mpi-timing",
    # the real RETURNN in its own venv ("run alone", see the returnn_interop marker)
    "test_returnn_checkpoints.py": "returnn-interop",
    "test_returnn_checkpoint_units.py": "returnn-interop",
}
# Groups whose tests measure timeouts of a few seconds between ranks: while one of them runs, no other
# worker runs a test that starts MPI jobs (a file lock: these tests hold it exclusively, tests in files
# that start mpirun hold it shared). Tests without MPI still run beside them: under xdist the other
# tests that start MPI jobs come last in the collection, so the other workers take the tests without
# MPI while the (largest, so first scheduled) timing group runs.
EXCLUSIVE_MPI_GROUPS = ("mpi-timing",)
_STARTS_MPI = re.compile(r"mpirun|MpiRun|MPIRUN|mpi_probe|launch-mpirun|launch-sge|run-horovod-demo")
_SHARED_FIXTURE = re.compile(r"""scope=["'](module|class|package|session)["']""")
_file_facts: Dict[str, tuple] = {}


def _facts(path: str) -> tuple:
    """(starts MPI jobs, has a fixture shared by several tests) of the test file ``path``."""
    if path not in _file_facts:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        _file_facts[path] = (bool(_STARTS_MPI.search(text)), bool(_SHARED_FIXTURE.search(text)))
    return _file_facts[path]


def group_of_file(path: str) -> Optional[str]:
    """The group of the tests in the test file ``path`` (None: each test on any worker, any time).
    A file with a module/class/session fixture (a trained model, written files) is one group, so
    the fixture is made once."""
    name = os.path.basename(path)
    if name in GROUP_BY_FILE:
        return GROUP_BY_FILE[name]
    if _facts(path)[1]:
        return "file:" + name
    return None


class _FileGroups:
    """pytest-xdist's --dist loadgroup with the groups of :func:`group_of_file` (and xdist's own node-id
    groups); registered only when pytest-xdist is active (its hook is unknown otherwise)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling
        root = str(config.rootpath)

        class FileGroupScheduling(LoadGroupScheduling):
            def _split_scope(self, nodeid: str) -> str:
                if "@" in nodeid:  # an xdist_group mark (pytest < 9)
                    return nodeid.rsplit("@", 1)[-1]
                return group_of_file(os.path.join(root, nodeid.split("::", 1)[0])) or nodeid

        return FileGroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each test's MPI lock mode (exclusive in EXCLUSIVE_MPI_GROUPS, shared in files that start mpirun);
    under xdist, the ungrouped tests that start MPI jobs move to the end (same order on every worker)."""
    late = set()
    for item in items:
        path = str(item.fspath)
        group = group_of_file(path)
        if group in EXCLUSIVE_MPI_GROUPS:
            item.returnn_mpi_lock = fcntl.LOCK_EX
        elif _facts(path)[0]:
            item.returnn_mpi_lock = fcntl.LOCK_SH
            if group is None:
                late.add(id(item))
    if os.environ.get("PYTEST_XDIST_WORKER") and late:
        items[:] = [i for i in items if id(i) not in late] + [i for i in items if id(i) in late]


@pytest.fixture(autouse=True)
def _restore_global_config():
    """The process's global config (its behavior_version, ...) as each test found it: a test that loads a config
    file (load_config_from_args sets it) must not change the tests after it on the same worker."""
    from returnn import config as config_module
    saved = config_module._global_config
    yield
    config_module._global_config = saved


@pytest.fixture(autouse=True)
def _mpi_timing_lock(request):
    """Under pytest-xdist: the lock of :data:`EXCLUSIVE_MPI_GROUPS` (one per test run, in the temp dir)."""
    mode = getattr(request.node, "returnn_mpi_lock", None)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if mode is None or not run_id or not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    path = os.path.join(tempfile.gettempdir(), "returnn-tests-mpi-%s.lock" % run_id)
    with open(path, "a") as f, contextlib.ExitStack() as stack:
        fcntl.flock(f, mode)
        stack.callback(fcntl.flock, f, fcntl.LOCK_UN)
        yield
    if mode == fcntl.LOCK_EX:  # let a waiting worker in before this one takes the lock for its next test
        time.sleep(0.3)
