"""Golden values from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode): one small
network per layer family/variant, its inputs, its parameters (set to fixed random values, never
RETURNN's initialisation) and the output RETURNN computes. ``tests/test_returnn_goldens.py`` builds
the same network with this repository's engine, loads the parameters by RETURNN's names and
compares.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package;
``DISABLE_CUDA=1`` makes RETURNN compile its native LSTM ops for the CPU)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_goldens.py [--only CASE ...] [--list]

Writes ``tests/data/returnn_goldens/<case>.npz`` (``--out DIR`` elsewhere). More cases live in
``cases_<area>.py`` beside this file (``from make_goldens import case, ...``; loaded by ``main``). Options
that take Dim objects are written as markers (``golden_dims.py``), resolved on each side. The output is
deterministic: fixed numpy seeds per case, one TF thread, zip members with a fixed date.

Each ``.npz`` holds
  ``meta``          0-d unicode string, JSON: case, family, network (the net dict exactly as given to
                    RETURNN, after a JSON round trip), extern_data, config (other config keys, e.g.
                    behavior_version), output_layer, train_flag (the case's ``train``), returnn_version, tf_version,
                    params (RETURNN names without ":0", in get_saveable_params_list order, without
                    global_step), param_shapes, out_dims ("B,T,F"-like), time_axis (of "out", or null),
                    dynamic_axes (axes of "out" with per-sequence sizes), input_padding ("garbage"
                    or "zeros", see below), zero_length, notes;
  ``in:KEY``        batch-major padded input of each data key (float32, or int32 class indices), axes
                    as batch, time, then the others in the declared order (RETURNN is fed it
                    transposed to the layout the extern data declares, e.g. time-major);
  ``len:KEY``       int32 (B,) sequence lengths of KEY;
  ``param:NAME``    the value of each parameter;
  ``out``           the output layer's value, batch-major (float32, or the layer's int dtype);
  ``out_len``       int32 (B,) sizes of out's time axis (when it has a dynamic one);
  ``out_size:I``    int32 (B,) sizes of each dynamic axis I of out;
  ``scores``        of a ``search`` case (``meta["search_flag"]``): the output's beam scores, float32
                    (B, beam) (a ``decide``'s: (B, 1), the score of the hypothesis it chose).
(The output's batch may differ from the inputs' when a layer changes it, e.g. ``segment_input``:
then the sizes are per output batch entry; a dim with one size for the whole batch, e.g.
``boolean_mask``'s, has a 0-d size.)

Padding: inputs are padded with large random garbage so that an engine that does not mask fails.
The generator runs each case with two different garbage paddings and with zero padding; when
RETURNN's own real frames (or a search's scores) differ (RETURNN does not mask there, e.g.
``conv``/``pool`` without ``use_time_mask``; two garbage paddings alone can agree where a
``tanh`` saturates them), the
case is stored with zero padding (what RETURNN's datasets feed) and ``input_padding: "zeros"``.
Padded positions of ``out`` hold whatever RETURNN left there: compare real positions only.

Left out because RETURNN itself fails on them: ``rec`` unit ``nativelstm2`` with ``unit_opts``
``forget_bias`` (RETURNN: set it via the parameter init), ``rnn_cell`` unit ``NativeLSTM2`` in a
rec unit (AssertionError), ``rec`` unit ``rnn`` (NotImplementedError), ``pool`` mode ``avg`` with
``use_time_mask`` (dtype error in RETURNN's masking).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_goldens")
B = 3


def _check_real_returnn():
    """Exits with one line when ``import returnn`` is this repository's package."""
    import returnn
    path = os.path.realpath(getattr(returnn, "__file__", None) or "")
    if not path or path.startswith(os.path.realpath(os.path.join(REPO, "returnn")) + os.sep):
        sys.exit("make_goldens.py: 'import returnn' gives this repository's package (%s), not the PyPI RETURNN; "
                 "run it with the RETURNN venv from a directory outside the repository (see the docstring)" % path)


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------

CASES = {}

X5 = {"data": {"dim": 5}}
X6 = {"data": {"dim": 6}}
X4 = {"data": {"dim": 4}}
SPARSE7 = {"data": {"dim": 7, "sparse": True}}
X5_CLASSES6 = {"data": {"dim": 5}, "classes": {"dim": 6, "sparse": True, "available_for_inference": True}}
LENS = [7, 4, 1]
LENS_ZERO = [5, 3, 0]
LENS_LONG = [7, 5, 3]


