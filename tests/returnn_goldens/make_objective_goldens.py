"""Golden training steps from the real RETURNN (PyPI package ``returnn``, TF backend, graph mode): what
RETURNN minimises for a network with a loss and ``L2``, and what its optimizer makes of it.
``tests/test_returnn_objective.py`` builds the same network with this repository's engine, sets the
same parameters by RETURNN's names, runs its train step on the same batch and compares.

The network is RETURNN's ``demos/demo-tf-enc-dec.config`` (encoder LSTM with ``L2``, decoder rec
unit with teacher forcing, targets with EOS, ``ce`` loss) at a small ``layer_dim``; the batch is four
sequences of RETURNN's ``TaskNumberBaseConvertDataset``; the parameters are RETURNN's own
initialisation (graph seed 1).

Regenerate (from a directory OUTSIDE the repository, so that ``import returnn`` is the PyPI package;
``DISABLE_CUDA=1`` makes RETURNN compile its native LSTM ops for the CPU)::

    cd /tmp && DISABLE_CUDA=1 /work/main/.bench-venv-returnn/bin/python \\
        /work/main/tests/returnn_goldens/make_objective_goldens.py

Writes ``tests/data/returnn_objective/<case>.npz`` (``--out DIR`` elsewhere), byte-reproducible, with
  ``meta``          0-d unicode string, JSON: case, network, extern_data, optimizer, learning_rate,
                    adam_steps, params (RETURNN names, without global_step), returnn_version, tf_version;
  ``in:KEY``, ``len:KEY``  the batch (int32 class indices, padded with 0) and its lengths;
  ``param:NAME``    the parameters before the first step;
  ``grad:NAME``     the gradient of RETURNN's training objective (``network.get_objective()``: the
                    losses as the optimizer sees them plus the ``L2`` constraints) at those parameters;
  ``objective``, ``total_loss``, ``constraints``  those scalars; ``loss_sum``, ``frames``: the ``ce``
                    loss summed over the target frames and their number (``1 / norm_factor``);
  ``adam:NAME``     the parameters after ``adam_steps`` steps of RETURNN's updater (its ``adam``
                    class, default epsilon) on the same batch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "returnn_objective")
LAYER_DIM = 6
NUM_SEQS = 4
ADAM_STEPS = 3
LEARNING_RATE = 0.0005  # the demo's
OUT_DIM = 2


def demo_network(layer_dim, loss_opts=None):
    """demo-tf-enc-dec.config's network at ``layer_dim``; ``loss_opts`` for its ``prob`` layer."""
    prob = {"class": "softmax", "from": "s", "target": "classes0", "loss": "ce"}
    if loss_opts:
        prob["loss_opts"] = loss_opts
    return {
        "input_embed": {"class": "linear", "activation": None, "from": "data", "n_out": layer_dim},
        "input": {"class": "rec", "unit": "nativelstm2", "from": "input_embed", "n_out": layer_dim, "L2": 0.01},
        "input_last": {"class": "get_last_hidden_state", "from": "input", "n_out": layer_dim * 2},
        "output": {"class": "rec", "from": [], "unit": {
            "output_embed": {"class": "linear", "activation": None, "from": "output", "n_out": layer_dim},
            "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:output_embed", "base:input_last"],
                  "n_out": layer_dim},
            "prob": prob,
            "output": {"class": "choice", "from": "prob", "target": "classes0", "beam_size": 8},
            "end": {"class": "compare", "from": "output", "value": OUT_DIM}}, "target": "classes0"},
        "target_with_eos_": {"class": "reinterpret_data", "from": "data:classes", "increase_sparse_dim": 1},
        "target_with_eos": {"class": "postfix_in_time", "postfix": OUT_DIM, "from": "target_with_eos_",
                            "register_as_extern_data": "classes0"}}


CASES = {
    "encdec_sum": demo_network(LAYER_DIM),  # RETURNN's default: the loss summed over the batch's frames
    "encdec_normalized": demo_network(LAYER_DIM, {"use_normalized_loss": True}),
}
EXTERN_DATA = {"data": {"sparse": True, "dim": 8}, "classes": {"sparse": True, "dim": OUT_DIM}}


