"""RETURNN's per-layer ``updater_opts``: optimizer and gradient options for the parameters of one
layer (RETURNN's ``LayerBase(updater_opts=...)``, read per variable by ``returnn/tf/updater.py``).

Keys (each overrides the config key of the same name for the layer's parameters):

- ``optimizer``: a dict as the config's ``optimizer`` (``class``, its options,
  ``learning_rate_multiplier``); parameters with equal dicts share one optimizer, the others use
  the config's (RETURNN's one optimizer per distinct dict). Each optimizer counts its own updates
  (Adam's bias correction), as TensorFlow's v1 optimizers in RETURNN do.
- ``accum_grad_multiple_step``: gradients of the layer summed over k steps, applied every k-th.
- ``gradient_noise``, ``gradient_clip``, ``gradient_clip_norm``, ``gradient_clip_global_norm``
  (the global norm is RETURNN's: over all parameters' gradients of the step, before any clipping).

RETURNN's other keys (``gradient_clip_avg_norm``, ``global_norm_tag``, ``grad_norm_to_clip_to_zero``,
``maximize_grad_norm``, ``gradient_nan_inf_filter``, ``debug_grad_summaries``, ``tags``, ...) are
refused in one line naming the layer. Any layer with ``updater_opts`` makes the step process every
parameter's gradient on its own (:class:`LayerUpdates`), in RETURNN's order: accumulation, noise,
clip by value, by norm, by the global norm.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import ConfigError, NetworkError

ATTR = "_returnn_updater_opts"  # on a tf.Variable: the updater_opts of the layer that made it (RETURNN's RETURNN_updater_opts)
GRADIENT_KEYS = ("gradient_noise", "gradient_clip", "gradient_clip_norm", "gradient_clip_global_norm")
SUPPORTED = ("optimizer", "accum_grad_multiple_step") + GRADIENT_KEYS
REFUSED = ("gradient_clip_avg_norm", "global_norm_tag", "gradient_clip_global_norm_tag", "grad_norm_to_clip_to_zero",
           "maximize_grad_norm", "gradient_nan_inf_filter", "debug_grad_summaries", "tags")


def check_layer_updater_opts(desc: str, value: Any) -> Optional[Dict[str, Any]]:
    """A layer's ``updater_opts`` checked (None when not given or empty); one-line errors."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise NetworkError("%s: updater_opts must be a dict, got %r" % (desc, value))
    refused = sorted(k for k in value if k in REFUSED)
    if refused:
        raise NetworkError("%s: updater_opts %s not implemented per layer here (supported: %s)"
                           % (desc, ", ".join(refused), ", ".join(SUPPORTED)))
    unknown = sorted(k for k in value if k not in SUPPORTED)
    if unknown:
        raise NetworkError("%s: unknown updater_opts %s (RETURNN's per-layer keys supported here: %s)"
                           % (desc, ", ".join(unknown), ", ".join(SUPPORTED)))
    opt = value.get("optimizer")
    if opt is not None and not (isinstance(opt, str) or isinstance(opt, dict)):
        raise NetworkError("%s: updater_opts optimizer must be a dict (or a class name), got %r" % (desc, opt))
    if isinstance(opt, dict) and "learning_rate" in opt:
        raise NetworkError("%s: updater_opts optimizer: no 'learning_rate' (RETURNN: set implicitly; use "
                           "'learning_rate_multiplier')" % desc)
    k = value.get("accum_grad_multiple_step")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise NetworkError("%s: updater_opts accum_grad_multiple_step must be an int >= 0, got %r" % (desc, k))
    for key in GRADIENT_KEYS:
        v = value.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            raise NetworkError("%s: updater_opts %s must be a number >= 0, got %r" % (desc, key, v))
    return dict(value)


def updater_opts_of(var: tf.Variable) -> Dict[str, Any]:
    return getattr(var, ATTR, None) or {}


def has_layer_updater_opts(variables: Sequence[tf.Variable]) -> bool:
    return any(updater_opts_of(v) for v in variables)


def _key(opts: Any) -> str:
    return repr(sorted(opts.items())) if isinstance(opts, dict) else repr(opts)