def case(name, family, network, extern=None, config=None, output="output", lens=None, notes="", train=False,
         search=False, param_scale=None):
    """Registers a case; ``lens``: {data key: lengths} (default: data [7, 4, 1]); ``train``: the
    network is built for training (batch_norm's batch statistics; no case with dropout); ``search``:
    built with RETURNN's search flag (beam search; the output's beam scores are stored too);
    ``param_scale`` "fan_in": weights scaled by 2/sqrt(fan-in) (big nets; else N(0, 0.5) each)."""
    assert name not in CASES, name
    extern = extern or X5
    lens = dict(lens or {})
    for key in extern:
        lens.setdefault(key, LENS)
    CASES[name] = dict(name=name, family=family, network=network, extern=extern, config=config or {},
                       output=output, lens=lens, notes=notes, train=bool(train), search=bool(search),
                       **({"param_scale": param_scale} if param_scale else {}))


def _lin(n, src="data", act=None, bias=True):
    return {"class": "linear", "activation": act, "with_bias": bias, "n_out": n, "from": src}


def _load_more_cases():
    """Cases of other layer families live in ``cases_*.py`` beside this file: each imports
    ``case`` (and helpers) from this module and registers its cases when imported."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    sys.modules.setdefault("make_goldens", sys.modules[__name__])
    for fn in sorted(os.listdir(here)):
        if fn.startswith("cases_") and fn.endswith(".py"):
            spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(here, fn))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)


# --------------------------------------------------------------------------------------------------
# Running one case in RETURNN
# --------------------------------------------------------------------------------------------------

def _seed(name, salt):
    return zlib.crc32(("%s/%s" % (name, salt)).encode()) & 0x7FFFFFFF


def _inputs(c, extern, padding):
    """{key: (array, lens)}; padding: 'garbage:N' (random large values) or 'zeros'."""
    import numpy as np
    out = {}
    for i, key in enumerate(sorted(c["extern"])):
        data = extern.data[key]
        lens = np.array(c["lens"][key], np.int32)
        if data.time_dim_axis is not None and data.batch_shape[data.time_dim_axis] is not None:
            lens = np.full_like(lens, data.batch_shape[data.time_dim_axis])  # a static time axis: all frames real
        t = int(lens.max())
        order = _batch_array_axes(data)
        shape = [B] + [t if s is None else s for s in (data.batch_shape[i] for i in order[1:])]
        rng = np.random.RandomState(_seed(c["name"], "in:%s" % key))
        if data.sparse:
            real = rng.randint(0, data.dim, size=shape).astype(np.int32)
        else:
            real = rng.normal(size=shape).astype(np.float32)
        if padding == "zeros":
            pad = np.zeros_like(real)
        else:
            prng = np.random.RandomState(_seed(c["name"], "pad:%s:%s" % (key, padding)))
            if data.sparse:
                pad = prng.randint(0, data.dim, size=shape).astype(np.int32)
            else:
                pad = (prng.uniform(200.0, 1000.0, size=shape) * prng.choice([-1.0, 1.0], size=shape)).astype(np.float32)
        if data.time_dim_axis is None:  # per sequence (e.g. a speaker label): no padding, no lengths fed
            out[key] = (real, lens)
            continue
        mask = np.arange(t)[None, :] < lens[:, None]
        mask = mask.reshape(mask.shape + (1,) * (len(shape) - 2))
        out[key] = (np.where(mask, real, pad).astype(real.dtype), lens)
    return out


def _batch_array_axes(data):
    """The axes of ``data`` in the order the batch arrays ``in:KEY`` hold them (the engine's batch
    format, returnn/extern_data.py batch_array_axes): batch, time, then the others as declared;
    RETURNN is fed the array transposed to the declared layout."""
    b, t = data.batch_dim_axis, data.time_dim_axis
    assert b is not None, "golden inputs need a batch axis"
    if t is None:
        assert b == 0, "golden inputs without a time axis must be batch-major"
        return list(range(data.batch_ndim))
    return [b, t] + [i for i in range(data.batch_ndim) if i not in (b, t)]


def _dims_desc(data):
    parts = []
    for i, tag in enumerate(data.dim_tags):
        if i == data.batch_dim_axis:
            parts.append("B")
        elif i == data.time_dim_axis:
            parts.append("T")
        elif i == data.feature_dim_axis:
            parts.append("F" if tag.dimension is not None else "F?")
        else:
            parts.append("S(%s)" % (tag.dimension if tag.dimension is not None else "dyn"))
    return ",".join(parts)


def _real_mask(out, sizes):
    import numpy as np
    mask = np.ones(out.shape, bool)
    for axis, size in sizes.items():
        shape = [1] * out.ndim
        shape[axis] = out.shape[axis]
        if np.ndim(size):  # per sequence
            shape[0] = out.shape[0]
            m = np.arange(out.shape[axis])[None, :] < size[:, None]
        else:  # one size for the whole batch (e.g. boolean_mask's out_dim)
            m = np.arange(out.shape[axis]) < size
        mask &= m.reshape(shape)
    return mask


def _dim_resolver(network, extern_data):
    """Dim markers of the case (golden_dims.py) as RETURNN's Dim objects."""
    from returnn.tensor import Dim, batch_dim
    sys.path.insert(0, HERE)
    from golden_dims import make_resolver
    kinds = {"spatial": Dim.Types.Spatial, "feature": Dim.Types.Feature, "unspecified": Dim.Types.Unspecified}
    return make_resolver(lambda name, n, kind: Dim(n, name=name, kind=kinds[kind]), batch_dim, extern_data, network)


