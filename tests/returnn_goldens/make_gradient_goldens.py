"""Golden training updates from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode)
for its gradient options and sparse (embedding) gradients: RETURNN's ``Updater`` minimises a small
loss with the config's options for a few steps; ``tests/test_gradients.py`` runs this engine's
update (``returnn/tf/gradients.py``) on the same loss, on one rank and, for the ``multi-*`` cases,
on two ranks under mpirun, and compares the parameters.

The loss (:func:`loss_terms`, the same formula as in ``tests/test_gradients.py``): two dense
parameters ``x0`` (3,), ``x1`` (2, 2) in a quadratic, times ``dense_scale``, and an embedding ``E``
(5, 3) whose rows ``tf.gather(E, ids)`` (a sparse gradient, rows repeated, other rows each step) enter
``emb_scale * (0.5 * sum(C * (rows - T) ** 2) + 0.1 * sum(rows[:, 0]) * x0[0])``, one row of C and T
per occurrence. ``nonfinite`` adds terms whose gradients are +inf, NaN and -inf in x0/x1 and +inf
in one occurrence of E (``sqrt`` and ``abs`` at 0). ``l2``: RETURNN's ``RETURNN_constraint_L2``
marks for ``decouple_constraints`` (what layers with ``L2`` set).

A ``multi-*`` case gives each of two ranks its part of ``ids`` (``rank_ids``) and the loss scales a
rank uses; its golden is RETURNN on one process with the occurrences of both ranks, which is what
RETURNN's Horovod allreduce (an allgather for sparse gradients) hands its optimizer.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_gradient_goldens.py

Writes ``tests/data/returnn_gradients.json`` (``--out FILE`` elsewhere): the constants, and
``cases``: ``{name: {"config", "ids", "dense_scale", "emb_scale", "nonfinite", "l2", ["rank_ids",
"rank_dense_scale", "rank_emb_scale"], "optimizer": RETURNN's class, "values": [x0, x1, E] after
STEPS updates}}``; ``lr_cases``: RETURNN's learning-rate control's rates per epoch for ``scores``
(``learning_rate_growth`` & co.), ``last_best``: its ``get_last_best_epoch`` for those scores.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_gradients.json")

STEPS = 5
X0 = [[1.0, -2.0, 0.5], [[0.3, -0.7], [2.0, 0.0]]]
SCALE = [[1.0, 3.0, 0.5], [[2.0, 1.0], [0.25, 4.0]]]
TARGET = [[0.5, 0.5, -1.0], [[0.0, 1.0], [-1.0, 0.2]]]
E0 = [[0.5, -0.2, 0.1], [0.3, 0.8, -0.6], [-0.4, 0.2, 0.9], [0.7, -0.5, 0.25], [0.05, 0.6, -0.3]]
# the embedding rows of each step (step i: IDS[i % 2]): rows repeated; rows 3, 4 only in even steps, 2 only in
# odd ones (a sparse update leaves a row without gradient alone: momentum, RMSProp, Adadelta and Nadam differ)
IDS = [[1, 3, 3, 0, 4, 1, 0, 0], [2, 2, 0, 1, 1, 1, 0, 2]]
C = [[1.0, 2.0, 0.5], [3.0, 1.0, 1.5], [0.5, 0.5, 2.0], [1.0, 1.0, 1.0],
     [2.0, 0.25, 1.0], [1.5, 3.0, 0.5], [0.75, 1.25, 2.5], [4.0, 0.5, 1.0]]
T = [[0.0, 1.0, -1.0], [2.0, -1.0, 0.5], [-2.0, 0.0, 1.0], [1.0, 1.0, 1.0],
     [0.5, -0.5, 0.0], [-1.0, 2.0, 0.0], [0.25, 0.0, -0.5], [3.0, -2.0, 1.0]]
OPTIMIZERS = {"sgd": ({"class": "gradientdescent"}, 0.1), "momentum": ({"class": "momentum", "momentum": 0.9}, 0.05),
              "nesterov": ({"class": "momentum", "momentum": 0.8, "use_nesterov": True}, 0.05),
              "adam": ({"class": "adam"}, 0.05), "nadam": ({"class": "nadam"}, 0.05),
              "rmsprop": ({"class": "rmsprop", "decay": 0.8, "momentum": 0.5}, 0.02),
              "rmsprop-centered": ({"class": "rmsprop", "centered": True, "epsilon": 1e-3}, 0.02),
              "adagrad": ({"class": "adagrad"}, 0.2), "adadelta": ({"class": "adadelta", "epsilon": 1e-3}, 1.0)}


def _noam(*, network, global_train_step, learning_rate, **kwargs):
    """A published config's Noam warm-up (RETURNN's dynamic_learning_rate): TF ops of the step number."""
    import tensorflow as tf
    n = tf.cast(global_train_step, tf.float32) + 1.0
    return learning_rate * tf.minimum(tf.pow(n, -0.5), n * tf.pow(3.0, -1.5)) * 2.0


DYNAMIC_LR = {"noam": _noam}  # functions a case names in "dynamic_lr" (the config's dynamic_learning_rate)


def config_of(case):
    """The case's config, with its dynamic_learning_rate function (not JSON) put in."""
    config = dict(case["config"])
    if case.get("dynamic_lr"):
        config["dynamic_learning_rate"] = DYNAMIC_LR[case["dynamic_lr"]]
    return config


