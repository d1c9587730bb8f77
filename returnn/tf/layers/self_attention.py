"""Multi-head self-attention over the time axis, and relative positional encodings for it.

``self_attention`` (RETURNN's semantics): one matrix ``QKV`` (no bias) maps the (concatenated)
input to queries, keys and values of ``num_heads`` heads (key size ``total_key_dim // num_heads``,
value size ``n_out // num_heads``); queries are scaled by ``key_size ** -0.5``; energies
``q . k`` (plus ``q . key_shift[q, k]`` when ``key_shift`` names a layer of shape (T, T, key_size),
e.g. ``relative_positional_encoding``); keys beyond a sequence's length are masked, or with
``attention_left_only`` every key after the query (a lower-triangular mask, as RETURNN: lengths
are not used then); softmax over keys, ``attention_dropout`` on the weights in training; the
heads' weighted values are concatenated: ``(B, T, n_out)``. Further input axes of size 1 right after the
time axis are dropped (RETURNN's reshape absorbs them).

``relative_positional_encoding``: ``(T, T, n_out)`` without batch axis: entry ``[q, k]`` is row
``clip(k - q, -clipping, clipping) + clipping`` of a learned ``(2 * clipping + 1, n_out)`` matrix
(``fixed``: of sinusoids of the positions ``0 .. 2 * clipping``).

Inside a ``rec`` loop (per-step sources without time axis) ``self_attention`` runs one query per
step against the keys and values of all steps so far (accumulated in its loop state), which is
the same as ``attention_left_only`` over the whole sequence. ``key_shift`` and
``relative_positional_encoding`` need a time axis.

``initial_state: "keep_over_epoch"`` (context carry-over of RETURNN's cross-sentence LMs): the keys
and values the previous training step of the same epoch ended with come before this step's, for
every query and every sequence of the batch (RETURNN does not mask them; the first step of an epoch
starts without them). They are all of that step's keys and values (its carried ones too: the state
grows over the epoch), or with ``restrict_state_to_last_seq`` only that step's own. Without
``attention_left_only`` the keys are masked as RETURNN does, by position ``< seq_len`` over the carried
and the new keys together. Only training steps carry them; when the batch size changes, the step starts
without them (RETURNN fails there). Kept in variables that checkpoints do not store (RETURNN's
``keep_state_*``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import tensorflow as tf

from returnn.errors import NetworkError
from returnn.tensor import Data, Dim
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.generated import positional_encoding
from returnn.tf.layers.helpers import check_sources, dropout, dropout_sources, feature_plan, project_sources
from returnn.tf.layers.options import Option, positive_int, rate
from returnn.tf.layers.rnn_cell import is_step_template

UNSUPPORTED_STATE_OPTIONS = ("state_var_lengths",)
# RETURNN's initial key/value state has no frames: zeros or ones of it (and None) are the same empty state
EMPTY_INITIAL_STATES = (None, 0, 1, "zeros", "ones")
KEEP = "keep_over_epoch"


class _KeptKeysValues:
    """The keys and values a training step ended with, for the next step of the same epoch (a plain
    object: tf.Module does not track these variables, so no checkpoint stores them)."""

    def __init__(self, heads: int, key_size: int, value_size: int):
        self.keys = tf.Variable(tf.zeros([0, heads, 0, key_size]), shape=tf.TensorShape([None, heads, None, key_size]),
                                trainable=False, name="keep_state_k_left")
        self.values = tf.Variable(tf.zeros([0, heads, 0, value_size]),
                                  shape=tf.TensorShape([None, heads, None, value_size]), trainable=False,
                                  name="keep_state_v_left")
        self.epoch = tf.Variable(tf.constant(-1, tf.int64), trainable=False, name="keep_state_epoch")

    def prefix(self, batch: tf.Tensor, ctx: RunContext):
        """The carried (B, H, P, K/H) keys and values; P = 0 outside training, in an epoch's first step
        or when the batch size changed."""
        keys, values = tf.stop_gradient(self.keys.read_value()), tf.stop_gradient(self.values.read_value())

        def empty():
            return tuple(tf.zeros(tf.stack([batch, self.keys.shape[1], 0, var.shape[3]])) for var in (self.keys,
                                                                                                       self.values))
        if not ctx.train:
            return empty()
        usable = tf.logical_and(tf.equal(self.epoch.read_value(), tf.cast(ctx.seed[0], tf.int64)),
                                tf.equal(tf.shape(keys)[0], batch))
        return tf.cond(usable, lambda: (keys, values), empty)

    def keep(self, keys: tf.Tensor, values: tf.Tensor, ctx: RunContext) -> None:
        """Stores a training step's final keys and values (B, H, T, .)."""
        if ctx.train:
            self.keys.assign(tf.stop_gradient(keys))
            self.values.assign(tf.stop_gradient(values))
            self.epoch.assign(tf.cast(ctx.seed[0], tf.int64))


