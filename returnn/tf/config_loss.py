"""Loss classes defined in configs with RETURNN's API, run as losses of this engine.

A config (or a module it imports) writes, RETURNN's way::

    from returnn.tf.layers.basic import Loss, _LossClassDict   # also TFNetworkLayer, returnn.tf.layers.base

    class WeightedCE(Loss):
        class_name = "weighted_ce"

        def __init__(self, weight=1.0, **kwargs):
            super().__init__(**kwargs)
            self.weight = weight

        def get_value(self):
            logits = self.output_before_softmax_flat    # (frames, classes): the real frames only
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=self.target_flat, logits=logits)
            return self.reduce_func(ce * self.weight)

    _LossClassDict["weighted_ce"] = WeightedCE         # then "loss": "weighted_ce", "loss_opts": {"weight": 2.0}

How RETURNN finds them: ``get_loss_class(name)`` looks in its ``_LossClassDict``, which it fills
once with the loss classes of its own module; a config's subclass is found only when the config
puts it there (``auto_register_layer_classes`` registers layers, not losses). The same here: an
entry in :data:`_LossClassDict` (it may replace a built-in name, as in RETURNN); a subclass with
a ``class_name`` that is not registered is an unknown loss whose error says how to register it.

What the adapter (:class:`ConfigLoss`) does per step function (training and evaluation, traced
once each): builds a fresh instance of the class from the ``loss_opts`` (after its
``transform_config_dict``), calls its ``init`` with the layer's output and the target as RETURNN's
``Data`` carrying their values (batch-major, feature last), then ``get_value()`` and
``get_error()``. The value is RETURNN's summed loss; the reported score divides by the inverse of
``loss_norm_factor`` (default the target's frames), as does ``use_normalized_loss`` for the
objective; ``scale`` multiplies the objective. The attributes RETURNN's ``Loss.init`` sets are set
the same way (``output``, ``output_with_activation``, ``output_flat`` or, for a softmax output,
``output_before_softmax_flat``, ``target``, ``target_flat``, ``output_seq_lens``,
``target_seq_lens``, ``loss_norm_factor``, ``layer``, ``base_network``); the flat values hold the
real frames only (``use_flatten_frames``, the default), or all frames with ``reduce_func`` masking
the padded ones (``use_flatten_frames`` False). ``self.layer`` has ``name``, ``network``,
``output``, ``output_before_activation`` and ``params`` (the layer's parameters by RETURNN's name).
Not supported (one line): ``custom_inv_norm_factor`` (a layer), ``get_layer`` in
``transform_config_dict``, outputs other than (batch, [time,] [feature]).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Optional, Type

import tensorflow as tf

from returnn.errors import NetworkError, known_list
from returnn.tf import losses as engine_losses
from returnn.tf.layers.output import LayerOutput


class OutputWithActivation:
    """RETURNN's: ``x`` before the activation ``act_func``, ``y`` after it."""

    def __init__(self, x: tf.Tensor, act_func: Optional[Callable] = None, y: Optional[tf.Tensor] = None):
        self.x, self.act_func = x, act_func
        self.y = y if y is not None else (act_func(x) if act_func is not None else x)

    def is_softmax_act_func(self) -> bool:
        return self.act_func is tf.nn.softmax

    def get_logits(self) -> tf.Tensor:
        if self.act_func in (tf.nn.softmax, tf.nn.log_softmax):
            return self.x
        raise ValueError("no logits: activation %r" % (self.act_func,))

    def get_log_output(self) -> tf.Tensor:
        if self.act_func in (tf.nn.softmax, tf.nn.log_softmax):
            return tf.nn.log_softmax(self.x)
        from returnn.tf.util.basic import safe_log
        return safe_log(self.y)