def _case(optimizer: str, ids=IDS, dense_scale=1.0, emb_scale=1.0, nonfinite=False, l2=None, dynamic_lr=None,
          **config):
    opt, lr = OPTIMIZERS[optimizer]
    # maximize_grad_norm: RETURNN fails on a sparse gradient there ("unsupported operand type(s) for +=:
    # 'IndexedSlices' and 'IndexedSlices'"), so its cases take the rows by a one-hot product (a dense gradient)
    return {"config": dict({"optimizer": dict(opt), "learning_rate": lr}, **config), "ids": [list(i) for i in ids],
            "dense_scale": dense_scale, "emb_scale": emb_scale, "nonfinite": nonfinite, "l2": l2 or {},
            "dense_emb": bool(config.get("maximize_grad_norm")), "dynamic_lr": dynamic_lr}


def _multi(optimizer: str, split: int = 4, avg: bool = False, l2=None, **config):
    """Two ranks: rank 0 has occurrences IDS[:split], rank 1 the rest, each the dense loss at
    rank_dense_scale; with horovod_avg_grad the sum over ranks is halved."""
    rank_dense, rank_emb = (1.0, 1.0) if avg else (0.5, 1.0)
    div = 2.0 if avg else 1.0
    if avg:
        config["horovod_avg_grad"] = True
    case = _case(optimizer, dense_scale=2 * rank_dense / div, emb_scale=rank_emb / div, l2=l2, **config)
    case.update(rank_ids=[[ids[:split] for ids in IDS], [ids[split:] for ids in IDS]], rank_dense_scale=rank_dense,
                rank_emb_scale=rank_emb)
    return case


CASES = {}
for _name in OPTIMIZERS:  # the sparse update of each optimizer (Momentum, RMSProp, Adadelta, Nadam: rows only)
    CASES["sparse-%s" % _name] = _case(_name)
    CASES["clip-%s" % _name] = _case(_name, gradient_clip=0.6)  # clipped per occurrence, then summed
