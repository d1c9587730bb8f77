"""RETURNN's side of the config mode of the differential check (:mod:`returnn_fuzz_configs`), run in RETURNN's
venv: the config loaded by RETURNN's own loader, its net built for training as RETURNN's engine builds it, run on
the drawn inputs with random parameters, written as an npz for this engine's side to compare with."""
from __future__ import annotations

import json
import sys
import zlib
from typing import Any, Dict, List

import numpy as np

from returnn_fuzz_configs import (GOLDENS, _first_line, array_axes, captured_guard_lines, compared, describe_extern,
                                  draw_inputs, enter_site, net_dict_of, prepare_config)


def _old_dim_api() -> None:
    """RETURNN's Dim before 2023 (``DimensionTag(kind=..., description=...)``, the dimension optional),
    which the configs of that time call and this engine accepts: today's RETURNN requires the
    dimension (TypeError), so without it the config's dims would fail in RETURNN alone."""
    from returnn.tensor import Dim
    init = Dim.__init__
    if getattr(init, "old_api", False):
        return

    def old_init(self: Any, dimension: Any = None, *args: Any, **kwargs: Any) -> None:
        init(self, dimension, *args, **kwargs)

    old_init.old_api = True  # type: ignore[attr-defined]
    Dim.__init__ = old_init


def _tf1_names() -> None:
    """TensorFlow 1 names config code of that time calls (``tf.random_uniform``, ``tf.log``, ...),
    added to the tensorflow module and its submodules where TensorFlow 2 lacks them (this engine gives
    config code such a view deliberately, :mod:`returnn.tf.compat`); RETURNN's own code uses TF2 names."""
    import types
    import tensorflow as tf
    v1 = tf.compat.v1
    for name in dir(v1):
        if name.startswith("_"):
            continue
        old, new = getattr(v1, name, None), getattr(tf, name, None)
        if new is None:
            setattr(tf, name, old)
        elif isinstance(old, types.ModuleType) and isinstance(new, types.ModuleType) and name != "compat":
            for sub in dir(old):
                if not sub.startswith("_") and not hasattr(new, sub):
                    setattr(new, sub, getattr(old, sub))


def run_returnn_side(case: Dict[str, Any], out_path: str, mode: str) -> Dict[str, Any]:
    """Builds and runs the case in RETURNN (``mode``: train or eval), in one graph (the config's Dims
    take the sizes of this graph's extern data); writes ``out_path`` (npz); returns the result record
    (``random``: the output differs between two runs in training)."""
    sys.path.insert(0, GOLDENS)
    import make_goldens
    make_goldens._check_real_returnn()  # noqa: SLF001
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    enter_site(case)
    _old_dim_api()
    _tf1_names()
    guarded: List[str] = []
    with captured_guard_lines(guarded):
        import returnn.__main__ as rnn_main
        rnn_main.init_config(command_line_options=list(case["argv"]), extra_updates={"task": "train"})
        config = rnn_main.config
        from returnn.util.basic import BackendEngine
        BackendEngine.select_engine(default_fallback_engine=BackendEngine.TensorFlowNetDict, config=config)
        prepare_config(config)
        net_dict = net_dict_of(config)
    from returnn.tf.network import ExternData, TFNetwork
    tf.compat.v1.set_random_seed(1)
    extern = ExternData()
    extern.init_from_config(config=config, auto_create_placeholders=True)
    desc = describe_extern(extern.data)
    record: Dict[str, Any] = {"guarded": guarded, "extern": desc}
    layer_name = compared(net_dict)
    record["layer"] = layer_name
    if layer_name is None or (net_dict.get(layer_name.split("/")[0]) or {"only_on_search": 1}).get("only_on_search"):
        return dict(record, not_comparable="no layer %r built in training" % layer_name)
    if any("B" not in d["dims"] for d in desc.values()):
        return dict(record, not_comparable="extern data without a batch axis")
    arrays, lens = draw_inputs(case, desc)
    train = mode == "train"
    fed = dict(extern.data)  # before layers register their outputs as extern data under the same keys
    net = TFNetwork(name="", config=config, extern_data=extern, rnd_seed=1, train_flag=train, eval_flag=True,
                    search_flag=False)
    net.construct_from_dict(net_dict)
    if train and config.list("search_train_network_layers"):
        net.construct_extra_net(net_dict, layer_list=config.list("search_train_network_layers"), search_flag=True,
                                dep_layers_in_extra=True, net_name="search train extra net")
    params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
    layer = net.get_layer(layer_name)
    out = layer.output.copy_as_batch_major() if layer.output.have_batch_axis() else layer.output
    dyn_axes = [i for i, tag in enumerate(out.dim_tags) if i != out.batch_dim_axis and tag.dimension is None]
    fetch = {"out": out.placeholder}
    fetch.update({"size%i" % i: out.get_dynamic_size(i) for i in dyn_axes})
    rng = np.random.RandomState(zlib.crc32(("%s/params" % case["name"]).encode()) & 0x7FFFFFFF)
    values = {}
    for p in params:  # make_goldens' values, scaled by fan-in (the published kind's rule)
        shape = p.shape.as_list()
        v = rng.normal(size=shape) * 0.5
        if len(shape) >= 2:
            v *= 2.0 / np.sqrt(float(np.prod(shape[:-1])))
        if p.name.split(":")[0].endswith("variance"):
            v = np.abs(v) + 0.5
        values[p.name.split(":")[0]] = v.astype(p.dtype.base_dtype.as_numpy_dtype)
    feed = {}
    for key, d in desc.items():
        data = fed[key]
        axes = array_axes(d)
        feed[data.placeholder] = arrays[key].transpose([axes.index(i) for i in range(len(axes))])
        for axis, dim in enumerate(d["dims"]):
            if isinstance(dim, str) and dim != "B":
                feed[data.get_dynamic_size(axis)] = np.array(lens[dim], np.int32)
    sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                        device_count={"GPU": 0})
    with tf.compat.v1.Session(config=sess_cfg) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(tf.compat.v1.variables_initializer(tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.GLOBAL_STEP)))  # step 0 (read by SpecAugment schedules)
        runs = []
        for _ in range(2 if train else 1):
            for p in params:
                p.load(values[p.name.split(":")[0]], sess)
            try:
                runs.append(sess.run(fetch, feed_dict=feed))
            except tf.errors.OpError as exc:
                if not train:
                    raise
                return dict(record, random=True, train_error=_first_line(exc))  # (TF1 config code in training)
    if train and not all(np.array_equal(runs[0][k], runs[1][k], equal_nan=True) for k in runs[0]):
        return dict(record, random=True)
    res = runs[0]
    meta = dict(record, mode=mode, lens=lens, params=[p.name.split(":")[0] for p in params],
                param_shapes={p.name.split(":")[0]: p.shape.as_list() for p in params},
                out_dims=make_goldens._dims_desc(out), dynamic_axes=dyn_axes,  # noqa: SLF001
                out_dtype=str(res["out"].dtype))
    npz = {"meta": np.array(json.dumps(meta)), "out": res["out"]}
    npz.update({"in:" + k: v for k, v in arrays.items()})
    npz.update({"param:" + k: v for k, v in values.items()})
    npz.update({"out_size:%i" % i: np.asarray(res["size%i" % i]).astype(np.int32) for i in dyn_axes})
    make_goldens.write_npz(out_path, npz)
    return dict(record, mode=mode, out_dims=meta["out_dims"], out_shape=list(res["out"].shape))