def make_batch():
    """NUM_SEQS sequences of RETURNN's TaskNumberBaseConvertDataset, padded: {key: (array, lengths)}."""
    import numpy as np
    from returnn.datasets.generating import TaskNumberBaseConvertDataset
    ds = TaskNumberBaseConvertDataset(num_seqs=NUM_SEQS, fixed_random_seed=42)
    ds.init_seq_order(epoch=1)
    ds.load_seqs(0, NUM_SEQS)
    batch = {}
    for key in ("data", "classes"):
        seqs = [ds.get_data(i, key) for i in range(NUM_SEQS)]
        lens = np.array([len(s) for s in seqs], np.int32)
        arr = np.zeros((NUM_SEQS, lens.max()), np.int32)
        for i, s in enumerate(seqs):
            arr[i, :len(s)] = s
        batch[key] = (arr, lens)
    return batch


def run_case(name, network):
    import numpy as np
    import tensorflow as tf
    import returnn
    from returnn.config import Config, set_global_config
    from returnn.tf.network import TFNetwork
    from returnn.tf.updater import Updater

    network = json.loads(json.dumps(network))
    optimizer = {"class": "adam"}
    config = Config(dict(extern_data=json.loads(json.dumps(EXTERN_DATA)), network=network, optimizer=optimizer,
                         learning_rate=LEARNING_RATE, task="train"))
    set_global_config(config)
    batch = make_batch()
    with tf.compat.v1.Graph().as_default() as graph:
        tf.compat.v1.set_random_seed(1)
        net = TFNetwork(config=config, train_flag=True)
        net.construct_from_dict(network)
        updater = Updater(config=config, network=net, initial_learning_rate=LEARNING_RATE)
        updater.set_trainable_vars(net.get_trainable_params())
        optim_op = updater.get_optim_op()
        params = [p for p in net.get_saveable_params_list() if p.name.split(":")[0] != "global_step"]
        names = [p.name.split(":")[0] for p in params]
        objective = net.get_objective()
        grads = [tf.convert_to_tensor(g) for g in tf.gradients(objective, params)]  # IndexedSlices -> dense
        holder = net.losses_dict["output/prob"]
        scalars = {"objective": objective, "total_loss": net.get_total_loss(),
                   "constraints": net.get_total_constraints(), "loss_sum": holder.get_loss_value(),
                   "frames": 1.0 / holder.get_norm_factor()}
        feed = {}
        for key, (arr, lens) in batch.items():
            data = net.extern_data.data[key]
            feed[data.placeholder] = arr
            feed[data.size_placeholder[data.time_dim_axis_excluding_batch]] = lens
        sess_cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                            device_count={"GPU": 0})
        with tf.compat.v1.Session(graph=graph, config=sess_cfg) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(net.global_train_step_var.initializer)
            updater.init_optimizer_vars(session=sess)
            updater.set_learning_rate(LEARNING_RATE, session=sess)
            before = sess.run(params)
            values = sess.run(scalars, feed)
            grad_values = sess.run(grads, feed)
            for _ in range(ADAM_STEPS):
                sess.run(optim_op, feed)
            after = sess.run(params)
    meta = {"case": name, "network": network, "extern_data": EXTERN_DATA, "optimizer": optimizer,
            "learning_rate": LEARNING_RATE, "adam_steps": ADAM_STEPS, "params": names,
            "returnn_version": getattr(returnn, "__long_version__", returnn.__version__), "tf_version": tf.__version__}
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for key, (arr, lens) in batch.items():
        arrays["in:" + key] = arr
        arrays["len:" + key] = lens
    for key, value in values.items():
        arrays[key] = np.float32(value)
    for name_, p0, g, p1 in zip(names, before, grad_values, after):
        arrays["param:" + name_] = p0
        arrays["grad:" + name_] = g
        arrays["adam:" + name_] = p1
    return arrays


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from make_goldens import _check_real_returnn, write_npz
    _check_real_returnn()
    os.environ.setdefault("DISABLE_CUDA", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    os.makedirs(args.out, exist_ok=True)
    for name, network in CASES.items():
        arrays = run_case(name, network)
        path = os.path.join(args.out, name + ".npz")
        write_npz(path, arrays)
        print("wrote %s (objective %.6g = loss %.6g + constraints %.6g, %d frames)" % (
            path, arrays["objective"], arrays["total_loss"], arrays["constraints"], arrays["frames"]), flush=True)


if __name__ == "__main__":
    main()