CASES.update({
    "clip-norm-momentum": _case("momentum", gradient_clip_norm=0.8),  # the norm of the occurrences
    "clip-norm-adam": _case("adam", gradient_clip_norm=0.8),
    "clip-avg-norm-momentum": _case("momentum", gradient_clip_avg_norm=0.3),  # dense
    "clip-global-norm-momentum": _case("momentum", gradient_clip_global_norm=1.5),
    "clip-global-norm-after-clip": _case("rmsprop", gradient_clip=0.5, gradient_clip_global_norm=1.0),  # raw norm
    "clip-all-adadelta": _case("adadelta", gradient_clip=0.7, gradient_clip_norm=1.2, gradient_clip_global_norm=2.0),
    "nan-inf-filter-sgd": _case("sgd", nonfinite=True, gradient_nan_inf_filter=True),
    "nan-inf-filter-momentum": _case("momentum", nonfinite=True, gradient_nan_inf_filter=True),
    "nan-inf-filter-clip-adam": _case("adam", nonfinite=True, gradient_nan_inf_filter=True, gradient_clip=0.5),
    "norm-to-zero-momentum": _case("momentum", grad_norm_to_clip_to_zero=8.0),
    "maximize-grad-norm-sgd": _case("sgd", maximize_grad_norm=0.05),
    "maximize-grad-norm-adam": _case("adam", maximize_grad_norm=0.01),
    "maximize-grad-norm-momentum-clip": _case("momentum", maximize_grad_norm=0.02, gradient_clip_global_norm=2.0),
    "decouple-constraints-adam": _case("adam", decouple_constraints=True, l2={"x1": 0.01, "E": 0.05}),
    "decouple-constraints-momentum-factor": _case("momentum", decouple_constraints=True,
                                                  decouple_constraints_factor=0.5, l2={"x0": 0.02, "E": 0.01}),
    "accum-clip-global-norm-momentum": _case("momentum", accum_grad_multiple_step=2, gradient_clip_global_norm=1.0),
    "accum-adam": _case("adam", accum_grad_multiple_step=3),
    "dynamic-lr-noam-adam": _case("adam", dynamic_lr="noam"),
    "dynamic-lr-noam-accum-momentum": _case("momentum", dynamic_lr="noam", accum_grad_multiple_step=2),
    "dynamic-lr-interval-rmsprop": _case("rmsprop", dynamic_learning_rate={"interval": 2, "decay": 0.5}),
    # two ranks (tests/test_gradients.py under mpirun)
    "multi-sparse-momentum": _multi("momentum"),
    "multi-sparse-rmsprop": _multi("rmsprop"),
    "multi-sparse-nadam": _multi("nadam"),
    "multi-sparse-adadelta-split": _multi("adadelta", split=3),
    "multi-sparse-adam": _multi("adam"),
    "multi-clip-momentum": _multi("momentum", gradient_clip=0.6, gradient_clip_norm=1.5),
    "multi-clip-global-norm-rmsprop": _multi("rmsprop", gradient_clip=0.5, gradient_clip_global_norm=1.0),
    "multi-avg-clip-momentum": _multi("momentum", avg=True, gradient_clip=0.4, gradient_clip_norm=1.0),
    "multi-avg-adam": _multi("adam", avg=True),
    "multi-maximize-grad-norm-sgd": _multi("sgd", maximize_grad_norm=0.05),
    "multi-avg-maximize-grad-norm-adam": _multi("adam", avg=True, maximize_grad_norm=0.01),
    "multi-decouple-momentum": _multi("momentum", decouple_constraints=True, l2={"E": 0.05, "x0": 0.01}),
    "multi-accum-momentum": _multi("momentum", accum_grad_multiple_step=2, gradient_clip_global_norm=1.0),
})


# learning-rate control: RETURNN's rates per epoch for these scores, and its get_last_best_epoch
SCORES = [2.0, 1.5, 1.6, 1.2, 1.19, 1.3, 0.9, 0.95, 0.7, 0.71]
LR_CASES = {
    "newbob-growth": {"learning_rate_control": "newbob", "learning_rate_growth": 1.5},
    "newbob-growth-old-name": {"learning_rate_control": "newbob", "newbob_learning_rate_growth": 1.2,
                               "newbob_learning_rate_decay": 0.7},
    "newbob-abs-growth": {"learning_rate_control": "newbob_abs", "learning_rate_growth": 1.1,
                          "newbob_error_threshold": -0.05},
    "newbob-multi-growth": {"learning_rate_control": "newbob_multi_epoch", "newbob_multi_num_epochs": 2,
                            "newbob_multi_update_interval": 1, "learning_rate_growth": 1.3,
                            "newbob_relative_error_grow_threshold": -0.05},
    "newbob-multi-growth-default-threshold": {"learning_rate_control": "newbob_multi_epoch",
                                              "newbob_multi_num_epochs": 3, "learning_rate_growth": 2.0},
    "newbob-no-growth": {"learning_rate_control": "newbob"},
}
LAST_BEST = [  # (last_epoch, options)
    (4, {}), (5, {}), (6, {}), (6, {"min_score_dist": 0.2}), (6, {"filter_score": 1.19}), (6, {"only_last_n": 2}),
    (8, {"only_last_n": 5, "min_score_dist": 0.2, "filter_score": 1.5}), (8, {"first_epoch": 5}),
    (8, {"only_last_epochs": 3}), (10, {}), (10, {"min_score_dist": 0.5}), (3, {"first_epoch": 3}),
]


def run_lr_cases():
    from returnn.config import Config
    from returnn.learning_rate_control import load_learning_rate_control_from_config
    out = {}
    for name, opts in LR_CASES.items():
        control = load_learning_rate_control_from_config(Config(dict(opts, learning_rate=1.0)))
        rates = []
        for epoch, score in enumerate(SCORES, 1):
            rates.append(control.get_learning_rate_for_epoch(epoch))
            control.set_epoch_error(epoch, {"dev_score": score, "train_score": score + 1.0})
        rates.append(control.get_learning_rate_for_epoch(len(SCORES) + 1))
        out[name] = {"config": opts, "rates": rates}
    control = load_learning_rate_control_from_config(Config({"learning_rate": 1.0}))
    for epoch, score in enumerate(SCORES, 1):
        control.get_learning_rate_for_epoch(epoch)
        control.set_epoch_error(epoch, {"dev_score": score})
    best = [[last, opts, control.get_last_best_epoch(last_epoch=last, **opts)] for last, opts in LAST_BEST]
    return out, best