def run_case(c):
    """Builds ``c`` in RETURNN, sets its parameters, runs it; returns the npz dict."""
    import numpy as np
    import tensorflow as tf
    import returnn
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.util import BehaviorVersion

    network = json.loads(json.dumps(c["network"]))
    extern_data = json.loads(json.dumps(c["extern"]))
    resolve = _dim_resolver(network, extern_data)
    config = Config(dict(extern_data=resolve(extern_data), **c["config"]))
    set_global_config(config)
    # as BehaviorVersion.set, with its callbacks (from 16 on: Dim's simple equality), for each case anew
    BehaviorVersion._reset((c["config"].get("behavior_version"), 0))
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(1)
        net = TFNetwork(config=config, train_flag=bool(c.get("train")), search_flag=bool(c.get("search")))
        net.construct_from_dict(resolve(network))
        params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
        layer = net.get_layer(c["output"])
        out = layer.output.copy_as_batch_major() if layer.output.have_batch_axis() else layer.output
        fetch = {"out": out.placeholder}
        choices = layer.get_search_choices() if c.get("search") else None
        if choices is not None and choices.beam_scores is not None:  # e.g. a decide's: (B, 1), the chosen one's
            fetch["scores"] = choices.beam_scores
        dyn_axes = [i for i, tag in enumerate(out.dim_tags) if i != out.batch_dim_axis and tag.dimension is None]
        for i in dyn_axes:
            size = out.get_dynamic_size(i)
            fetch["size%i" % i] = size
        rng = np.random.RandomState(_seed(c["name"], "params"))
        values = {}
        for p in params:
            name = p.name.split(":")[0]
            shape = p.shape.as_list()
            v = rng.normal(size=shape) * 0.5
            if c.get("param_scale") == "fan_in" and len(shape) >= 2:  # big nets: no chaotic recurrences
                v *= 2.0 / np.sqrt(float(np.prod(shape[:-1])))
            if name.endswith("variance"):
                v = np.abs(v) + 0.5
            values[name] = v.astype(p.dtype.base_dtype.as_numpy_dtype)
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            # RETURNN's global_step lives in the GLOBAL_STEP collection only (an eval reading it: CondLayer tests)
            sess.run(tf.compat.v1.variables_initializer(tf.compat.v1.get_collection(
                tf.compat.v1.GraphKeys.GLOBAL_STEP)))

            def run(padding):
                for p in params:  # again before each run: batch_norm may update its statistics in eval
                    p.load(values[p.name.split(":")[0]], sess)
                feeds = _inputs(c, net.extern_data, padding)
                feed_dict = {}
                for key, (arr, lens) in feeds.items():
                    data = net.extern_data.data[key]
                    order = _batch_array_axes(data)
                    feed_dict[data.placeholder] = arr.transpose([order.index(i) for i in range(arr.ndim)])
                    if data.time_dim_axis is not None and data.batch_shape[data.time_dim_axis] is None:
                        feed_dict[data.size_placeholder[data.time_dim_axis_excluding_batch]] = lens
                if net.epoch_step is not None:  # initial_state keep_over_epoch reads it: the epoch's first step
                    feed_dict[net.epoch_step] = 0
                res = sess.run(fetch, feed_dict=feed_dict)
                sizes = {i: np.asarray(res["size%i" % i]) for i in dyn_axes}
                if not out.have_batch_axis():  # a batch-less axis with per-sequence sizes: as long as the longest
                    sizes = {i: v.max(initial=0) if v.ndim == 1 else v for i, v in sizes.items()}
                scores.clear()  # those of the stored inputs (the first or the zero-padded run)
                scores.update({"scores": res["scores"]} if "scores" in res else {})
                return feeds, res["out"], sizes

            scores = {}
            feeds, y, sizes = run("garbage:1")
            kept_scores = dict(scores)
            for i in dyn_axes:  # per sequence of the output's batch (layers may change it), or one scalar
                assert sizes[i].shape in (((y.shape[0],), ()) if out.have_batch_axis() else ((),)), (
                    "%s: size of axis %i has shape %s" % (c["name"], i, sizes[i].shape))
            mask = _real_mask(y, sizes)
            same = True
            # two garbage paddings can agree where the padding saturates (e.g. tanh of large values), so the
            # zero padding RETURNN's datasets feed is compared as well
            for other in ("garbage:2", "zeros"):
                _, y2, sizes2 = run(other)
                same = same and all((sizes[i] == sizes2[i]).all() for i in dyn_axes) and np.allclose(
                    np.where(mask, y, 0), np.where(mask, y2, 0), rtol=0, atol=1e-6, equal_nan=True) and all(
                    np.allclose(kept_scores[k], scores[k], rtol=0, atol=1e-6) for k in scores)  # a search reading padding
            scores = kept_scores
            padding = "garbage"
            if not same:
                padding = "zeros"
                feeds, y, sizes = run("zeros")
            if y.dtype.kind == "f" and not np.isfinite(y[_real_mask(y, sizes)]).all():
                raise RuntimeError("%s: non-finite output on real frames" % c["name"])
    meta = {
        "case": c["name"], "family": c["family"], "network": network, "extern_data": extern_data,
        "config": c["config"], "output_layer": c["output"], "train_flag": bool(c.get("train")),
        "search_flag": bool(c.get("search")),
        "returnn_version": returnn.__long_version__ if hasattr(returnn, "__long_version__") else returnn.__version__,
        "tf_version": tf.__version__,
        "params": [p.name.split(":")[0] for p in params],
        "param_shapes": {p.name.split(":")[0]: p.shape.as_list() for p in params},
        "out_dims": _dims_desc(out), "time_axis": out.time_dim_axis if out.time_dim_axis in dyn_axes else None,
        "dynamic_axes": dyn_axes, "out_dtype": str(y.dtype), "input_padding": padding,
        "zero_length": any(0 in c["lens"][k] for k in feeds),
        "notes": c["notes"] + ("" if padding == "garbage" else
                               (" | " if c["notes"] else "") + "RETURNN's real frames depend on the padded input "
                               "values here (no masking): stored with zero padding"),
    }
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for key, (arr, lens) in sorted(feeds.items()):
        arrays["in:" + key] = arr
        arrays["len:" + key] = lens.astype(np.int32)
    for name in meta["params"]:
        arrays["param:" + name] = values[name]
    arrays["out"] = y
    arrays.update(scores)
    if meta["time_axis"] is not None:
        arrays["out_len"] = sizes[meta["time_axis"]].astype(np.int32)
    for i in dyn_axes:
        arrays["out_size:%i" % i] = sizes[i].astype(np.int32)
    return arrays


