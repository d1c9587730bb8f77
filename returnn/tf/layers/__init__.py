"""Layer classes. Importing this package registers all of them (see :func:`base.get_layer_class`).

How to write a layer: docs/architecture.md, "Writing a layer".
"""
from returnn.tf.layers import (  # noqa: F401
    align, attention, axis_ops, base, basic, choice, control, conv, eval_layer, gather, generated, hdf_dump, masked, norm, products, rec, reduce,
    rnn_cell, self_attention, shape, slicing, split_stack, time_edit, transposed_conv,
)
from returnn.tf.layers.base import LAYER_CLASSES, Layer, RunContext, get_layer_class, register_layer  # noqa: F401
from returnn.tf.layers.output import LayerOutput  # noqa: F401
from returnn.tf.layers import (  # noqa: F401,E402  (issue 27: structural layers)
    batch_fold, concat, cum_concat, gradient_ops, indexing, old_layout, rec_access, reshape, resize, sorting, summaries,
    weighted,
)
from returnn.tf.layers import (  # noqa: F401,E402  (issue 27: search/signal/loss layers)
    beam, cond, complex_signal, edit_distance, loss_layers, old_attention, random_layers, segmental, stft, twod_lstm,
    variable_ops,
)