def create_layer_optimizers(config, variables: Sequence[tf.Variable], config_opts: Dict[str, Any],
                            create) -> Optional["MultiOptimizer"]:
    """The optimizers of a network whose layers give their own ``optimizer`` or
    ``accum_grad_multiple_step``, or whose config optimizer has a ``learning_rate_multiplier``
    (None otherwise: one plain optimizer does). ``create(optimizer dict, variables)`` makes one
    (at the dict's rate multiplier, from the config's learning rate). One optimizer per
    (optimizer dict, accumulation count): RETURNN keys its optimizers by the dict alone; an
    optimizer here always updates all its parameters at once (TensorFlow's v1 optimizer in RETURNN,
    applied per accumulation group, counts an update per group)."""
    accum = int(config.int("accum_grad_multiple_step") or 0)
    groups: Dict[str, Tuple[Dict[str, Any], List[tf.Variable]]] = {}
    for v in variables:
        own = updater_opts_of(v)
        opt = own.get("optimizer") or config_opts
        opt = {"class": opt} if isinstance(opt, str) else dict(opt)
        if "class" not in opt:  # RETURNN: the config optimizer's class
            opt["class"] = config_opts["class"]
        k = own.get("accum_grad_multiple_step")
        k = max(int(accum if k is None else k), 1)
        groups.setdefault(_key(opt) + "/%i" % k, (opt, []))[1].append(v)
    default = [g for g in groups.values() if _key(g[0]) == _key(dict(config_opts))]
    if len(groups) == 1 and float(dict(config_opts).get("learning_rate_multiplier", 1.0)) == 1.0:
        return None
    ordered = default[:1] + [g for g in groups.values() if not any(g is d for d in default[:1])]
    subs, sub_vars, multipliers = [], [], []
    for opt, vs in ordered:
        multipliers.append(float(opt.get("learning_rate_multiplier", 1.0)))
        try:
            subs.append(create(dict(opt), vs))
        except ConfigError as exc:
            raise ConfigError("updater_opts of the layer of parameter %r: %s" % (vs[0].name, exc)) from None
        sub_vars.append(vs)
    return MultiOptimizer(variables, subs, sub_vars, multipliers, config.float("learning_rate"))


class _SharedRate:
    """The engine's learning-rate handle of :class:`MultiOptimizer`: assigning a rate sets every
    optimizer's to it times that optimizer's ``learning_rate_multiplier`` (RETURNN multiplies the
    running rate); reading gives the rate last assigned."""

    def __init__(self, base: tf.Variable, subs: Sequence[Any], multipliers: Sequence[float]):
        self.base, self.subs, self.multipliers = base, list(subs), list(multipliers)

    def assign(self, value) -> None:
        self.base.assign(float(value))
        for sub, m in zip(self.subs, self.multipliers):
            sub.learning_rate.assign(float(value) * m)

    def numpy(self):
        return self.base.numpy()

    def read_value(self):
        return self.base.read_value()


class MultiOptimizer(tf.Module):
    """Several optimizers over disjoint sets of the variables, behind the single optimizer's
    interface for the engine and checkpoints: ``learning_rate`` sets all (:class:`_SharedRate`),
    ``iterations`` is the first's update count (the config optimizer's, when it has parameters),
    the others' counts and extra values are stored under ``_engine/optimizer/<i>/``; each variable's
    slots are its optimizer's, named as that optimizer names them."""

    def __init__(self, variables: Sequence[tf.Variable], subs: Sequence[Any], sub_vars: Sequence[Sequence[tf.Variable]],
                 multipliers: Sequence[float], learning_rate: float):
        super().__init__(name="optimizers")
        self.subs = list(subs)
        self.rate = tf.Variable(float(learning_rate), trainable=False, dtype=tf.float32, name="learning_rate")
        self.learning_rate = _SharedRate(self.rate, self.subs, multipliers)
        self.var_index = {id(v): i for i, v in enumerate(variables)}
        self._sub_of = {id(v): sub for sub, vs in zip(self.subs, sub_vars) for v in vs}
        self.sparse_differs = any(getattr(sub, "sparse_differs", False) for sub in self.subs)

    @property
    def iterations(self) -> tf.Variable:
        return self.subs[0].iterations

    @property
    def epsilon(self) -> float:
        return self.subs[0].epsilon

    def sub_of(self, var: tf.Variable):
        return self._sub_of[id(var)]

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> None:
        """Each optimizer applies the gradients of its variables (any subset, in any order: each
        finds its slots by the variable)."""
        by_sub: Dict[int, Tuple[List[tf.Tensor], List[tf.Variable]]] = {}
        for g, v in zip(grads, variables):
            entry = by_sub.setdefault(id(self.sub_of(v)), ([], []))
            entry[0].append(g)
            entry[1].append(v)
        for sub in self.subs:
            if id(sub) in by_sub:
                sub.apply(*by_sub[id(sub)])

    def reset_state(self) -> None:
        for sub in self.subs:
            sub.reset_state()

    @property
    def slots(self) -> Dict[str, List[Optional[tf.Variable]]]:
        """``"<i>:<slot>"`` -> per variable (this object's order) its slot, None for the variables
        of other optimizers."""
        out: Dict[str, List[Optional[tf.Variable]]] = {}
        n = len(self.var_index)
        for i, sub in enumerate(self.subs):
            own = {self.var_index[vid]: j for vid, j in sub.var_index.items()}
            for slot, slot_vars in sub.slots.items():
                out["%i:%s" % (i, slot)] = [slot_vars[own[k]] if k in own else None for k in range(n)]
        return out

    def slot_checkpoint_name(self, slot: str) -> str:
        i, name = slot.split(":", 1)
        return self.subs[int(i)].slot_checkpoint_name(name)

    def extra_checkpoint_values(self) -> Dict[str, Any]:
        out = dict(self.subs[0].extra_checkpoint_values())
        for i, sub in enumerate(self.subs[1:], 1):
            out["_engine/optimizer/%i/iterations" % i] = np.int64(sub.iterations.numpy())
            out.update(("_engine/optimizer/%i/%s" % (i, k), v) for k, v in sub.extra_checkpoint_values().items())
        return out

    def iterations_from_checkpoint(self, values: Dict[str, Any]) -> Optional[int]:
        return self.subs[0].iterations_from_checkpoint(values)

    def restore_extra_values(self, values: Dict[str, Any]) -> None:
        """The other optimizers' update counts from a checkpoint's extra values (when stored)."""
        for i, sub in enumerate(self.subs[1:], 1):
            key = "_engine/optimizer/%i/iterations" % i
            if key in values:
                sub.iterations.assign(int(values[key]))


