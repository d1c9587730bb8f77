"""Golden training steps from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode) for
per-layer ``updater_opts`` (RETURNN's test_Updater_multiple_optimizers(_and_opts)): a small network
(two linear layers and a softmax with a ce loss) with fixed parameters is trained by RETURNN's
``Updater`` for ``STEPS`` steps on fixed batches; the parameters after the steps are stored.
``tests/test_updater_opts.py`` trains the same network with this engine's optimizer and train step
and compares.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_updater_opts_goldens.py

Writes ``tests/data/returnn_updater_opts.json`` (``--out FILE`` elsewhere), deterministic:
``returnn_version``, ``tf_version``, ``steps``, ``extern_data``, ``batches`` (per step: ``data``,
``classes``, ``lens``), ``params`` (initial values by RETURNN's names); ``cases``: ``{name: {"config":
{...}, "network": {...}, "optimizers": how many optimizers RETURNN made, "params": {name: values
after the steps}}}``. Gradient noise is left out (random).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_updater_opts.json")

STEPS = 5
B, T, F, C = 3, 4, 4, 3
LENS = [4, 3, 2]
EXTERN = {"data": {"dim": F}, "classes": {"dim": C, "sparse": True}}


def net(opts1=None, opts2=None):
    layer1 = {"class": "linear", "activation": "tanh", "n_out": 5, "from": "data:data"}
    layer2 = {"class": "linear", "activation": "tanh", "n_out": 5, "from": ["layer1"]}
    if opts1 is not None:
        layer1["updater_opts"] = opts1
    if opts2 is not None:
        layer2["updater_opts"] = opts2
    return {"layer1": layer1, "layer2": layer2,
            "output": {"class": "softmax", "loss": "ce", "target": "classes", "from": ["layer2"]}}


# name -> (config incl. learning_rate, network)
CASES = {
    "multiple_optimizers": ({"learning_rate": 0.1},
                            net({"optimizer": {"class": "Adam"}}, {"optimizer": {"class": "Adagrad"}})),
    "multiple_optimizers_and_opts": ({"learning_rate": 0.1}, net(
        {"optimizer": {"class": "Adam"}, "accum_grad_multiple_step": 2},
        {"optimizer": {"class": "Adagrad", "learning_rate_multiplier": 3}})),
    "config_adam_layer_sgd_multiplier": ({"learning_rate": 0.05, "optimizer": {"class": "adam"}},
                                         net(None, {"optimizer": {"class": "GradientDescent",
                                                                  "learning_rate_multiplier": 0.5}})),
    "optimizer_dict_without_class": ({"learning_rate": 0.05, "optimizer": {"class": "adam"}},
                                     net({"optimizer": {"learning_rate_multiplier": 2.0, "beta1": 0.5}})),
    "config_learning_rate_multiplier": ({"learning_rate": 0.1, "optimizer": {"class": "adam",
                                                                             "learning_rate_multiplier": 0.3}}, net()),
    "layer_gradient_clips": ({"learning_rate": 0.5}, net({"gradient_clip": 0.01}, {"gradient_clip_norm": 0.02})),
    "layer_clip_global_norm": ({"learning_rate": 0.5, "gradient_clip": 0.05},
                               net({"gradient_clip_global_norm": 0.1})),
    "layer_accum_and_config_accum": ({"learning_rate": 0.1, "accum_grad_multiple_step": 2},
                                     net({"accum_grad_multiple_step": 3}, {"accum_grad_multiple_step": 1})),
    "same_optimizer_dict_two_layers": ({"learning_rate": 0.1}, net({"optimizer": {"class": "Adam", "beta1": 0.8}},
                                                                   {"optimizer": {"class": "Adam", "beta1": 0.8}})),
}


def _check_real_returnn():
    import returnn
    path = os.path.realpath(getattr(returnn, "__file__", None) or "")
    if not path or path.startswith(os.path.realpath(os.path.join(REPO, "returnn")) + os.sep):
        sys.exit("make_updater_opts_goldens.py: 'import returnn' gives this repository's package (%s), not the PyPI "
                 "RETURNN; run it with the RETURNN venv from a directory outside the repository" % path)


def batches():
    import numpy as np
    rng = np.random.RandomState(42)
    out = []
    for _ in range(STEPS):
        x = rng.normal(size=(B, T, F)).astype(np.float32)
        y = rng.randint(0, C, size=(B, T)).astype(np.int32)
        for b, n in enumerate(LENS):
            x[b, n:] = 0.0
            y[b, n:] = 0
        out.append({"data": x, "classes": y, "lens": np.array(LENS, np.int32)})
    return out


def run_case(config_dict, net_dict, data):
    """(number of optimizers, {param: values after the steps}, initial values) of RETURNN's training."""
    import numpy as np
    import tensorflow as tf
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.tf.updater import Updater

    config = Config(dict(json.loads(json.dumps(config_dict)), extern_data=EXTERN))
    set_global_config(config)
    lr = float(config_dict["learning_rate"])
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(1)
        network = TFNetwork(config=config, train_flag=True)
        network.construct_from_dict(json.loads(json.dumps(net_dict)))
        params = [p for p in network.get_trainable_params()]
        rng = np.random.RandomState(7)
        init = {p.op.name: (rng.normal(size=p.shape.as_list()) * 0.5).astype(np.float32) for p in params}
        updater = Updater(config=config, network=network, initial_learning_rate=lr)
        updater.set_trainable_vars(params)
        optim_op = updater.get_optim_op()
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(network.global_train_step_var.initializer)
            for p in params:
                p.load(init[p.op.name], sess)
            updater.init_optimizer_vars(session=sess)
            updater.set_learning_rate(lr, session=sess)
            ext = network.extern_data
            for batch in data:
                sess.run(optim_op, feed_dict={
                    ext.data["data"].placeholder: batch["data"],
                    ext.data["data"].size_placeholder[0]: batch["lens"],
                    ext.data["classes"].placeholder: batch["classes"],
                    ext.data["classes"].size_placeholder[0]: batch["lens"]})
            values = {p.op.name: v for p, v in zip(params, sess.run(params))}
    return len(updater.optimizers), values, init


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    _check_real_returnn()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import returnn
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    data = batches()
    out = {"returnn_version": getattr(returnn, "__long_version__", returnn.__version__), "tf_version": tf.__version__,
           "steps": STEPS, "extern_data": EXTERN,
           "batches": [{k: v.tolist() for k, v in b.items()} for b in data], "cases": {}}
    for name, (config_dict, network) in CASES.items():
        n_opt, values, init = run_case(config_dict, network, data)
        out.setdefault("params", {k: v.tolist() for k, v in sorted(init.items())})
        out["cases"][name] = {"config": config_dict, "network": network, "optimizers": n_opt,
                              "params": {k: v.astype(float).tolist() for k, v in sorted(values.items())}}
        print("%-36s %i optimizers" % (name, n_opt))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
