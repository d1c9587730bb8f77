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


# ---------------------------------------------------------------- parallel runs (pytest-xdist)
# `make test` runs the suite on several workers (`-n N --dist loadgroup`). Tests are independent
# unless they share an expensive module fixture or a resource; those carry an ``xdist_group`` and
# run on one worker, one after another. No test uses a fixed port (MPI and Horovod pick free ones);
# temporary files are per test (tmp_path); mpirun jobs, signals and process lookups go by pid.
GROUP_BY_FILE = {
    # 2-rank jobs that assert on stall timeouts of a few seconds (horovod_stall_timeout 6 in
    # test_stall_phases): two of them at once on a 2-core machine would compete for the cores the
    # timing claims are about, so they run one at a time (other tests run beside them).
    "test_stall_phases.py": "mpi-stall",
    "test_distributed_faults.py": "mpi-stall",
    # the real RETURNN in its own venv ("run alone", see the returnn_interop marker)
    "test_returnn_checkpoints.py": "returnn-interop",
}


def _module_fixture_scope(item) -> bool:
    """Whether ``item`` uses a module- or class-scoped fixture defined in its own test module (a
    trained model, written files): the module's tests then share one worker, so it is made once."""
    info = getattr(item, "_fixtureinfo", None)
    module = getattr(getattr(item, "module", None), "__name__", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        fixture = defs[-1]
        if fixture.scope in ("module", "class", "package") and getattr(fixture.func, "__module__", None) == module:
            return True
    return False


def xdist_group_of(item) -> "str | None":
    """The one group of ``item`` under --dist loadgroup (None: any worker, any time)."""
    import os.path
    if item.get_closest_marker("multinode") is not None:
        # simulated nodes: network namespaces (named by pid, so safe), 2 nodes x 2 ranks each, lost-node
        # timeouts; one job at a time keeps the machine's cores for the timing they measure
        return "netns"
    name = os.path.basename(str(item.fspath))
    if name in GROUP_BY_FILE:
        return GROUP_BY_FILE[name]
    if _module_fixture_scope(item):
        return "module:" + name
    return None


import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks each test with its xdist group (before pytest-xdist reads the marks)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = xdist_group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