class LayerUpdates:
    """The training step's gradient processing and updates per parameter when some layer has
    ``updater_opts`` (RETURNN's ``_post_process_grad`` and grouped ``_apply_gradients``): each
    parameter's accumulation count, noise and clipping are its layer's or the config's; the
    parameters are updated per (optimizer, accumulation count), every k-th step for k > 1."""

    def __init__(self, variables: Sequence[tf.Variable], optimizer, config_opts: Dict[str, float]):
        self.params = list(variables)
        self.optimizer = optimizer
        self.opts: List[Dict[str, float]] = []
        for v in self.params:
            own = updater_opts_of(v)
            self.opts.append({k: float(own[k]) if own.get(k) is not None else float(config_opts.get(k) or 0.0)
                              for k in ("accum_grad_multiple_step",) + GRADIENT_KEYS})
        self.accum = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="accum_grad_%i" % i)
                      if int(o["accum_grad_multiple_step"]) > 1 else None
                      for i, (v, o) in enumerate(zip(self.params, self.opts))]

    def apply(self, grads: Sequence[tf.Tensor], seed: tf.Tensor) -> None:
        raw_norm = tf.linalg.global_norm([g.values if isinstance(g, tf.IndexedSlices) else g
                                          for g in grads if g is not None]) \
            if any(o["gradient_clip_global_norm"] > 0 for o in self.opts) else None  # RETURNN: all raw gradients
        groups: Dict[Tuple[int, int], Tuple[List[tf.Tensor], List[tf.Variable]]] = {}
        for i, (g, v, o) in enumerate(zip(grads, self.params, self.opts)):
            if g is None:  # no gradient from the loss: not updated (RETURNN skips it)
                continue
            k = int(o["accum_grad_multiple_step"])
            if isinstance(g, tf.IndexedSlices) and (k > 1 or any(o[key] > 0 for key in GRADIENT_KEYS)):
                g = tf.convert_to_tensor(g)
            if k > 1:
                acc = self.accum[i]
                acc.assign(tf.where(tf.equal(seed[1] % k, 0), g, acc + g))
                g = acc.read_value()
            if o["gradient_noise"] > 0:
                g = g + o["gradient_noise"] * tf.random.stateless_normal(tf.shape(g), seed + [1, i], dtype=g.dtype)
            if o["gradient_clip"] > 0:
                g = tf.clip_by_value(g, -o["gradient_clip"], o["gradient_clip"])
            if o["gradient_clip_norm"] > 0:
                g = tf.clip_by_norm(g, o["gradient_clip_norm"])
            if o["gradient_clip_global_norm"] > 0:
                (g,), _ = tf.clip_by_global_norm([g], o["gradient_clip_global_norm"], use_norm=raw_norm)
            sub = self.optimizer.sub_of(v) if isinstance(self.optimizer, MultiOptimizer) else self.optimizer
            entry = groups.setdefault((id(sub), max(k, 1)), ([], []))
            entry[0].append(g)
            entry[1].append(v)
        for (_, k), (gs, vs) in groups.items():
            if k > 1:
                def update(gs=gs, vs=vs):
                    self.optimizer.apply(gs, vs)
                    return tf.constant(True)
                tf.cond(tf.equal(seed[1] % k, k - 1), update, lambda: tf.constant(False))
            else:
                self.optimizer.apply(gs, vs)
