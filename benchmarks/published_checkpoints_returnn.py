#!/usr/bin/env python3
"""The real RETURNN's side of :mod:`published_checkpoints`: run with the RETURNN venv from a directory
outside the repository, ``DISABLE_CUDA=1`` (:func:`returnn_side.run_returnn_script` does)::

    python benchmarks/published_checkpoints_returnn.py SPEC.json

``SPEC.json``: ``{"cases": [{"name", "network", "extern", "config", "lens", "output", "dir"}]}``. Per case,
in its own graphs at the case's ``behavior_version``, RETURNN

1. builds the network for training (``train_flag``, ``eval_flag``), lists its saveable parameters
   (``get_saveable_params_list``: what its checkpoints hold) and saves their initial values (its
   initializers, graph seed 1) with its saver (``save_params_to_file``) to ``DIR/returnn``;
2. builds it as its ``forward`` task does (neither train nor eval flag), loads ``DIR/returnn`` with its
   loader (``load_params_from_file``) and computes the output layer on random inputs (make_goldens'
   ``_inputs``: the case's lengths, zero-padded); where that fails (an output that needs its target: an
   LM's softmax, a decoder without search), as its ``eval`` task does (eval flag: targets available);
3. if ``DIR/ours.001`` exists (this engine's checkpoint of the same net), loads it into that network and
   computes the output again.

Writes ``DIR/returnn.npz``: ``params`` (JSON {name: shape}), ``in:KEY``/``len:KEY``, ``out``, ``out_size:I``,
``out_dims`` (make_goldens' roles), ``eval_flag`` (step 2 fell back to it), and ``ours_out`` (step 3), or ``error`` (the step and RETURNN's error
line: RETURNN cannot build or run the net); ``ours_error`` when step 3 failed.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDENS = os.path.join(os.path.dirname(HERE), "tests", "returnn_goldens")


def _line(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:300])


def _network(c, train: bool, evaluate: bool):
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.util import BehaviorVersion
    import make_goldens as mg
    network = json.loads(json.dumps(c["network"]))
    extern = json.loads(json.dumps(c["extern"]))
    resolve = mg._dim_resolver(network, extern)
    config = Config(dict(extern_data=resolve(extern), **c["config"]))
    set_global_config(config)
    BehaviorVersion._reset((c["config"].get("behavior_version"), 0))
    net = TFNetwork(config=config, train_flag=train, eval_flag=evaluate)
    net.construct_from_dict(resolve(network))
    return net


def _session(graph):
    import tensorflow as tf
    cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                   device_count={"GPU": 0})
    return tf.compat.v1.Session(graph=graph, config=cfg)


def _initialize(net, sess) -> None:
    """All variables at their initial values; the global step too (RETURNN keeps it out of the global
    variables: its engine initializes it by itself)."""
    import tensorflow as tf
    sess.run(tf.compat.v1.global_variables_initializer())
    sess.run(net.global_train_step_var.initializer)


def _forward(c, prefix: str, evaluate: bool) -> dict:
    """Step 2 and 3 with RETURNN's forward flags (``evaluate``: its eval task's, targets available)."""
    import numpy as np
    import tensorflow as tf
    import make_goldens as mg
    out = {}
    with tf.compat.v1.Graph().as_default() as graph:
        net = _network(c, train=False, evaluate=evaluate)
        layer = net.get_layer(c["output"])
        data = layer.output.copy_as_batch_major() if layer.output.have_batch_axis() else layer.output
        if data.placeholder is None:  # DataNotAvailableLayer: it needs a target
            raise RuntimeError("output %s has no value" % layer)
        fetch = {"out": data.placeholder}
        dyn = [i for i, tag in enumerate(data.dim_tags) if i != data.batch_dim_axis and tag.dimension is None]
        fetch.update({"size%i" % i: data.get_dynamic_size(i) for i in dyn})
        feeds = mg._inputs(c, net.extern_data, "zeros")
        feed_dict = {}
        for key, (arr, lens) in feeds.items():
            d = net.extern_data.data[key]
            order = mg._batch_array_axes(d)
            feed_dict[d.placeholder] = arr.transpose([order.index(i) for i in range(arr.ndim)])
            if d.time_dim_axis is not None:
                feed_dict[d.size_placeholder[d.time_dim_axis_excluding_batch]] = lens
            out["in:" + key], out["len:" + key] = arr, lens.astype(np.int32)
        if net.epoch_step is not None:
            feed_dict[net.epoch_step] = 0
        with _session(graph) as sess:
            _initialize(net, sess)
            net.load_params_from_file(prefix, session=sess)
            res = sess.run(fetch, feed_dict=feed_dict)
            out["out"] = res["out"]
            out.update({"out_size:%i" % i: np.asarray(res["size%i" % i], np.int32) for i in dyn})
            out["out_dims"] = np.array(mg._dims_desc(data))
            out["eval_flag"] = np.array(evaluate)
            ours = os.path.join(c["dir"], "ours.001")
            if os.path.exists(ours + ".index"):
                try:
                    _initialize(net, sess)
                    net.load_params_from_file(ours, session=sess)
                    out["ours_out"] = sess.run(fetch, feed_dict=feed_dict)["out"]
                except Exception as exc:  # noqa: BLE001 - RETURNN refusing our checkpoint is the finding
                    out["ours_error"] = np.array(_line(exc))
    return out


def run_case(c) -> dict:
    """The npz dict of one case (see the module doc)."""
    import numpy as np
    import tensorflow as tf
    out = {}
    prefix = os.path.join(c["dir"], "returnn")
    step = "build for training"
    try:
        with tf.compat.v1.Graph().as_default() as graph:
            tf.compat.v1.set_random_seed(1)
            net = _network(c, train=True, evaluate=True)
            params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
            out["params"] = np.array(json.dumps({p.name.split(":")[0]: p.shape.as_list() for p in params}))
            step = "save"
            with _session(graph) as sess:
                _initialize(net, sess)
                net.save_params_to_file(prefix, session=sess)
        step = "forward"
        try:
            out.update(_forward(c, prefix, evaluate=False))
        except Exception as exc:  # noqa: BLE001 - as its eval task then (an output that needs its target)
            step = "forward (%s), eval" % _line(exc)[:120]
            out.update(_forward(c, prefix, evaluate=True))
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("PUBLISHED_CKPT_TRACE"):
            traceback.print_exc()
        out = {"error": np.array("%s: %s" % (step, _line(exc)))}
    return out


def main() -> None:
    sys.path.insert(0, GOLDENS)
    import make_goldens as mg
    mg._check_real_returnn()
    sys.setrecursionlimit(3000)  # as the published configs that need it set it (Sisyphus' ReturnnConfig does)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    for c in spec["cases"]:
        res = run_case(c)
        np.savez(os.path.join(c["dir"], "returnn.npz"), **res)
        print("done %s%s" % (c["name"], " (%s)" % res["error"] if "error" in res else ""), flush=True)


if __name__ == "__main__":
    main()