def write_npz(path, arrays):
    """Like np.savez_compressed, but byte-for-byte reproducible (fixed zip member dates)."""
    import numpy as np
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    os.replace(tmp, path)


def main(argv=None):
    # RETURNN builds a layer's inputs recursively: deep published nets (12 conformer blocks) exceed Python's
    # default 1000 frames; their configs raise the limit themselves (sys.setrecursionlimit(3000))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="CASE", help="only these cases")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep-going", action="store_true", help="report failing cases and continue")
    parser.add_argument("--cases-json", metavar="FILE", help="only the cases of this JSON list (keyword arguments "
                        "of case(); benchmarks/returnn_fuzz.py writes them) instead of the cases_*.py ones")
    args = parser.parse_args(argv)
    if args.cases_json:
        with open(args.cases_json) as f:
            for kwargs in json.load(f):
                case(**kwargs)
    else:
        _load_more_cases()
    if args.list:
        for name, c in CASES.items():
            print("%-40s %s" % (name, c["family"]))
        return
    _check_real_returnn()
    os.environ.setdefault("DISABLE_CUDA", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    unknown = sorted(set(args.only or []) - set(CASES))
    if unknown:
        sys.exit("make_goldens.py: unknown case(s) %s (see --list)" % ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for name in args.only or list(CASES):
        try:
            arrays = run_case(CASES[name])
        except Exception as exc:  # noqa: BLE001 - report and go on with --keep-going
            if not args.keep_going:
                raise
            failed.append(name)
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            import traceback
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            print("FAILED %s: %s: %s [at %s:%i]" % (name, type(exc).__name__, first, os.path.basename(frame.filename),
                                                    frame.lineno), flush=True)
            continue
        path = os.path.join(args.out, name + ".npz")
        write_npz(path, arrays)
        meta = json.loads(str(arrays["meta"]))
        print("wrote %s (%s, out %s %s, padding %s)" % (path, meta["family"], meta["out_dims"],
                                                         tuple(arrays["out"].shape), meta["input_padding"]), flush=True)
    if failed:
        print("failed cases: %s" % " ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
