"""Golden optimizer steps from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode):
RETURNN's ``Updater`` builds the optimizer a config asks for (``optimizer = {...}`` or the old
``adam = True`` style flags, ``optimizer_epsilon``, ``momentum``, RETURNN's defaults) and minimises a
small quadratic for a few steps. ``tests/test_optimizers.py`` runs this engine's optimizer from the
same config on the same quadratic and compares the parameters.

The quadratic: ``0.5 * sum(SCALE * (x - TARGET) ** 2)`` over two float32 variables starting at ``X0``
(the same constants as ``tests/test_optimizers.py``), ``STEPS`` updates at a constant learning rate.

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_optimizer_goldens.py

Writes ``tests/data/returnn_optimizers.json`` (``--out FILE`` elsewhere), deterministic:
  ``returnn_version``, ``tf_version``, ``steps``, ``x0``, ``scale``, ``target``;
  ``cases``: ``{name: {"config": {...}, "optimizer": the class RETURNN created, "x": [values after
  the steps, one nested list per variable]}}``, or ``{"config": {...}, "error": "..."}`` when RETURNN
  itself fails on the config (e.g. ``"sgd"`` and the old ``nadam = True``, which RETURNN maps to Keras
  optimizers that its wrapper cannot drive with this TF/Keras).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_optimizers.json")

STEPS = 6
X0 = [[1.0, -2.0, 0.5], [[0.3, -0.7], [2.0, 0.0]]]
SCALE = [[1.0, 3.0, 0.5], [[2.0, 1.0], [0.25, 4.0]]]
TARGET = [[0.5, 0.5, -1.0], [[0.0, 1.0], [-1.0, 0.2]]]

# name -> config (learning_rate included); RETURNN's spellings of the options
CASES = {
    "sgd-default": {"learning_rate": 0.05},
    "sgd": {"optimizer": {"class": "sgd"}, "learning_rate": 0.1},
    "sgd-config-momentum": {"optimizer": {"class": "sgd"}, "momentum": 0.8, "learning_rate": 0.05},
    "gradientdescent": {"optimizer": {"class": "GradientDescent"}, "learning_rate": 0.1},
    "lr-multiplier": {"optimizer": {"class": "gradientdescent", "learning_rate_multiplier": 0.5}, "learning_rate": 0.2},
    "momentum": {"optimizer": {"class": "momentum", "momentum": 0.8}, "learning_rate": 0.05},
    "momentum-nesterov": {"optimizer": {"class": "momentum", "momentum": 0.7, "use_nesterov": True},
                          "learning_rate": 0.05},
    "momentum-config-momentum": {"optimizer": {"class": "momentum"}, "momentum": 0.6, "learning_rate": 0.05},
    "momentum-old-style": {"momentum": 0.6, "learning_rate": 0.05},
    "adam": {"optimizer": {"class": "adam"}, "learning_rate": 0.01},
    "adam-old-style": {"adam": True, "learning_rate": 0.02},
    "adam-options": {"optimizer": {"class": "Adam", "beta1": 0.5, "beta2": 0.9, "epsilon": 0.1},
                     "learning_rate": 0.03},
    "adam-epsilon-1e-3": {"optimizer": {"class": "adam", "epsilon": 1e-3}, "learning_rate": 0.01},
    "adam-config-epsilon": {"adam": True, "optimizer_epsilon": 0.01, "learning_rate": 0.02},
    "adam-epsilon-1e-8": {"optimizer": {"class": "AdamOptimizer"}, "optimizer_epsilon": 1e-8, "learning_rate": 0.01},
    "nadam": {"optimizer": {"class": "nadam"}, "learning_rate": 0.01},
    "nadam-options": {"optimizer": {"class": "nadam", "beta1": 0.8, "epsilon": 0.05}, "learning_rate": 0.02},
    "nadam-old-style": {"nadam": True, "learning_rate": 0.01},
    "rmsprop": {"optimizer": {"class": "rmsprop", "decay": 0.8}, "learning_rate": 0.01},
    "rmsprop-old-style": {"rmsprop": True, "learning_rate": 0.01},
    "rmsprop-old-style-decay-momentum": {"rmsprop": 0.7, "momentum": 0.5, "learning_rate": 0.01},
    "rmsprop-centered": {"optimizer": {"class": "rmsprop", "centered": True, "momentum": 0.3, "epsilon": 1e-3},
                         "learning_rate": 0.01},
    "adagrad": {"optimizer": {"class": "adagrad"}, "learning_rate": 0.1},
    "adagrad-old-style": {"adagrad": True, "learning_rate": 0.2, "optimizer_epsilon": 0.5},
    "adagrad-initial": {"optimizer": {"class": "adagrad", "initial_accumulator_value": 1.0}, "learning_rate": 0.1},
    "adadelta": {"optimizer": {"class": "adadelta"}, "learning_rate": 1.0},
    "adadelta-old-style": {"adadelta": True, "learning_rate": 1.0},
    "adadelta-options": {"optimizer": {"class": "adadelta", "rho": 0.9, "epsilon": 1e-3}, "learning_rate": 0.5},
}


def run_case(config_dict):
    """The variables' values after STEPS updates of RETURNN's Updater, and the optimizer's class name."""
    import numpy as np
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.updater import Updater

    config = Config(json.loads(json.dumps(config_dict)))
    lr = float(config_dict["learning_rate"])
    with tf.compat.v1.Graph().as_default() as graph:
        xs = [tf.compat.v1.get_variable("x%i" % i, initializer=np.array(x0, np.float32), use_resource=True)
              for i, x0 in enumerate(X0)]
        loss = tf.add_n([0.5 * tf.reduce_sum(np.array(a, np.float32) * tf.square(x - np.array(b, np.float32)))
                         for x, a, b in zip(xs, SCALE, TARGET)])
        step = tf.compat.v1.get_variable("global_step", initializer=np.int64(0), trainable=False, use_resource=True)
        updater = Updater(config=config, initial_learning_rate=lr, objective=loss, global_train_step_var=step)
        updater.set_trainable_vars(xs)
        optim_op = updater.get_optim_op()
        optimizer = updater.get_default_optimizer()
        name = type(optimizer).__name__
        inner = getattr(optimizer, "keras_optimizer", None)
        if inner is not None:
            name += "(%s.%s)" % (type(inner).__module__, type(inner).__name__)
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            updater.init_optimizer_vars(session=sess)
            updater.set_learning_rate(lr, session=sess)
            for _ in range(STEPS):
                sess.run(optim_op)
            values = sess.run(xs)
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
           "steps": STEPS, "x0": X0, "scale": SCALE, "target": TARGET, "cases": {}}
    for name, config in CASES.items():
        try:
            klass, values = run_case(config)
        except Exception as exc:  # noqa: BLE001 - RETURNN itself fails on this config: recorded as such
            error = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:200])
            out["cases"][name] = {"config": config, "error": error}
            print("%-34s FAILS IN RETURNN: %s" % (name, error), flush=True)
            continue
        out["cases"][name] = {"config": config, "optimizer": klass, "x": values}
        print("%-34s %s" % (name, klass), flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
