"""Our engine against the real RETURNN: each ``tests/data/returnn_goldens/<case>.npz`` holds a small
network, its inputs, its parameters by RETURNN's names and the output RETURNN computed (written by
``tests/returnn_goldens/make_goldens.py``, which runs the PyPI RETURNN; its docstring describes the
file format and how to regenerate). Here the same net dict is built with our engine, the parameters
are set by RETURNN's names (:mod:`returnn.tf.returnn_params`), the forward pass runs in evaluation
mode, and the output must match RETURNN's on the real (non-padded) positions within 1e-5.
"""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.extern_data import extern_data_from_config
from returnn.tf.layers import RunContext
from returnn.tensor import Dim, batch_dim
from returnn.tf.network import TFNetwork

_spec = importlib.util.spec_from_file_location(
    "golden_dims", Path(__file__).resolve().parent / "returnn_goldens" / "golden_dims.py")
golden_dims = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden_dims)

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "returnn_goldens"
FILES = sorted(GOLDEN_DIR.glob("*.npz"))
META_KEYS = {"case", "family", "network", "extern_data", "config", "output_layer", "train_flag", "returnn_version",
             "tf_version", "params", "out_dims", "time_axis"}
ATOL = RTOL = 1e-5


def load_case(path: Path):
    """(meta, {array name: array}) of one golden file."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(str(arrays.pop("meta"))), arrays


@contextlib.contextmanager
def case_config(meta):
    """The case's config keys (e.g. ``behavior_version``) as the global config, restored after."""
    old = get_global_config()
    set_global_config(Config(copy.deepcopy(meta["config"])))
    try:
        yield
    finally:
        set_global_config(old)


def build_network(meta) -> TFNetwork:
    """Our network of the case; Dim markers (tests/returnn_goldens/golden_dims.py) as our Dims."""
    kinds = {"spatial": Dim.Types.Spatial, "feature": Dim.Types.Feature, "unspecified": Dim.Types.Unspecified}
    resolve = golden_dims.make_resolver(lambda name, n, kind: Dim(n, kind=kinds[kind], description=name), batch_dim,
                                        meta["extern_data"], meta["network"])
    extern = extern_data_from_config(Config({"extern_data": resolve(copy.deepcopy(meta["extern_data"]))}))
    # RETURNN's flags of make_goldens' TFNetwork(train_flag=...): eval_flag as train_flag (RETURNN sets it then)
    train = bool(meta.get("train_flag"))
    return TFNetwork(resolve(copy.deepcopy(meta["network"])), extern, eval_flag=train, train_flag=train)


def dims_desc(data) -> list:
    """Axis roles like make_goldens.py writes them: B, T, F, S(n)."""
    parts = []
    for i, dim in enumerate(data.dims):
        if i == data.batch_dim_axis:
            parts.append("B")
        elif i == data.time_dim_axis:
            parts.append("T")
        elif i == data.feature_dim_axis:
            parts.append("F" if dim.dimension is not None else "F?")
        else:
            parts.append("S(%s)" % (dim.dimension if dim.dimension is not None else "dyn"))
    return parts


def run_ours(net: TFNetwork, meta, arrays):
    """Our output (numpy, batch-major, axes ordered as RETURNN's) and {axis: (B,) sizes}."""
    name = meta["output_layer"]
    batch = {}
    for key in meta["extern_data"]:
        data, value = net.extern_data[key], arrays["in:" + key]
        if data.time_dim_axis is None and data.batch_dim_axis is not None and value.ndim == data.batch_ndim:
            value = value[:, None]  # per sequence, fed without time axis: as datasets deliver it, (B, 1, ...)
        batch[key] = tf.cast(value, data.dtype)  # RETURNN's feed converts too (bool masks)
        lens = arrays.get("len:" + key)
        batch[key + ":seq_len"] = tf.constant(lens if lens is not None and np.ndim(lens) == 1 else
                                              np.ones([value.shape[0]], np.int32))
    out = net.forward(batch, RunContext(bool(meta.get("train_flag"))), only=[name])[name]
    value, sizes, _ = in_returnn_order(out, meta["out_dims"])
    if out.data.batch_dim_axis is None:  # a batch-less axis with per-sequence sizes: the longest, as RETURNN's
        sizes = {axis: v.max(initial=0) if v is not None and v.ndim == 1 else v for axis, v in sizes.items()}
    return value, sizes, ",".join(dims_desc(out.data))


def in_returnn_order(out, out_dims: str):
    """(value (numpy), {new axis: sizes or None} of its dynamic axes, the axes' roles in that order) of the
    layer output ``out``: batch first (a batch-less output keeps its order), then the other axes; RETURNN's
    order ``out_dims`` (comma-separated roles) when the roles are the same in another order."""
    data = out.data
    b = data.batch_dim_axis  # none: a batch-less output (e.g. boolean_mask over the batch), axes as they are
    perm = ([] if b is None else [b]) + [i for i in range(data.batch_ndim) if i != b]
    roles = dims_desc(data)
    ours, gold = [roles[i] for i in perm], out_dims.split(",")
    if ours != gold and sorted(ours) == sorted(gold) and len(set(gold)) == len(gold):
        perm = [perm[ours.index(d)] for d in gold]  # same roles, other order: RETURNN's order
    value = tf.transpose(out.tensor, perm).numpy() if out.tensor.shape.rank else out.tensor.numpy()
    sizes = {}
    for new_axis, axis in enumerate(perm):
        if data.dims[axis].is_dynamic():
            size = out.size(axis)
            sizes[new_axis] = None if size is None else np.asarray(size)
    return value, sizes, ",".join(roles[i] for i in perm)


