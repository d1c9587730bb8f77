"""The real RETURNN's side of ``tests/test_returnn_checkpoints.py::test_units_*``: checkpoint files
of networks with many parametric layer families, moved both ways.

Run with the RETURNN venv from a directory outside the repository (so that ``import returnn`` is
the PyPI package; ``DISABLE_CUDA=1`` compiles RETURNN's native LSTM ops for the CPU)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_checkpoints/returnn_units.py SPEC.json OUT.npz

``SPEC.json``: ``{"cases": [{"name", "network", "extern_data", "config", "layers", "ours",
"returnn"}], "inputs": INPUTS.npz}``. For each case, in its own graph at the case's
``behavior_version``, RETURNN builds the network (evaluation mode), then

1. loads the checkpoint ``ours`` (written by this repository's engine) with its own loader
   (``TFNetwork.load_params_from_file``, as ``load`` / resuming does) and computes the ``layers``;
2. sets every parameter to random values (numpy, seeded by the name; variances positive, so
   that batch-norm statistics are not their trivial initial values), saves them to ``returnn``
   with its own saver (``TFNetwork.save_params_to_file``, as after each epoch) and computes the
   ``layers`` again.

``OUT.npz`` holds, per case ``C`` and layer ``L``: ``C/ours/L``, ``C/returnn/L`` (batch-major,
feature last: ``copy_as_batch_spatial_major``; as they are without a batch axis), ``C/size/L/I``
(int32 sizes of each dynamic axis I; the same in both runs), ``C/params`` (the names RETURNN
saved) and ``C/missing`` (the names of RETURNN's parameters that ``ours`` lacks; RETURNN's loader
may fill such gaps silently, so they are listed), names newline-separated.
``INPUTS.npz``: ``KEY`` (batch-major, zero-padded) and ``KEY:seq_len`` of each data key.
"""
from __future__ import annotations

import json
import os
import sys


def _check_real_returnn() -> None:
    import returnn
    path = os.path.realpath(getattr(returnn, "__file__", None) or "")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not path or path.startswith(os.path.join(os.path.realpath(repo), "returnn") + os.sep):
        sys.exit("returnn_units.py: 'import returnn' is this repository's package (%s), not RETURNN; run it from "
                 "a directory outside the repository with the RETURNN venv" % path)


def _random_value(name, shape, dtype):
    import zlib
    import numpy as np
    rng = np.random.RandomState(zlib.crc32(name.encode("utf8")))
    value = rng.normal(size=shape) * 0.5
    if "variance" in name:
        value = np.abs(value) + 0.5
    return value.astype(dtype)


def run_case(case, inputs):
    import numpy as np
    import tensorflow as tf
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.util import BehaviorVersion

    config = Config(dict(extern_data=case["extern_data"], **case["config"]))
    set_global_config(config)
    BehaviorVersion._behavior_version = case["config"].get("behavior_version")  # one process, several versions
    out = {}
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(7)
        net = TFNetwork(config=config, train_flag=False)
        net.construct_from_dict(case["network"])
        fetch, dyn = {}, {}
        for name in case["layers"]:
            data = net.get_layer(name).output
            data = data.copy_as_batch_spatial_major() if data.batch_dim_axis is not None else data
            fetch[name] = data.placeholder
            dyn[name] = [i for i, tag in enumerate(data.dim_tags) if i != data.batch_dim_axis and tag.dimension is None]
            for i in dyn[name]:
                fetch["%s:size%i" % (name, i)] = data.get_dynamic_size(i)
        feed = {}
        for key, data in net.extern_data.data.items():
            if key in inputs:
                feed[data.placeholder] = inputs[key]
                feed[data.get_sequence_lengths()] = inputs[key + ":seq_len"]
        session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                                  device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=session_config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            params = [p for p in net.get_saveable_params_list() if isinstance(p, tf.Variable)]
            stored = tf.train.load_checkpoint(case["ours"]).get_variable_to_shape_map()
            missing = [p.name[:-2] for p in params if p.name[:-2] not in stored]
            net.load_params_from_file(case["ours"], session=session)
            ours = session.run(fetch, feed_dict=feed)
            for p in params:
                if p.name[:-2] != "global_step":
                    p.load(_random_value(p.name[:-2], p.shape.as_list(), p.dtype.base_dtype.as_numpy_dtype), session)
            net.save_params_to_file(case["returnn"], session=session)
            theirs = session.run(fetch, feed_dict=feed)
        saved = sorted(tf.train.load_checkpoint(case["returnn"]).get_variable_to_shape_map())
    for name in case["layers"]:
        out["%s/ours/%s" % (case["name"], name)] = ours[name]
        out["%s/returnn/%s" % (case["name"], name)] = theirs[name]
        for i in dyn[name]:
            key = "%s:size%i" % (name, i)
            assert (np.asarray(ours[key]) == np.asarray(theirs[key])).all(), key
            out["%s/size/%s/%i" % (case["name"], name, i)] = np.asarray(ours[key], np.int32)
    out["%s/params" % case["name"]] = np.array("\n".join(saved))
    out["%s/missing" % case["name"]] = np.array("\n".join(missing))
    return out


def main() -> None:
    spec_path, out_path = sys.argv[1:3]
    _check_real_returnn()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    with open(spec_path) as f:
        spec = json.load(f)
    with np.load(spec["inputs"]) as z:
        inputs = {k: z[k] for k in z.files}
    out = {}
    for case in spec["cases"]:
        out.update(run_case(case, inputs))
        print("returnn_units.py: case %s done" % case["name"], flush=True)
    np.savez(out_path, **out)


if __name__ == "__main__":
    main()