class _NetworkView:
    """What RETURNN's ``TFNetwork`` gives a loss class here (``base_network``, ``layer.network``)."""

    def __init__(self, desc: str, train: bool):
        self._desc, self.train_flag = desc, train
        self.search_flag, self.eval_flag = False, True

    def get_config(self):
        from returnn.config import get_global_config
        return get_global_config()

    def get_layer(self, name: str) -> Any:
        raise NetworkError("%s: get_layer(%r) from a config's loss class is not supported here" % (self._desc, name))

    def is_inside_rec_layer(self) -> bool:
        return False


class _LayerView:
    """The loss's layer as RETURNN's loss classes see it (``self.layer``)."""

    def __init__(self, name: str, network: _NetworkView, output: Any, before: Optional[OutputWithActivation],
                 params: Dict[str, tf.Variable]):
        self.name, self.network, self.output = name, network, output
        self.output_before_activation, self.params = before, params

    def __repr__(self) -> str:
        return "<layer %r>" % self.name


_DEFAULT_NORM = object()  # the norm the engine counted (RETURNN's 1 / frames), unless init changes it


class Loss:
    """RETURNN's ``Loss`` base class for loss classes defined in configs (see the module docstring)."""

    class_name: Optional[str] = None
    recurrent = False  # False: frame-wise (output and target frames correspond)
    need_target = True
    _check_output_before_softmax = True

    def __init__(self, base_network: Any, use_flatten_frames: bool = True, use_normalized_loss: bool = False,
                 custom_norm_factor: Any = None, custom_inv_norm_factor: Any = None, scale: float = 1.0,
                 _check_output_before_softmax: Optional[bool] = None):
        self.base_network = base_network
        self.use_flatten_frames = use_flatten_frames
        self.use_normalized_loss = use_normalized_loss
        self.custom_norm_factor = custom_norm_factor
        self.custom_inv_norm_factor = custom_inv_norm_factor
        self.scale = scale
        if _check_output_before_softmax is not None:
            self._check_output_before_softmax = _check_output_before_softmax
        self.layer: Any = None
        self.output = self.output_with_activation = self.target = None
        self.output_flat = self.output_before_softmax_flat = self.target_flat = None
        self.output_seq_lens = self.target_seq_lens = None
        self.loss_norm_factor: Any = None
        self._frames: Optional[tf.Tensor] = None

    def __repr__(self) -> str:
        return "<%s %r>" % (type(self).__name__, self.layer)

    @classmethod
    def transform_config_dict(cls, d: Dict[str, Any], network: Any, get_layer: Callable) -> None:
        """RETURNN: resolves layer names among the loss options (``custom_inv_norm_factor``)."""

    def _flatten_or_merge(self, data: Any) -> tf.Tensor:
        """(B, T, ...) -> the real frames (B', ...) with use_flatten_frames, else (B*T, ...)."""
        from returnn.tf.util.basic import flatten_with_seq_len_mask
        x = data.placeholder
        if self.use_flatten_frames:
            return flatten_with_seq_len_mask(x, data.get_sequence_lengths(), time_major=data.is_time_major)
        shape = tf.shape(x)
        return tf.reshape(x, tf.concat([[shape[0] * shape[1]], shape[2:]], 0))

    def init(self, output: Any, output_with_activation: Optional[OutputWithActivation] = None, target: Any = None,
             layer: Any = None) -> None:
        """RETURNN's ``Loss.init``: the flat values and the norm factor (see the module docstring)."""
        if not self._check_output_before_softmax:
            output_with_activation = None
        self.layer, self.output, self.output_with_activation, self.target = layer, output, output_with_activation, target
        self.output_flat = self.output_before_softmax_flat = self.target_flat = None
        self.output_seq_lens = self.target_seq_lens = None
        softmax = output_with_activation is not None and output_with_activation.act_func is tf.nn.softmax
        if output.have_time_axis() and output.have_batch_axis():
            self.output_seq_lens = output.get_sequence_lengths()
            if softmax:
                self.output_before_softmax_flat = self._flatten_or_merge(output.with_value(output_with_activation.x,
                                                                                           output.dyn_sizes))
            else:
                self.output_flat = self._flatten_or_merge(output)
            if target is not None:
                if not target.have_time_axis():
                    raise NetworkError("%r: the output has a time axis, the target %s has none" % (self, target.short_repr()))
                self.target_seq_lens = target.get_sequence_lengths()
                self.target_flat = self._flatten_or_merge(target)
                frames = tf.reduce_sum(self.target_seq_lens)
            else:
                frames = tf.reduce_sum(self.output_seq_lens)
        else:
            if softmax:
                self.output_before_softmax_flat = output_with_activation.x
            else:
                self.output_flat = output.placeholder
            frames = tf.shape(output.placeholder)[output.batch_dim_axis] if output.have_batch_axis() else 1
            if target is not None:
                self.target_flat = target.placeholder
        self._frames = tf.cast(frames, tf.float32)
        self.loss_norm_factor = 1.0 / tf.maximum(self._frames, 1.0)
        self._default_norm = self.loss_norm_factor
        if self.custom_norm_factor is not None:
            if callable(self.custom_norm_factor):
                self.loss_norm_factor = self.custom_norm_factor(self=self, output=output, layer=layer)
            else:
                self.loss_norm_factor = float(self.custom_norm_factor)
        self._check_init()

    def _check_init(self) -> None:
        """RETURNN's checks of output against target: made by the engine before any step
        (``check_templates``); a class may override this with its own."""

    def _reduce_batch_time(self) -> bool:
        return not self.use_flatten_frames and not self.recurrent and self.output.have_time_axis()

    def reduce_func(self, loss: tf.Tensor) -> tf.Tensor:
        """The sum over frames (without use_flatten_frames: padded frames masked first)."""
        if self._reduce_batch_time():
            if loss.shape.rank > 1:
                loss = tf.reduce_sum(loss, axis=list(range(1, loss.shape.rank)))
            mask = tf.reshape(self.output.get_sequence_mask(), [-1])
            loss = tf.where(mask, loss, tf.zeros_like(loss))
        return tf.reduce_sum(loss)

    def get_error(self) -> Optional[tf.Tensor]:
        """RETURNN's default: the frame error of the argmax against the target label."""
        output_flat = self.output_before_softmax_flat if self.output_before_softmax_flat is not None else self.output_flat
        if self.target.sparse:
            label = self.target_flat
        else:
            label = tf.argmax(self.target_flat, axis=-1, output_type=tf.int32)
        out_label = tf.cast(tf.argmax(output_flat, axis=-1), label.dtype)
        return self.reduce_func(tf.cast(tf.not_equal(out_label, label), tf.float32))

    def get_value(self) -> Optional[tf.Tensor]:
        """The loss summed over the frames (``self.reduce_func``), not normalized."""
        raise NotImplementedError

    def get_normalization_factor(self) -> tf.Tensor:
        return tf.convert_to_tensor(self.loss_norm_factor)

    @classmethod
    def get_auto_output_layer_dim(cls, target_dim: Any) -> Any:
        """The output dim a target of ``target_dim`` needs (e.g. +1 for a blank)."""
        return target_dim

    @classmethod
    def get_default_target(cls, extern_data: Any) -> Optional[str]:
        return None if not cls.need_target else getattr(extern_data, "default_target", None)


