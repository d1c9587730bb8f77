"""The literal network dicts of RETURNN's own TF tests (tests/data/returnn_test_nets.json, made by
tests/returnn_nets/run_returnn.py with the real RETURNN): this engine builds at least as many of the
nets RETURNN builds as it did when the floor was set, and where both build, the parameter counts
agree (per net; ids are the RETURNN test functions, ``@bv0`` for RETURNN's build at behavior
version 0). A net this engine does not build is skipped here and counted by the floor test;
``benchmarks/returnn_test_nets.py`` prints the reasons and the differing parameters."""
from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any, Dict

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "returnn_test_nets.json")

# Nets both engines build, per RETURNN build ("returnn": the behavior version RETURNN's tests run
# with; "returnn_bv0": behavior version 0), measured when set. Raise them when the engine builds more.
BUILT_FLOOR = {"returnn": 152, "returnn_bv0": 153}


def _bench():
    spec = importlib.util.spec_from_file_location(
        "returnn_test_nets_bench", os.path.join(os.path.dirname(HERE), "benchmarks", "returnn_test_nets.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
NETS = BENCH.load(DATA)["nets"]


@functools.lru_cache(maxsize=None)
def _shapes_fn():
    return BENCH.param_shapes_function()[0]


@functools.lru_cache(maxsize=None)
def _ours(net_id: str, run: str) -> Dict[str, Any]:
    entry = next(n for n in NETS if n["id"] == net_id)
    return BENCH.build_ours(entry, _shapes_fn(), run)


def _cases():
    for run in BENCH.RUNS:
        for n in NETS:
            if n[run]["built"]:
                yield pytest.param(n["id"], run, id=n["id"] + ("" if run == "returnn" else "@bv0"))


@pytest.mark.parametrize("net_id,run", list(_cases()))
def test_param_count_agrees(net_id, run):
    entry = next(n for n in NETS if n["id"] == net_id)
    ours = _ours(net_id, run)
    if not ours["built"]:
        pytest.skip("this engine does not build it (see test_builds_at_least_floor): %s" % ours["error"])
    theirs = entry[run]
    diff = BENCH.param_diff(ours["params"], theirs["params"])
    assert ours["num_params"] == theirs["num_params"], "%s (%s:%d): RETURNN %d parameters, ours %d; %s" % (
        net_id, entry["file"], entry["line"], theirs["num_params"], ours["num_params"], "; ".join(diff))


@pytest.mark.parametrize("run", list(BENCH.RUNS))
def test_builds_at_least_floor(run):
    both = [n["id"] for n in NETS if n[run]["built"] and _ours(n["id"], run)["built"]]
    returnn_built = sum(1 for n in NETS if n[run]["built"])
    assert len(both) >= BUILT_FLOOR[run], "this engine builds %d of the %d nets RETURNN builds (%s), floor %d" % (
        len(both), returnn_built, run, BUILT_FLOOR[run])