def _batch_time_axes(layer: Layer, dims: Sequence[Dim], data: Data) -> List[int]:
    """Positions of the batch and time dims among ``dims`` (the input without its feature axis)."""
    time = data.time_dim
    if time is None:
        raise NetworkError("%s: needs an input with a time axis (inside rec loops it is not supported yet), got %s"
                           % (layer.desc, data.short_repr()))
    pos = [i for i, d in enumerate(dims) if d.is_batch_dim()] + [i for i, d in enumerate(dims) if d == time]
    # RETURNN reshapes its batch-major, feature-last input to (B, T, heads, -1): further axes right after the
    # time axis are absorbed when they are static of size 1 (its output drops them); others fail there
    rest = [i for i in range(len(dims)) if i not in pos]
    if len(pos) != 2 or any(dims[i].dimension != 1 for i in rest) or any(i < pos[1] for i in rest):
        raise NetworkError("%s: input must be (batch, time, feature) (RETURNN: further axes only of size 1 after the "
                           "time axis), got %s" % (layer.desc, data.short_repr()))
    return pos


@register_layer
class SelfAttentionLayer(Layer):
    """See the module docstring."""

    layer_class = "self_attention"
    ref_options = ("key_shift",)
    options = (
        Option("num_heads", None, "number of attention heads"),
        Option("total_key_dim", None, "key size summed over heads (divisible by num_heads)"),
        Option("key_shift", None, "layer of shape (T, T, key_dim // num_heads) added to the keys per query"),
        Option("forward_weights_init", "glorot_uniform", "init of the QKV matrix"),
        Option("attention_dropout", 0.0, "dropout on the attention weights (training only)"),
        Option("attention_left_only", False, "mask out keys after the query (causal)"),
        Option("initial_state", None, "RETURNN's key/value state at the start: None, 0, 1, 'zeros', 'ones' (the "
                                      "same empty state) or 'keep_over_epoch' (the previous training step's keys "
                                      "and values, see the module docstring)"),
        Option("restrict_state_to_last_seq", False, "with keep_over_epoch: carry only the step's own keys and "
                                                    "values, not those it was given"),
        Option("state_var_lengths", None, "RETURNN's state option: not supported"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        self.has_shift = isinstance(opts.get("key_shift"), str)
        own = list(sources[:-1] if self.has_shift else sources)
        super().__init__(name, opts, own, seed)
        check_sources(self, own)
        if any(s.sparse for s in own):  # RETURNN asserts a feature axis
            raise NetworkError("%s: input %s is sparse (class indices); RETURNN attends over dense frames only: embed "
                               "it first (a linear layer)" % (self.desc, [s.short_repr() for s in own if s.sparse][0]))
        for key in UNSUPPORTED_STATE_OPTIONS:
            if self.opts.get(key) is not None:
                raise NetworkError("%s: option %r is not supported" % (self.desc, key))
        state = self.opt("initial_state")
        if state not in EMPTY_INITIAL_STATES and state != KEEP:
            raise NetworkError("%s: initial_state %r is not supported (RETURNN's key/value state starts without "
                               "frames: None, zeros, ones; or keep_over_epoch)" % (self.desc, state))
        self.heads = positive_int(self.desc, "num_heads", self.opt("num_heads"))
        self.key_dim = positive_int(self.desc, "total_key_dim", self.opt("total_key_dim"))
        self.value_dim = self.require_n_out()
        for key, value in (("total_key_dim", self.key_dim), ("n_out", self.value_dim)):
            if value % self.heads:
                raise NetworkError("%s: %s %i is not divisible by num_heads %i" % (self.desc, key, value, self.heads))
        self.plan = feature_plan(self, own)
        self.step_mode = is_step_template(own)
        if self.step_mode and (self.has_shift or len(self.plan.dims) != 1):
            raise NetworkError("%s: inside a rec loop the input must be (batch, feature) and key_shift is not "
                               "supported, got %s" % (self.desc, [s.short_repr() for s in own]))
        self.bt = [0] if self.step_mode else _batch_time_axes(self, self.plan.dims, own[0])
        if self.has_shift:
            shift = sources[-1]
            if shift.batch_dim_axis is not None or shift.batch_ndim != 3 or shift.dim != self.key_dim // self.heads:
                raise NetworkError("%s: key_shift %r must be (T, T, %i) without batch axis, got %s"
                                   % (self.desc, shift.name, self.key_dim // self.heads, shift.short_repr()))
        if state == KEEP and self.has_shift:  # (RETURNN asserts key_shift's shape (queries, keys) against them)
            raise NetworkError("%s: initial_state keep_over_epoch with key_shift: the carried keys have no "
                               "key_shift entries (RETURNN fails on its shape check)" % self.desc)
        self.kept = _KeptKeysValues(self.heads, self.key_dim // self.heads, self.value_dim // self.heads) \
            if state == KEEP else None
        self.updates_in_training = self.kept is not None
        self.restrict = bool(self.opt("restrict_state_to_last_seq"))
        self.state_refs = ()  # (the loop gives initial_state its run context)
        self.att_dropout = rate(self.desc, "attention_dropout", self.opt("attention_dropout"))
        self.left_only = bool(self.opt("attention_left_only"))
        self.qkv = self.weight("QKV", [sum(self.plan.in_dims), 2 * self.key_dim + self.value_dim],
                               init_option="forward_weights_init")
        dims = self.plan.dims
        if self.step_mode:
            self.output = Data(name, dims=[dims[0], self.out_feature_dim()])
        else:
            self.output = Data(name, dims=[dims[self.bt[0]], dims[self.bt[1]], self.out_feature_dim()], time_dim_axis=1)

    # ---- inside a rec loop
    def initial_state(self, batch: tf.Tensor, n_time: tf.Tensor, values=(), ctx: RunContext = None):
        """Keys and values of the steps so far, (B, H, P + T, K/H) and (B, H, P + T, V/H): the P carried
        ones (keep_over_epoch), then zeros for the T steps; and P."""
        h = self.heads
        keys, vals = tf.zeros([batch, h, n_time, self.key_dim // h]), tf.zeros([batch, h, n_time, self.value_dim // h])
        if self.kept is None:
            return keys, vals, tf.constant(0)
        pk, pv = self.kept.prefix(batch, ctx or RunContext(False))
        return tf.concat([pk, keys], 2), tf.concat([pv, vals], 2), tf.shape(pk)[2]

    def keep_final_state(self, state, ctx: RunContext) -> None:
        """After the loop: its keys and values (the carried ones only without restrict_state_to_last_seq)
        for the next training step."""
        if self.kept is not None:
            keys, values, n_prev = state
            if self.restrict:
                keys, values = keys[:, :, n_prev:], values[:, :, n_prev:]
            self.kept.keep(keys, values, ctx)

    def step(self, sources: List[LayerOutput], state, ctx: RunContext, t: tf.Tensor):
        """One query at step ``t`` against the keys and values of steps ``0..t``."""
        own = dropout_sources(self, sources, ctx)
        x = project_sources(self.plan, own, self.qkv)  # (B, 2K + V)
        h = self.heads
        kh, vh = self.key_dim // h, self.value_dim // h
        x = tf.reshape(x, [-1, h, 2 * kh + vh])
        q, k, v = tf.split(x, [kh, kh, vh], axis=-1)
        keys, values, n_prev = state
        pos = n_prev + t  # the slot of this step, after the carried keys
        at_t = tf.one_hot(pos, tf.shape(keys)[2], dtype=keys.dtype)[None, None, :, None]
        keys = keys * (1.0 - at_t) + k[:, :, None, :] * at_t
        values = values * (1.0 - at_t) + v[:, :, None, :] * at_t
        energy = tf.einsum("bhd,bhtd->bht", q * (kh ** -0.5), keys)
        visible = tf.range(tf.shape(keys)[2]) <= pos
        energy = tf.where(visible[None, None, :], energy, tf.constant(float("-inf"), energy.dtype))
        weights = tf.nn.softmax(energy, axis=-1)
        if self.att_dropout and ctx.train:
            weights = dropout(weights, self.att_dropout, ctx.layer_seed(self.layer_name, 1))
        out = tf.reshape(tf.einsum("bht,bhtd->bhd", weights, values), [-1, self.value_dim])
        return self.make_output(out, own), (keys, values, n_prev)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        if self.step_mode:
            raise NetworkError("%s: on single steps it runs only inside a rec loop" % self.desc)
        own = dropout_sources(self, sources[:len(self.sources)], ctx)
        x = project_sources(self.plan, own, self.qkv)  # plan dims + (2K + V,)
        perm = self.bt + [i for i in range(len(self.plan.dims)) if i not in self.bt] + [len(self.plan.dims)]
        if perm != list(range(len(perm))):
            x = tf.transpose(x, perm)
        shape = tf.shape(x)
        n_b, n_t, h = shape[0], shape[1], self.heads
        kh, vh = self.key_dim // h, self.value_dim // h
        x = tf.transpose(tf.reshape(x, [n_b, n_t, h, 2 * kh + vh]), [0, 2, 1, 3])  # (B, H, T, 2K/H + V/H)
        q, k, v = tf.split(x, [kh, kh, vh], axis=-1)
        q = q * (kh ** -0.5)
        n_prev = 0
        if self.kept is not None:  # the carried keys and values first (RETURNN: concatenated, never masked)
            pk, pv = self.kept.prefix(n_b, ctx)
            n_prev = tf.shape(pk)[2]
            k, v = tf.concat([pk, k], 2), tf.concat([pv, v], 2)
            self.keep_final_state((k, v, n_prev), ctx)
        energy = tf.matmul(q, k, transpose_b=True)  # (B, H, Tq, P + Tk)
        if self.has_shift:
            energy += tf.einsum("bhqd,qkd->bhqk", q, sources[-1].tensor)
        if self.left_only:
            mask = tf.linalg.band_part(tf.ones([n_t, n_t], tf.bool), -1, 0)
            mask = tf.concat([tf.ones([n_t, n_prev], tf.bool), mask], 1)[None, None]
        else:  # (RETURNN: by position < seq_len over the carried and new keys together)
            seq_len = own[0].seq_len
            if seq_len is None:  # a static time axis: every sequence has all its frames
                seq_len = tf.fill([n_b], n_t)
            mask = tf.sequence_mask(seq_len, maxlen=n_prev + n_t)[:, None, None, :]
        energy = tf.where(mask, energy, tf.constant(float("-inf"), energy.dtype))
        weights = tf.nn.softmax(energy, axis=-1)
        if self.att_dropout and ctx.train:
            weights = dropout(weights, self.att_dropout, ctx.layer_seed(self.layer_name, 1))
        out = tf.matmul(weights, v)  # (B, H, T, V/H)
        out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [n_b, n_t, self.value_dim])
        return self.make_output(out, own)


@register_layer
class RelativePositionalEncodingLayer(Layer):
    """See the module docstring."""

    layer_class = "relative_positional_encoding"
    options = (
        Option("clipping", 16, "relative distances beyond this share the last encoding"),
        Option("fixed", False, "sinusoids instead of a learned matrix"),
        Option("forward_weights_init", "glorot_uniform", "init of the learned encoding matrix"),
        Option("query_spatial_dim", None, "RETURNN's option: only the default (the input's time axis)"),
        Option("key_value_spatial_dim", None, "RETURNN's option: only the default (the input's time axis)"),
        Option("query_offset", None, "RETURNN's option: only the default (0)"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources)
        for key in ("query_spatial_dim", "key_value_spatial_dim", "query_offset"):
            if self.opts.get(key) is not None:
                raise NetworkError("%s: option %r is not supported (only its default)" % (self.desc, key))
        time = sources[0].time_dim
        if time is None:
            raise NetworkError("%s: needs an input with a time axis (inside rec loops it is not supported yet), "
                               "got %s" % (self.desc, sources[0].short_repr()))
        self.clipping = positive_int(self.desc, "clipping", self.opt("clipping"))
        self.channels = self.require_n_out()
        self.fixed = bool(self.opt("fixed"))
        if self.fixed:
            from returnn.tf.layers.generated import check_encoding_channels
            check_encoding_channels(self.desc, self.channels)
        self.matrix = None if self.fixed else self.weight(
            "encoding_matrix", [2 * self.clipping + 1, self.channels], init_option="forward_weights_init")
        self.key_time = Dim(None, description="%s:key-time" % name, derived_from=time)
        self.output = Data(name, dims=[time, self.key_time, self.out_feature_dim()], time_dim_axis=0)

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        x = sources[0]
        n_t = tf.shape(x.tensor)[x.data.time_dim_axis]
        pos = tf.range(n_t)
        index = tf.clip_by_value(pos[None, :] - pos[:, None], -self.clipping, self.clipping) + self.clipping
        table = self.matrix if self.matrix is not None else \
            positional_encoding(tf.range(2 * self.clipping + 1), self.channels)
        return self.make_output(tf.gather(table, index), sources, {self.key_time: x.seq_len})