# RETURNN's registry of loss classes as config code reaches it; the engine's own are found besides
_LossClassDict: Dict[str, Type[Loss]] = {}
_ADAPTERS: Dict[Type[Loss], Type["ConfigLoss"]] = {}
_BASE_ARGS = ("base_network", "use_flatten_frames", "use_normalized_loss", "custom_norm_factor",
              "custom_inv_norm_factor", "scale", "_check_output_before_softmax")


def get_loss_class(name: str) -> Any:
    """RETURNN's ``get_loss_class`` for config code: a registered config class, else the engine's."""
    if name in _LossClassDict:
        return _LossClassDict[name]
    if name in engine_losses.LOSS_CLASSES:
        return engine_losses.LOSS_CLASSES[name]
    raise Exception("unknown loss class %r" % name)


def config_loss_class(name: Any) -> Optional[Type["ConfigLoss"]]:
    """The adapter of the config class registered under ``name``, or None."""
    user_cls = _LossClassDict.get(name) if isinstance(name, str) else None
    if user_cls is None:
        return None
    if not isinstance(user_cls, type) or not issubclass(user_cls, Loss):
        raise NetworkError("_LossClassDict[%r] = %r: a loss class must subclass RETURNN's Loss (from "
                           "returnn.tf.layers.basic import Loss)" % (name, user_cls))
    if user_cls not in _ADAPTERS:
        _ADAPTERS[user_cls] = type("ConfigLoss_%s" % user_cls.__name__, (ConfigLoss,), {
            "user_class": user_cls, "loss_class": name, "need_target": bool(user_cls.need_target),
            "framewise": not user_cls.recurrent})
    return _ADAPTERS[user_cls]


