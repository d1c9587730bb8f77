"""Goldens of ``initial_state: "keep_over_epoch"`` over several training steps (RETURNN's context
carry-over): the real RETURNN (run from its venv, outside the repository, ``DISABLE_CUDA=1``) builds
each net of :data:`CASES` for training, sets random parameters, and runs :data:`STEPS` one after
the other in one session, feeding its epoch step and running the network's post control
dependencies (which store the kept state) with each. Written per case to
``tests/data/returnn_kept_state/<case>.npz``: the parameters, each step's inputs, lengths and
output. ``tests/test_kept_state_goldens.py`` runs the same steps here.

Usage: DISABLE_CUDA=1 .bench-venv-returnn/bin/python tests/returnn_goldens/make_kept_state_goldens.py
"""
from __future__ import annotations

import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(HERE), "data", "returnn_kept_state")
IN_DIM = 3
# per step: (lengths of the batch's 2 sequences, epoch step); the third starts a new epoch (epoch step 0)
STEPS = [([4, 3], 0), ([3, 2], 1), ([2, 4], 2), ([3, 3], 0)]


def _att(**opts) -> dict:
    base = {"class": "self_attention", "num_heads": 2, "total_key_dim": 4, "n_out": 4,
            "initial_state": "keep_over_epoch"}
    base.update(opts)
    return base


def _in_loop(move_out: bool, **opts) -> dict:
    return {"output": {"class": "rec", "from": "data", "optimize_move_layers_out": move_out, "unit": {
        "att": _att(**dict({"from": "data:source", "attention_left_only": True}, **opts)),
        "output": {"class": "copy", "from": "att"}}}}


CASES = {
    "self_att_keep_whole_left": {"output": _att(**{"from": "data", "attention_left_only": True})},
    "self_att_keep_whole_left_restrict": {"output": _att(**{"from": "data", "attention_left_only": True,
                                                            "restrict_state_to_last_seq": True})},
    "self_att_keep_whole_masked": {"output": _att(**{"from": "data"})},
    "self_att_keep_loop": _in_loop(False),
    "self_att_keep_loop_restrict": _in_loop(False, restrict_state_to_last_seq=True),
    "self_att_keep_loop_moved_out": _in_loop(True, restrict_state_to_last_seq=True),
}


def inputs(case: str):
    """Per step: (features (2, T, IN_DIM), lengths, epoch step); padded with zeros, as RETURNN's datasets
    pad (the carried keys include those of the padded frames of shorter sequences: RETURNN keeps all)."""
    rng = np.random.RandomState(zlib.crc32(case.encode()) % 2 ** 31)
    out = []
    for lens, es in STEPS:
        x = rng.normal(size=(2, max(lens), IN_DIM)).astype("float32")
        x[np.arange(max(lens))[None, :] >= np.array(lens)[:, None]] = 0.0
        out.append((x, np.array(lens, "int32"), es))
    return out


def run_case(name: str, network: dict) -> dict:
    import tensorflow as tf
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    config = Config({"extern_data": {"data": {"dim": IN_DIM}}})
    set_global_config(config)
    with tf.compat.v1.Graph().as_default():
        net = TFNetwork(config=config, train_flag=True)
        net.construct_from_dict(json.loads(json.dumps(network)))
        params = [p for p in net.get_params_list() if "keep_state" not in p.name]  # (the kept state: not one)
        out = net.get_default_output_layer().output.copy_as_batch_major()
        data = net.extern_data.data["data"]
        post = net.get_post_control_dependencies()
        rng = np.random.RandomState(zlib.crc32(("params" + name).encode()) % 2 ** 31)
        result = {}
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            for p in params:
                value = (rng.normal(size=p.shape.as_list()) * 0.5).astype("float32")
                p.load(value, sess)
                result["param:" + p.name.split(":")[0]] = value
            for i, (x, lens, epoch_step) in enumerate(inputs(name)):
                feed = {data.placeholder: x, data.get_sequence_lengths(): lens, net.epoch_step: epoch_step}
                y, _ = sess.run([out.placeholder, post], feed_dict=feed)
                result["out%i" % i] = y
        return result


def main() -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    only = sys.argv[1:] or list(CASES)
    for name in only:
        arrays = run_case(name, CASES[name])
        np.savez(os.path.join(OUT_DIR, name + ".npz"), **arrays)
        print("wrote", name, sorted(arrays))


if __name__ == "__main__":
    main()