def real_mask(shape, sizes):
    mask = np.ones(shape, bool)
    for axis, size in sizes.items():
        bc = [1] * len(shape)
        bc[axis] = shape[axis]
        if np.ndim(size):  # per sequence
            bc[0] = shape[0]
            mask &= (np.arange(shape[axis])[None, :] < size[:, None]).reshape(bc)
        else:  # one size for the whole batch
            mask &= (np.arange(shape[axis]) < size).reshape(bc)
    return mask


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_golden_file_format(path):
    """Each file has what the consumer reads (cheap; independent of our engine)."""
    meta, arrays = load_case(path)
    assert META_KEYS <= set(meta), sorted(META_KEYS - set(meta))
    assert meta["case"] == path.stem and meta["train_flag"] in (False, True)
    for key in meta["extern_data"]:
        assert arrays["in:" + key].shape[0] == arrays["len:" + key].shape[0] == 3
        assert arrays["len:" + key].dtype == np.int32
    assert sorted(k[len("param:"):] for k in arrays if k.startswith("param:")) == sorted(meta["params"])
    assert "global_step" not in meta["params"]
    assert "out" in arrays and len(meta["out_dims"].split(",")) == arrays["out"].ndim
    if meta["time_axis"] is not None:
        assert arrays["out_len"].shape in ((arrays["out"].shape[0],), ())


def test_golden_files_present():
    assert len(FILES) >= 40, "expected the golden files in %s (run tests/returnn_goldens/make_goldens.py)" % GOLDEN_DIR


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_same_output_as_returnn(path):
    meta, ours, gold, where = real_outputs(path)
    if gold.dtype.kind in "iub":
        np.testing.assert_array_equal(ours, gold, err_msg=where)
    else:
        np.testing.assert_allclose(ours, gold, rtol=RTOL, atol=ATOL, err_msg=where)


def real_outputs(path):
    """(meta, our values, RETURNN's values, description) of a case on the real positions, after
    checking parameter names, shapes and sizes (benchmarks/returnn_goldens_report.py uses it too)."""
    from returnn.tf.returnn_params import returnn_param_shapes, set_returnn_param_values

    meta, arrays = load_case(path)
    with case_config(meta):
        net = build_network(meta)
        # RETURNN's saveable parameters (make_goldens: get_saveable_params_list); a saveable False variable
        # starts from its init on both sides
        shapes = {k: tuple(v) for k, v in returnn_param_shapes(net, saveable_only=True).items()}
        # RETURNN lists its random generator's state (param_variational_noise) as saveable in any network; this
        # engine's checkpoint holds it in training networks only (returnn/tf/checkpoint.py): no parameter
        expected = [k for k in meta["params"] if k != "global_random_generator/random_generator/StateVar" or k in shapes]
        assert sorted(shapes) == sorted(expected), "parameter names differ from RETURNN's: missing %s, extra %s" % (
            sorted(set(expected) - set(shapes)), sorted(set(shapes) - set(expected)))
        if "param_shapes" in meta:
            gold_shapes = {k: tuple(v) for k, v in meta["param_shapes"].items() if k in expected}
            assert shapes == gold_shapes, "parameter shapes differ from RETURNN's: %s" % {
                k: (shapes[k], gold_shapes[k]) for k in shapes if shapes[k] != gold_shapes[k]}
        set_returnn_param_values(net, {name: arrays["param:" + name] for name in expected})
        value, sizes, our_desc = run_ours(net, meta, arrays)
    gold = arrays["out"]
    where = "%s (RETURNN out %s %s, ours %s %s)" % (meta["case"], meta["out_dims"], gold.shape, our_desc, value.shape)
    assert value.ndim == gold.ndim, where
    gold_sizes = {int(k[len("out_size:"):]): v for k, v in arrays.items() if k.startswith("out_size:")}
    if meta["time_axis"] is not None:
        gold_sizes.setdefault(meta["time_axis"], arrays["out_len"])
    # the padded shape too (a layer reading the padding, e.g. after a search, sees its length), but where RETURNN's
    # value stops short of its own sizes (fold with a stride)
    short = {a for a, size in gold_sizes.items() if gold.shape[a] < int(size.max(initial=0))}
    assert [n for a, n in enumerate(value.shape) if a not in short] == \
        [n for a, n in enumerate(gold.shape) if a not in short], "%s: padded shapes differ" % where
    for axis, size in gold_sizes.items():
        ours = sizes.get(axis)
        assert ours is not None, "%s: axis %i has sizes in RETURNN %s, none here" % (where, axis, size.tolist())
        np.testing.assert_array_equal(ours, size, err_msg="%s: sizes of axis %i" % (where, axis))
        n = int(size.max(initial=0))
        # (a value shorter than its sizes, reinterpret_data's size_base of a longer base: as long as RETURNN's)
        assert value.shape[axis] >= min(n, gold.shape[axis]), "%s: axis %i shorter than its sizes" % (where, axis)
        # RETURNN's value can stop short of its own sizes (fold with a stride: the frames no window covers): the
        # frames it has are compared
        n = min(n, gold.shape[axis])
        value, gold = value.take(range(n), axis=axis), gold.take(range(n), axis=axis)
    assert value.shape == gold.shape, where
    mask = real_mask(gold.shape, gold_sizes)
    return meta, value[mask], gold[mask], where
