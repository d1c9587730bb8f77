"""Reading the checkpoints of earlier versions of this engine: TensorFlow object checkpoints
(``network/layers/<layer>/<attribute>/.ATTRIBUTES/VARIABLE_VALUE``, ``optimizer/...``, ``epoch``,
``epoch_step``, ``run_state``), matched to the network by Python attribute paths. New checkpoints
are written in RETURNN's layout (:mod:`returnn.tf.checkpoint_format`); a model directory of the
old format resumes and is then continued in the new one.
"""
from __future__ import annotations

import tensorflow as tf

from returnn.log import log
from returnn.tf.checkpoint_fit import legacy_misfit, legacy_removed_layers

LEGACY_RUN_STATE_KEY = "run_state/.ATTRIBUTES/VARIABLE_VALUE"


def restore_legacy(manager, reader, path: str, prefix: str) -> int:
    """Restores ``manager``'s network, optimizer and global step from the object checkpoint at
    ``path`` (``prefix`` names it in messages); returns its epoch."""
    from returnn.tf.checkpoint import _first_line, _unfit
    from returnn.errors import ConfigError
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    epoch_step = tf.Variable(0, dtype=tf.int64, trainable=False)
    run_state = tf.Variable("", dtype=tf.string, trainable=False)
    objects = {k: v for k, v in (("network", manager.network), ("optimizer", manager.optimizer),
                                 ("global_step", manager.global_step)) if v is not None}
    objects.update(epoch=epoch, epoch_step=epoch_step)
    shapes = reader.get_variable_to_shape_map()
    if LEGACY_RUN_STATE_KEY in shapes:
        objects["run_state"] = run_state
    network = manager.network
    if network is not None and not manager.ignore_missing_vars and legacy_removed_layers(shapes, network):
        raise _unfit(prefix, legacy_misfit(shapes, network))
    status = tf.train.Checkpoint(**objects).read(path)
    status.expect_partial()  # no warnings about unused values when this fails
    try:
        if not manager.ignore_missing_vars:
            status.assert_existing_objects_matched()
        elif network is not None and legacy_misfit(shapes, network):
            print("checkpoint %s: %s; load_ignore_missing_vars: those parameters start from their initialisation or "
                  "are left out" % (prefix, legacy_misfit(shapes, network)), file=log.warn)
    except (ValueError, AssertionError) as exc:
        detail = legacy_misfit(shapes, network) if network is not None else None
        if detail:
            raise _unfit(prefix, detail)
        raise ConfigError("checkpoint %s does not fit the network/optimizer of the config (changed layers, "
                          "n_out or optimizer?): %s" % (prefix, _first_line(exc)))
    manager.epoch_step = int(epoch_step.numpy())
    manager._run_state_text = run_state.numpy().decode("utf-8", "replace")
    return int(epoch.numpy())
