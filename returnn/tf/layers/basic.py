"""Basic layers: linear, softmax, copy, dropout, activation, combine, source."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.activations import get_activation, get_activation_with_opts
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.common_layout import (check_broadcast, common_dims, layer_layout, merge_added_axes,
                                            returnn_common_order)
from returnn.tf.layers.helpers import (
    check_sources, concat_inputs, concat_output, dropout_scale, dropout_sources, feature_plan, last_axis_bias,
    noise_broadcast_axes, plan_output, project_sources,
)
from returnn.tf.layers.options import Option, one_of
from returnn.tf.layers.output import align_tensor
from returnn.tf.layers.packed import has_frame_sizes, pack, packable
from returnn.tf.util.data_check import same_extents
from returnn.tf.util.dense import matmul_2d

LOGIT_ACTIVATIONS = ("softmax", "log_softmax")


@register_layer
class LinearLayer(Layer):
    """``activation(concat(sources) @ W + b)`` on the feature axis; sparse sources are embedded
    (row lookup in W); sources without some axis (e.g. time) broadcast over it."""

    layer_class = "linear"
    aliases = ("hidden", "forward")  # old names
    options = (
        Option("activation", None, "activation after the linear map, e.g. 'relu', '2*sigmoid'"),
        Option("with_bias", True, "add a bias"),
        Option("forward_weights_init", "glorot_uniform", "init of the weights (RETURNN init spec)"),
        Option("bias_init", 0.0, "init of the bias (RETURNN init spec)"),
        Option("use_transposed_weights", False, "store W as (n_out, n_in) (e.g. to share it with an embedding)"),
        Option("grad_filter", None, "threshold: a sequence whose gradient at the pre-activation values has a "
                                    "max(grad ** 2) over its frames and features >= it gets none (RETURNN's)"),
    )

    def _taken_over_dim(self, sources: Sequence[Data], n_out: int) -> Optional[Dim]:
        """RETURNN (its layers' default output): without ``out_dim``, the (first largest) source's feature or
        sparse dim when it has the size ``n_out``, instead of a new one."""
        if self.opts.get("out_dim") is not None:
            return None
        base = [s for s in sources if s.batch_ndim == max(x.batch_ndim for x in sources)][0]
        dim = base.sparse_dim if base.sparse else base.feature_dim if base.feature_dim_axis is not None else None
        return dim if dim is not None and dim.dimension == n_out else None

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.plan = feature_plan(self, sources)
        n_out = self.require_n_out()
        self.activation_name = self.opt("activation")
        self.activation = get_activation(self.activation_name, name)
        self.transposed = bool(self.opt("use_transposed_weights"))
        shape = [sum(self.plan.in_dims), n_out]
        self.W = self.weight("W", shape[::-1] if self.transposed else shape, init_option="forward_weights_init")
        if not self.opt("with_bias") and self.opts.get("bias_init"):  # RETURNN (since 2017): assert not bias_init
            raise NetworkError("%s: bias_init %r with with_bias False (RETURNN asserts)" % (self.desc, self.opts["bias_init"]))
        self.bias = self.weight("b", [n_out], 0.0, init_option="bias_init") if self.opt("with_bias") \
            else None
        self.output = plan_output(name, self.plan, self._taken_over_dim(sources, n_out) or self.out_feature_dim())
        # one dense source with its feature axis last, laid out as the output: one flat matmul and
        # bias_add, which grappler fuses (with relu) into one kernel; measured 5% off a feed-forward step
        src = sources[0]
        self.flat = len(sources) == 1 and not src.sparse and src.feature_dim_axis == src.batch_ndim - 1 \
            and list(self.plan.maps[0]) == list(range(len(self.plan.dims)))
        self.grad_filter = self.opt("grad_filter")
        if self.grad_filter is not None and (isinstance(self.grad_filter, bool) or
                                             not isinstance(self.grad_filter, (int, float))):
            raise NetworkError("%s: grad_filter must be a number, got %r" % (self.desc, self.grad_filter))
        # (batch, time, feature) with padding: computed on the real frames only (grad_filter: per sequence)
        self.packs = self.flat and packable(src) and not self.grad_filter

    sampled_loss = False  # set by a sampled loss on this layer (returnn/tf/sampling.py): it reads the input

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        out = self._forward(sources, ctx)
        if self.sampled_loss:
            out.sampling_inputs = self._sampling_inputs(sources[0], out, ctx)
        return out

    def _sampling_inputs(self, src: LayerOutput, out: LayerOutput, ctx: RunContext):
        """For a sampled loss: the input after this layer's dropout (the same mask), as the real
        frames' rows when the output has them, and the step's seed for the candidates."""
        from returnn.tf.sampling import SamplingInputs
        rows = out.packed
        if rows is not None:
            values = rows.gather(src.tensor) if src.packed is None else src.packed.values
        else:
            values = src.tensor
        if self.dropout and ctx.train:
            shape = [1] * (src.data.batch_ndim - 1) + [self.plan.in_dims[0]]
            if self._folds_dropout(src, ctx):  # the mask the forward pass folded into W
                values = values * tf.reshape(dropout_scale(shape, self.dropout, ctx.layer_seed(self.layer_name, 0),
                                                           values.dtype), [-1])
            elif rows is None:
                values = self.apply_dropout(src, ctx).tensor
            else:
                raise NetworkError("%s: a sampled loss with this dropout_noise_shape is not supported here" % self.desc)
        seq_len = src.seq_len if rows is None and src.data.have_time_axis() else None
        return SamplingInputs(values, seq_len, rows, ctx.layer_seed(self.layer_name, 1))

    def _forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.packs and has_frame_sizes(sources[0]):
            return self._forward_packed(sources[0], ctx)
        if self.flat:
            src, w = self._input_and_weights(sources[0], ctx)
            # padded frames: RETURNN computes them from its input's padded frames (a zero frame, unless computed)
            x = src.as_read()
            y, shape, static = self._project_flat(x, w)

            def unflat(t: tf.Tensor) -> tf.Tensor:
                t = tf.reshape(t, shape)
                t.set_shape(static)
                return t
            if self.grad_filter:
                y = self._filter_grad(unflat(y))
                logits = y if self.activation_name in LOGIT_ACTIVATIONS else None
                return self.make_output(self.activation(y), sources, logits=logits)
            logits = unflat(y) if self.activation_name in LOGIT_ACTIVATIONS else None
            return self.make_output(unflat(self.activation(y)), sources, logits=logits)
        sources = dropout_sources(self, sources, ctx)
        x = project_sources(self.plan, sources, tf.transpose(self.W) if self.transposed else self.W)
        if self.bias is not None:
            x = x + self.bias
        if self.grad_filter:
            x = self._filter_grad(x)
        logits = x if self.activation_name in LOGIT_ACTIVATIONS else None
        return self.make_output(self.activation(x), sources, logits=logits)

    def _project_flat(self, x: tf.Tensor, w: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.TensorShape]:
        """``x`` (..., F) times ``w`` plus the bias as one flat (N, n_out) matmul; also the output's
        dynamic and static shape (x's leading axes, n_out) to reshape it back."""
        n_out = self.output.dim
        y = matmul_2d(tf.reshape(x, [-1, self.plan.in_dims[0]]), w)
        if self.bias is not None:
            y = tf.nn.bias_add(y, self.bias)
        return y, tf.concat([tf.shape(x)[:-1], [n_out]], 0), x.shape[:-1].concatenate([n_out])

    def _filter_grad(self, x: tf.Tensor) -> tf.Tensor:
        """RETURNN's ``filter_grad`` on the pre-activation values: identity; the gradient of a
        sequence (batch entry) is zeroed when its max(grad ** 2) reaches ``grad_filter``."""
        batch_axis = self.output.batch_dim_axis
        axes = [a for a in range(self.output.batch_ndim) if a != batch_axis]
        threshold = float(self.grad_filter)

        @tf.custom_gradient
        def filtered(t):
            def grad(g):
                keep = tf.reduce_max(tf.square(g), axis=axes, keepdims=True) < threshold
                return tf.where(keep, g, tf.zeros_like(g))
            return tf.identity(t), grad
        return filtered(x)

    def _folds_dropout(self, src: LayerOutput, ctx: RunContext) -> bool:
        """Input dropout whose mask is shared by all frames (RETURNN's default noise shape) is a
        factor per input feature: applied to the rows of W (n_in x n_out numbers) instead of to
        every frame of the input (frames x n_in), in the forward and the backward pass."""
        data = src.data
        return bool(self.dropout) and ctx.train and \
            noise_broadcast_axes(self, data) == [a for a in range(data.batch_ndim) if a != data.feature_dim_axis]

    def _input_and_weights(self, src: LayerOutput, ctx: RunContext) -> Tuple[LayerOutput, tf.Tensor]:
        """The source after input dropout and W as (n_in, n_out); a dropout mask that folds in
        scales W's rows (the same draw apply_dropout makes) and leaves the source as it is."""
        w = tf.transpose(self.W) if self.transposed else tf.convert_to_tensor(self.W)
        if not self._folds_dropout(src, ctx):
            return self.apply_dropout(src, ctx), w
        shape = [1] * (src.data.batch_ndim - 1) + [self.plan.in_dims[0]]
        scale = dropout_scale(shape, self.dropout, ctx.layer_seed(self.layer_name, 0), w.dtype)
        return src, w * tf.reshape(scale, [-1, 1])

    def _forward_packed(self, src: LayerOutput, ctx: RunContext) -> LayerOutput:
        """The flat case on the real frames only (see packed.py): the output keeps its rows."""
        computed_padding = src.computed_padding
        src, w = self._input_and_weights(src.with_tensor(src.tensor, packed=pack(src)), ctx)
        rows = src.packed
        y = matmul_2d(rows.values, w)
        if self.bias is not None:
            y = tf.nn.bias_add(y, self.bias)
        out = rows.like(self.activation(y), y if self.activation_name in LOGIT_ACTIVATIONS else None)
        static = src.tensor.shape[:2]
        # padded frames: what the layer computes from its input's padded frames, as RETURNN on the padded tensor:
        # one row for all of them where the input's is one row (the fill of a packed linear before; extern data's
        # zero frame, as datasets pad), else from the whole padded input (e.g. an activation's or a norm's values
        # there, which RETURNN does not mask; only computed where a layer reads the padded tensor)
        if rows.fill is None and computed_padding:
            dense, shape, dense_static = self._project_flat(src.tensor, w)
            dense = tf.reshape(dense, shape)
            dense.set_shape(dense_static)
            logits = dense if out.logits is not None else None
            return self.make_output(self.activation(dense), [src], logits=logits, packed=out)
        fill = rows.fill if rows.fill is not None else tf.zeros([1, rows.values.shape[-1]], y.dtype)
        pad = matmul_2d(tf.cast(fill, y.dtype), w)
        if self.bias is not None:
            pad = tf.nn.bias_add(pad, self.bias)
        out.fill = self.activation(pad)
        logits = None if out.logits is None else out.unpack(out.logits, static, pad)
        return self.make_output(out.unpack(out.values, static, out.fill), [src], logits=logits, packed=out)


@register_layer
class SoftmaxLayer(LinearLayer):
    """Linear layer with default activation ``softmax``; ``logits`` holds the pre-softmax values."""

    layer_class = "softmax"
    options = (Option("activation", "softmax", "activation after the linear map; RETURNN refuses another one since "
                                               "September 2021 (refused here with a behavior_version)"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        from returnn.tf.layers.norm import behavior_version
        if "activation" in opts and behavior_version() >= 1:  # RETURNN: "multiple values for 'activation'"
            raise NetworkError("layer %r (softmax): 'activation' is refused, as RETURNN does since 2021 (its softmax "
                               "layer always applies softmax; use a linear layer)" % name)
        super().__init__(name, opts, sources, seed)


@register_layer
class CopyLayer(Layer):
    """Identity, or feature-concatenation of several sources."""

    layer_class = "copy"
    aliases = ("identity",)
    options = (Option("extra_deps", None, "layer name(s) built and run whenever this layer runs (their values "
                                          "unused: e.g. print or hdf_dump layers), as RETURNN's control dependencies"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        self.output, self.plan = concat_output(self, sources)
        self.check_n_out(self.output.dim)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.output, self.plan, sources, ctx)
        return self.make_output(x.tensor, sources, logits=x.logits)


@register_layer
class DropoutLayer(CopyLayer):
    """Copy layer whose purpose is the ``dropout`` option (applied in training only)."""

    layer_class = "dropout"


def _keeps_int32(fn) -> bool:
    """Whether activation ``fn`` runs on int32 values and gives int32 (e.g. relu, abs, square, sign)."""
    try:
        with tf.init_scope():
            return fn(tf.constant([1, -2], tf.int32)).dtype == tf.int32
    except Exception:  # noqa: BLE001 - no int32 kernel or signature: TensorFlow's many error types
        return False


@register_layer
class ActivationLayer(CopyLayer):
    """Applies ``activation`` to the (concatenated) input; softmax-like activations act on
    the feature axis, which is moved last first (as in RETURNN). Sparse input (class indices): the
    function on the int32 values, the output sparse as the input (RETURNN's template), e.g. ``square``
    or ``abs``; functions without an int32 result are refused (RETURNN fails on them)."""

    layer_class = "activation"
    options = (Option("activation", None, "activation function name, e.g. 'relu' or '1-sigmoid'"),
               Option("opts", None, "keyword arguments of the activation function, e.g. {'eps': 1e-10} for safe_log"),
               Option("extra_deps", None, "not an option of RETURNN's activation layer (copy's)", only=(None,)))

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.activation_name = self.opt("activation")
        if not self.activation_name:  # RETURNN's activation layer has no default: its "+" split fails on None
            raise NetworkError("%s: needs 'activation' (a name such as 'relu'; RETURNN has no default)" % self.desc)
        self.activation = get_activation_with_opts(self.activation_name, self.opt("opts"), name)
        if any(s.sparse for s in sources) and not _keeps_int32(self.activation):
            # RETURNN applies it to the class indices and keeps the sparse int32 template: it fails where the
            # function has no int32 kernel or gives another dtype
            raise NetworkError("%s: activation %r on sparse input (int32 class indices) is refused: it does not map "
                               "int32 to int32 (RETURNN fails on it)" % (self.desc, self.activation_name))
        self.input_data, self.perm = self.output, None
        feat = self.output.feature_dim_axis
        if "softmax" in str(self.activation_name) and feat is not None and feat != self.output.batch_ndim - 1:
            self.perm = [a for a in range(self.output.batch_ndim) if a != feat] + [feat]
            self.output = self.output.copy_transpose(self.perm)
        if self.activation_name in ("abs", "angle") and self.output.dtype == "complex64":
            self.output = self.output.copy(dtype="float32")  # RETURNN: the magnitude / phase of a complex input

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = concat_inputs(self, self.input_data, self.plan, sources, ctx)
        tensor = x.tensor if self.perm is None else tf.transpose(x.tensor, self.perm)
        logits = tensor if self.activation_name in LOGIT_ACTIVATIONS else None
        return self.make_output(self.activation(tensor), sources, logits=logits)


# Binary ops of ``combine`` (RETURNN maps ``kind`` to the tf.math function of that name).
COMBINE_OPS = {
    "add": tf.add, "+": tf.add, "average": tf.add,
    "sub": tf.subtract, "subtract": tf.subtract, "-": tf.subtract,
    "mul": tf.multiply, "multiply": tf.multiply, "*": tf.multiply,
    "truediv": tf.math.truediv, "/": tf.math.truediv, "floordiv": tf.math.floordiv, "//": tf.math.floordiv,
    "maximum": tf.maximum, "minimum": tf.minimum, "squared_difference": tf.math.squared_difference,
    "logical_and": tf.logical_and, "logical_or": tf.logical_or,
}
COMBINE_KINDS = tuple(COMBINE_OPS)
_INDEX_KINDS = ("add", "+", "sub", "subtract", "-", "mul", "multiply", "*", "floordiv", "//", "maximum", "minimum")


@register_layer
class CombineLayer(Layer):
    """Elementwise ``kind`` of the sources (left to right), broadcast over the axes some of them
    lack (matched by dim tags), then ``activation``. Sparse sources (all of them) combine their
    class indices, the result has the class dim of the first source with the most axes (RETURNN's
    common template)."""

    layer_class = "combine"
    keeps_source_data_name = True  # RETURNN's get_common_data of one source
    options = (
        Option("kind", "add", "add, sub, mul, average, truediv, maximum, minimum, squared_difference, ..."),
        Option("activation", None, "activation after combining"),
        Option("allow_broadcast_all_sources", None, "True: sources may all need broadcasting; False: refused; None: "
                                                    "refused from behavior version 4"),
        Option("with_bias", False, "add a trainable bias 'b' (zeros) on the feature axis before the activation"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        self.kind = one_of(self.desc, "kind", self.opt("kind"), COMBINE_KINDS)
        # (RETURNN: copy_compatible_to(check_sparse=False): sparse and dense sources of one dtype combine; the
        # output is the common template's, the first largest source's)
        if len({s.dtype for s in sources}) > 1:  # RETURNN: copy_compatible_to(output) asserts the dtype of each
            raise NetworkError("%s: sources of different dtypes %s (RETURNN asserts each source's dtype is the "
                               "output's); cast first" % (self.desc, ", ".join("%s %s" % (s.name, s.dtype)
                                                                             for s in sources)))
        base_sparse = sources[max(range(len(sources)), key=lambda i: (sources[i].batch_ndim, -i))].sparse
        if base_sparse and (self.kind not in _INDEX_KINDS or self.opt("activation") is not None):
            raise NetworkError("%s: on sparse sources (class indices) only kinds %s without activation keep "
                               "indices (got kind %r, activation %r)" % (self.desc, ", ".join(_INDEX_KINDS),
                                                                         self.kind, self.opt("activation")))
        # RETURNN's get_common_data: the layout of the first source with the most axes, the others'
        # axes matched into it (new ones where RETURNN inserts them); its special axes kept where they were set
        # explicitly, else RETURNN's default rule on the common axes picks the feature axis
        base = max(range(len(sources)), key=lambda i: (sources[i].batch_ndim, -i))
        order = [base] + [i for i in range(len(sources)) if i != base]
        unit = _broadcast_unit_features(sources)
        try:
            dims, maps = common_dims([unit[i] for i in order])
            added = dims[sources[base].batch_ndim:]
            dims, maps = merge_added_axes(self, *returnn_common_order(sources[base], dims, maps), added)
            maps, own_error = [maps[order.index(i)] for i in range(len(sources))], None
        except NetworkError as exc:  # where RETURNN's template maps every source, it builds it
            dims, maps, own_error = None, None, exc
        try:
            dims, self.maps, theirs = layer_layout(self, sources, dims, maps)
        except (ValueError, NetworkError):
            if own_error is not None:  # (RETURNN fails too: this engine's refusal says more)
                raise own_error from None
            raise
        check_broadcast(self, [unit[i] for i in order], dims, [[p for p in self.maps[i] if p >= 0] for i in order])
        special = {}
        for key in ("feature_dim_axis", "time_dim_axis"):  # RETURNN's template's, else the first largest source's
            axis = getattr(theirs if theirs is not None else sources[base], "_" + key)
            special[key] = self.maps[base][axis] if theirs is None and isinstance(axis, int) else axis
        # sparse sources (RETURNN computes on the indices): the first largest source's class dim and dtype
        self.output = Data(name, dims=dims, dtype=sources[base if base_sparse else 0].dtype,
                           sparse_dim=sources[base].sparse_dim, **special)
        if self.kind in ("truediv", "/") and self.output.dtype.startswith(("int", "uint")):
            raise NetworkError("%s: kind %r of %s sources gives floats, and RETURNN's template keeps %s (its raw "
                               "tensor check: 'dtype does not match'); cast first, or use floordiv"
                               % (self.desc, self.kind, self.output.dtype, self.output.dtype))
        self.check_n_out(self.output.dim)
        self.activation = get_activation(self.opt("activation"), name)
        self.bias = last_axis_bias(self, self.output) if self.opt("with_bias") else None

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        sources = dropout_sources(self, sources, ctx)
        n = self.output.batch_ndim
        xs = same_extents(self.desc, [align_tensor(s.tensor, m, n) for s, m in zip(sources, self.maps)],
                          self.output.dims)
        y = xs[0]
        for x in xs[1:]:
            y = COMBINE_OPS[self.kind](y, x)
        if self.kind == "average":
            y = y / float(len(xs))
        if self.bias is not None:
            y = y + self.bias
        return self.make_output(self.activation(y), sources)


@register_layer
class SourceLayer(Layer):
    """Outputs the data entry ``data_key`` unchanged (the network passes it as the only source)."""

    layer_class = "source"
    options = (Option("data_key", "data", "the data key to output"),)

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        self.output = sources[0].copy(name)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return self.make_output(self.apply_dropout(sources[0], ctx).tensor, sources)


def _broadcast_unit_features(sources: Sequence[Data]) -> List[List[Dim]]:
    """The sources' dims, where a feature axis of size 1 stands for the other sources' feature
    axis (RETURNN broadcasts it, e.g. a per-frame log-probability added to per-label ones; only before
    behavior version 11: its get_common_data's ``broadcast_matches``; from then on it is an axis of its own)."""
    from returnn.tf.layers.norm import behavior_version
    if behavior_version() >= 11:
        return [list(s.dims) for s in sources]
    wide = {s.dims[s.feature_dim_axis] for s in sources if s.feature_dim_axis is not None and s.dim != 1}
    out = []
    for s in sources:
        dims = list(s.dims)
        unit = s.feature_dim_axis is not None and s.dim == 1
        if len(wide) == 1 and unit and not _has_axis_like(s, next(iter(wide))):
            dims[s.feature_dim_axis] = next(iter(wide))
        out.append(dims)
    return out


def _has_axis_like(source: Data, wide: Dim) -> bool:
    """Whether ``source`` has another axis that RETURNN's get_common_data takes for ``wide`` (it, or a static one of
    its size): its size-1 feature axis then broadcasts as any size-1 axis (taking ``wide`` too would put two of its
    axes on one)."""
    return any(d == wide or (d.dimension == wide.dimension and not d.is_batch_dim())
               for i, d in enumerate(source.dims) if i != source.feature_dim_axis)


# RETURNN's API for layer classes defined in configs (``from returnn.tf.layers.basic import LayerBase,
# register_layer_class``): see returnn/tf/layers/config_layer.py
from returnn.tf.layers.config_layer import (LayerBase, _ConcatInputLayer, auto_register_layer_classes,  # noqa: E402,F401
                                            get_concat_sources_data_template, register_layer_class)


def __getattr__(name: str) -> Any:
    """RETURNN's API for loss classes defined in configs (``Loss``, ``OutputWithActivation``,
    ``_LossClassDict``, ``get_loss_class``), from returnn/tf/config_loss.py (imported on first use:
    it needs the engine's losses, which need this package); RETURNN's layer class names (``EvalLayer``)
    as the engine's layer classes (returnn/tf/layers/catalog.py)."""
    if name in ('Loss', 'OutputWithActivation', '_LossClassDict', 'get_loss_class'):
        from returnn.tf import config_loss
        return getattr(config_loss, name)
    if name.endswith("Layer"):  # RETURNN's layer class names (EvalLayer, ...): the engine's classes
        from returnn.tf.layers.catalog import layer_class_by_returnn_name
        cls = layer_class_by_returnn_name(name)
        if cls is not None:
            return cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
