"""Layer classes. Importing this package registers all of them (see :func:`base.get_layer_class`)."""
from returnn.tf.layers import base, basic, conv, norm, rec  # noqa: F401
from returnn.tf.layers.base import (  # noqa: F401
    LAYER_CLASSES, Layer, LayerOutput, OutputSpec, RunContext, get_layer_class, register_layer,
)