def loss_terms(tf, xs, emb, ids, c, t, dense_scale, emb_scale, nonfinite, dense_emb=False):
    """The loss of the module docstring (TensorFlow ops; ``ids``, ``c``, ``t``: this process's
    occurrences; ``dense_emb``: the rows by a one-hot product, a dense gradient)."""
    import numpy as np
    x0, x1 = xs
    dense = tf.add_n([0.5 * tf.reduce_sum(np.array(a, np.float32) * tf.square(x - np.array(b, np.float32)))
                      for x, a, b in zip(xs, SCALE, TARGET)])
    if dense_emb:
        rows = tf.matmul(tf.one_hot(ids, len(E0), dtype=tf.float32), emb)
    else:
        rows = tf.gather(emb, ids)
    sparse = 0.5 * tf.reduce_sum(np.array(c, np.float32) * tf.square(rows - np.array(t, np.float32)))
    sparse += 0.1 * tf.reduce_sum(rows[:, 0]) * x0[0]
    loss = dense_scale * dense + emb_scale * sparse
    if nonfinite:  # gradients +inf (x0[2]), NaN (x1[0, 0]), -inf (x1[1, 1]); +inf in E's occurrence 1 (row 3 in
        # step 0; once row 3 has moved, the square root of a negative number: NaN)
        loss += tf.sqrt(x0[2] - 0.5) + tf.sqrt(tf.abs(x1[0, 0] - 0.3)) - tf.sqrt(x1[1, 1])
        loss += tf.sqrt(rows[1, 1] - np.float32(E0[3][1]))
    return loss


def run_case(case):
    """The parameters after STEPS updates of RETURNN's Updater, and the optimizer's class name."""
    import numpy as np
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.updater import Updater

    config_dict = case["config"]
    config = Config(config_of(json.loads(json.dumps(case))))
    lr = float(config_dict["learning_rate"])
    n = len(case["ids"][0])
    c, t = C[:n], T[:n]
    with tf.compat.v1.Graph().as_default() as graph:
        xs = [tf.compat.v1.get_variable("x%i" % i, initializer=np.array(x0, np.float32), use_resource=True)
              for i, x0 in enumerate(X0)]
        emb = tf.compat.v1.get_variable("E", initializer=np.array(E0, np.float32), use_resource=True)
        for name, var in (("x0", xs[0]), ("x1", xs[1]), ("E", emb)):
            if name in case["l2"]:
                setattr(var, "RETURNN_constraint_L2", case["l2"][name])
        ids = tf.compat.v1.placeholder(tf.int32, [n], name="ids")
        loss = loss_terms(tf, xs, emb, ids, c, t, case["dense_scale"], case["emb_scale"], case["nonfinite"],
                          case["dense_emb"])
        step = tf.compat.v1.get_variable("global_step", initializer=np.int64(0), trainable=False, use_resource=True)
        updater = Updater(config=config, initial_learning_rate=lr, objective=loss, global_train_step_var=step)
        updater.set_trainable_vars(xs + [emb])
        optim_op = updater.get_optim_op()
        name = type(updater.get_default_optimizer()).__name__
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            updater.init_optimizer_vars(session=sess)
            updater.set_learning_rate(lr, session=sess)
            for i in range(STEPS):
                sess.run(optim_op, feed_dict={ids: case["ids"][i % len(case["ids"])]})
            values = sess.run(xs + [emb])
    return name, [v.astype(np.float64).tolist() for v in values]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output file (default: %(default)s)")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from make_goldens import _check_real_returnn
    _check_real_returnn()
    os.environ.setdefault("DISABLE_CUDA", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import returnn
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    out = {"returnn_version": getattr(returnn, "__long_version__", returnn.__version__), "tf_version": tf.__version__,
           "steps": STEPS, "x0": X0, "scale": SCALE, "target": TARGET, "e0": E0, "c": C, "t": T, "cases": {}}
    for name, case in CASES.items():
        klass, values = run_case(case)
        out["cases"][name] = dict(case, optimizer=klass, values=values)
        print("%-40s %s" % (name, klass), flush=True)
    out["scores"] = SCORES
    out["lr_cases"], out["last_best"] = run_lr_cases()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, allow_nan=True)
        f.write("\n")
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