def unregistered_hint(name: str) -> str:
    """For an unknown loss: how to register a config's Loss subclass of that class_name, if one exists."""
    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)
    found = [c for c in subclasses(Loss) if c.__dict__.get("class_name") == name]
    if not found:
        return ""
    return ("; the config's Loss subclass %s has class_name %r, but RETURNN finds loss classes only in its registry: "
            "_LossClassDict[%r] = %s (from returnn.tf.layers.basic import _LossClassDict)"
            % (found[-1].__name__, name, name, found[-1].__name__))


class ConfigLoss(engine_losses.Loss):
    """The adapter (see the module docstring); one subclass per registered config class."""

    user_class: Type[Loss] = Loss

    def __init__(self, layer_name: str, loss_opts: Optional[Dict[str, Any]], target_key: str):
        self.layer_name, self.target_key = layer_name, target_key
        cls = self.user_class
        self.desc = "layer %r: loss %r (the config's class %s)" % (layer_name, self.loss_class, cls.__name__)
        opts = dict(loss_opts or {})
        self._call("transform_config_dict", lambda: cls.transform_config_dict(
            opts, network=_NetworkView(self.desc, False), get_layer=_NetworkView(self.desc, False).get_layer))
        if opts.get("custom_inv_norm_factor") is not None:
            raise NetworkError("%s: loss_opts custom_inv_norm_factor (a layer) is not supported here" % self.desc)
        self.opts = opts
        self.layer: Any = None
        probe = self._instance(False)  # unknown options: the class's __init__ refuses them (TypeError)
        self.normalized = probe.use_normalized_loss
        if not isinstance(self.normalized, bool):
            raise NetworkError("%s: loss_opts use_normalized_loss must be True or False, got %r"
                               % (self.desc, self.normalized))
        self.scale = probe.scale
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)):
            raise NetworkError("%s: loss_opts scale must be a number, got %r" % (self.desc, self.scale))

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except NetworkError:
            raise
        except Exception as exc:
            raise NetworkError("%s: %s failed: %s: %s" % (self.desc, what, type(exc).__name__,
                                                          str(exc).splitlines()[0] if str(exc) else "")) from exc

    def _instance(self, train: bool) -> Loss:
        cls = self.user_class
        own = [p for p in self.opts if p in _BASE_ARGS[:1]]
        if own:
            raise NetworkError("%s: loss_opts %s is set by the engine" % (self.desc, known_list(own)))
        return self._call("__init__", lambda: cls(base_network=_NetworkView(self.desc, train), **self.opts))

    def bind_layer(self, layer: Any) -> None:
        """The engine's layer the loss is on (its parameters and activation)."""
        self.layer = layer

    @classmethod
    def declared(cls) -> Dict[str, Any]:
        """The options: RETURNN's Loss base options and the keyword arguments of the class's __init__ chain."""
        from returnn.tf.layers.options import Option
        names = list(_BASE_ARGS[1:])
        for klass in cls.user_class.__mro__:
            if klass in (Loss, object) or "__init__" not in klass.__dict__:
                continue
            for p in inspect.signature(klass.__dict__["__init__"]).parameters.values():
                if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in names:
                    names.append(p.name)
        return {n: Option(n, None, "option of the config's loss class %s" % cls.user_class.__name__) for n in names}

    def expected_output_dim(self, target_dim: Optional[int]) -> Optional[int]:
        return expected_dim(self.user_class, target_dim)

    def check_templates(self, output, target, target_name) -> None:
        """RETURNN's ``_check_init``: the engine's checks, unless the class has its own."""
        if "_check_init" in _own_attrs(self.user_class):
            return
        super().check_templates(output, target, target_name)

    @tf.autograph.experimental.do_not_convert  # the config's code runs as RETURNN runs it: in graph mode, unconverted
    def compute_btf(self, output: LayerOutput, target: Optional[LayerOutput], train: bool = False
                    ) -> engine_losses.LossValues:
        inst = self._instance(train)
        net = inst.base_network
        out_data = output.data.with_value(output.tensor, output.sizes)
        before = self._before_activation(output)
        params = {}
        if self.layer is not None:
            params = {k: v for k, v in self.layer.own_params.items()}
        layer_view = _LayerView(self.layer_name, net, out_data, before, params)
        tgt_data = None if target is None else target.data.with_value(target.tensor, target.sizes)
        self._call("init", lambda: inst.init(output=out_data, output_with_activation=before, target=tgt_data,
                                             layer=layer_view))
        value = self._call("get_value", inst.get_value)
        error = self._call("get_error", inst.get_error)
        if value is None and error is None:
            raise NetworkError("%s: get_value and get_error both returned None" % self.desc)
        norm = inst._frames if inst.loss_norm_factor is inst._default_norm else \
            1.0 / tf.cast(tf.convert_to_tensor(inst.loss_norm_factor), tf.float32)
        for what, t in (("get_value", value), ("get_error", error)):
            if t is not None and tf.convert_to_tensor(t).shape.rank != 0:
                raise NetworkError("%s: %s must return a scalar (RETURNN's reduce_func sums), got shape %s"
                                   % (self.desc, what, tf.convert_to_tensor(t).shape))
        cast = (lambda t: None if t is None else tf.cast(t, tf.float32))
        if value is None:  # RETURNN: no loss, only the error
            return engine_losses.LossValues(tf.constant(0.0), tf.constant(0.0), cast(error), norm)
        return engine_losses.LossValues(cast(value), norm, cast(error), None if error is None else norm)

    def _before_activation(self, output: LayerOutput) -> Optional[OutputWithActivation]:
        """RETURNN's ``output_before_activation`` of the layer: the logits of a softmax (or
        log_softmax), a linear layer's value without activation; else unknown here (None)."""
        name = getattr(self.layer, "activation_name", None)
        if output.logits is not None and name in ("softmax", "log_softmax"):
            act = tf.nn.softmax if name == "softmax" else tf.nn.log_softmax
            return OutputWithActivation(output.logits, act, output.tensor)
        if self.layer is not None and type(self.layer).layer_class == "linear" and name is None:
            return OutputWithActivation(output.tensor)
        return None


def expected_dim(user_cls: Type[Loss], target_dim: Optional[int]) -> Optional[int]:
    """The class's ``get_auto_output_layer_dim`` of a target dim (RETURNN passes a Dim, old RETURNN an int)."""
    if target_dim is None:
        return None
    from returnn.tensor import FeatureDim
    out = user_cls.get_auto_output_layer_dim(FeatureDim("target", target_dim))
    dim = getattr(out, "dimension", out)
    return dim if isinstance(dim, int) else None


def _own_attrs(cls: type) -> set:
    out = set()
    for klass in cls.__mro__:
        if klass in (Loss, object):
            break
        out.update(klass.__dict__)
    return out
