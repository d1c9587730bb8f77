"""What a checkpoint file holds, by name: RETURNN's layout, readable by RETURNN and by this engine.

A checkpoint ``<model>.NNN`` (``.index`` + ``.data-00000-of-00001``, TensorFlow's V2 format) maps
names to arrays, as RETURNN's TF1 ``Saver`` writes them:

- the network's parameters under RETURNN's names and layouts (:mod:`returnn.tf.returnn_params`),
  and ``global_step`` (int64): all RETURNN reads when it loads or continues a model;
- optimizer state: per parameter ``<param>/<slot>`` as TensorFlow's v1 optimizers name their slots
  (Adam: ``<param>/Adam``, ``<param>/Adam_1``, ``beta1_power``, ``beta2_power``), which RETURNN
  ignores unless it saves its own (``debug_save_updater_vars``);
- this engine's resume state under ``_engine/`` (``epoch``, ``epoch_step``, ``run_state``, the
  optimizer's ``iterations`` and ``learning_rate``): no RETURNN layer scope starts with ``_``
  (RETURNN writes such a layer name as ``.95.``), and RETURNN's loader skips names it does not know.

Next to the ``.index`` and data files a ``.meta`` file is written: RETURNN's ``load`` and
``import_model_train_epoch1`` accept a checkpoint only when ``<prefix>.meta`` exists (its TF1
graph file; RETURNN never reads it). Ours is a valid ``MetaGraphDef`` without a graph, tagged
:data:`META_TAG`; this engine does not need it (the ``.index`` marks a complete checkpoint).

A RETURNN checkpoint has the first group only: its epoch comes from the file name
(``model.NNN``, ``model.pretrain.NNN``), optimizer state starts fresh (as in RETURNN, whose
checkpoints do not keep it), the run state is empty. Checkpoints of earlier versions of this engine
(TensorFlow object checkpoints, ``network/layers/...``) are recognised as ``legacy`` and still read.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Mapping, Optional

import numpy as np
import tensorflow as tf

ENGINE = "_engine/"
EPOCH_KEY = ENGINE + "epoch"
EPOCH_STEP_KEY = ENGINE + "epoch_step"
RUN_STATE_KEY = ENGINE + "run_state"
ITERATIONS_KEY = ENGINE + "optimizer/iterations"
LEARNING_RATE_KEY = ENGINE + "optimizer/learning_rate"
GLOBAL_STEP_KEY = "global_step"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"  # TensorFlow object checkpoints (legacy format here)
LEGACY_EPOCH_KEY = "epoch/.ATTRIBUTES/VARIABLE_VALUE"
META_TAG = "returnn-layout checkpoint without graph"
_EPOCH_NAME_RE = re.compile(r"\.(?:pretrain\.)?(\d{3,})$")


def write_named(prefix: str, values: Mapping[str, Any]) -> None:
    """Writes ``values`` (name -> array, number or str) as a V2 checkpoint at ``prefix``."""
    names = sorted(values)
    tensors = [tf.constant(values[n]) if not isinstance(values[n], tf.Tensor) else values[n] for n in names]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)


def write_meta(prefix: str) -> None:
    """Writes ``<prefix>.meta``: a ``MetaGraphDef`` holding no graph (see the module docstring)."""
    from tensorflow.core.protobuf import meta_graph_pb2
    meta = meta_graph_pb2.MetaGraphDef()
    meta.meta_info_def.tensorflow_version = tf.__version__
    meta.meta_info_def.tags.append(META_TAG)
    with open(prefix + ".meta", "wb") as f:
        f.write(meta.SerializeToString())


def is_legacy(shapes: Mapping[str, Any]) -> bool:
    """Whether a checkpoint (its variable-to-shape map) is a TensorFlow object checkpoint of an
    earlier version of this engine."""
    return OBJECT_GRAPH_KEY in shapes and any(k.startswith("network/") for k in shapes)


def is_own(shapes: Mapping[str, Any]) -> bool:
    """Whether this engine wrote the checkpoint (it has the resume state); else RETURNN did."""
    return EPOCH_KEY in shapes or is_legacy(shapes)


def epoch_from_filename(prefix: str) -> Optional[int]:
    """``/x/model.003`` or ``/x/model.pretrain.003`` -> 3; None for other names."""
    match = _EPOCH_NAME_RE.search(os.path.basename(prefix))
    return int(match.group(1)) if match else None


def stored_epoch(reader, prefix: str) -> int:
    """The epoch a checkpoint was saved after: its own record, else its file name's number, else 0."""
    shapes = reader.get_variable_to_shape_map()
    if EPOCH_KEY in shapes:
        return int(reader.get_tensor(EPOCH_KEY))
    if LEGACY_EPOCH_KEY in shapes:
        return int(reader.get_tensor(LEGACY_EPOCH_KEY))
    return epoch_from_filename(prefix) or 0


def as_text(value: Any) -> str:
    """A stored string scalar as text."""
    if isinstance(value, np.ndarray):
        value = value.item()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
