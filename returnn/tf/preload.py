"""RETURNN's ``preload_from_files``: parameters of the network taken from other checkpoints.

::

    preload_from_files = {
        "base": {"filename": "/exp/base/model.080", "init_for_train": True,
                 "prefix": "",                 # only parameters whose name contains it; the file's name
                                               # is the parameter's without it ("dec/rec/pre_s/W" <- "dec/rec/s/W")
                 "ignore_missing": False,      # parameters the checkpoint lacks keep their initialisation
                 "ignore_params": [],          # names ("layer/W", without the prefix) not to load
                 "ignore_params_prefixes": [],
                 "var_name_mapping": {},       # name (without the prefix) -> name in the file
                 },
    }

As in RETURNN: entries are applied in the order of their names, and a parameter loaded by one
entry is not loaded again by a later one. ``init_for_train`` entries apply when a training starts
from scratch (not on resume, where the run's own checkpoint holds everything); the others apply
when a model is loaded for ``eval``/``search``/``forward``: before the model checkpoint, which
then loads only the parameters they did not (as RETURNN's custom-init marking), so they win and
need not be in it (an LM fused in for decoding). The files are checkpoints written here or by
RETURNN (``<model>.NNN``); names are RETURNN's parameter names (``layer/W``, ``lstm/rec/W_re``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import tensorflow as tf

from returnn.errors import ConfigError
from returnn.log import log
from returnn.tf.checkpoint import is_complete, readable_prefix
from returnn.tf.checkpoint_fit import stored_params
from returnn.tf.checkpoint_format import is_legacy
from returnn.tf.returnn_params import network_params

OPTIONS = ("filename", "init_for_train", "prefix", "ignore_missing", "ignore_params", "ignore_params_prefixes",
           "var_name_mapping")


def _entries(spec: Any) -> Dict[str, Dict[str, Any]]:
    if not isinstance(spec, dict):
        raise ConfigError("config key 'preload_from_files': expected a dict name -> options, got %r" % (spec,))
    for name, opts in spec.items():
        where = "config key 'preload_from_files' entry %r" % name
        if not isinstance(opts, dict):
            raise ConfigError("%s: expected a dict of options, got %r" % (where, opts))
        unknown = sorted(set(opts) - set(OPTIONS))
        if unknown:
            raise ConfigError("%s: unknown option(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(OPTIONS)))
        if not isinstance(opts.get("filename"), str):
            raise ConfigError("%s: 'filename' (a checkpoint prefix like /exp/model.080) is missing" % where)
    return spec


def preload_from_files(spec: Any, network: tf.Module, starting_training: bool, fresh: bool = False,
                       loaded: Optional[Set[str]] = None) -> int:
    """Applies the entries of ``spec`` that fit the situation (see the module doc); returns the
    number of parameters loaded and adds their names to ``loaded``. ``fresh``: the parameters
    were just initialised (no checkpoint): the subnetworks' ``load_on_init`` apply first."""
    total = apply_load_on_init(network) if fresh else 0
    if not spec:
        return total
    done: Set[int] = set()
    for name, opts in sorted(_entries(spec).items()):
        if bool(opts.get("init_for_train", False)) != starting_training:
            continue
        total += _load(name, opts, network, done, loaded=loaded)
    return total


def _load(name: str, opts: Dict[str, Any], network: tf.Module, done: Set[int], scope: str = "",
          loaded: Optional[Set[str]] = None) -> int:
    """Loads one entry; ``scope``: only the parameters in it, named in the file without it."""
    where = name if scope else "preload_from_files entry %r" % name
    filename = opts["filename"]
    filename = filename[:-len(".index")] if filename.endswith(".index") else filename
    if not is_complete(filename):
        raise ConfigError("%s: checkpoint %s not found (expected %s.index and its data)" % (where, filename, filename))
    prefix = str(opts.get("prefix", "") or "")
    ignore = set(opts.get("ignore_params", ()) or ())
    ignore_prefixes = tuple(opts.get("ignore_params_prefixes", ()) or ())
    mapping = dict(opts.get("var_name_mapping", {}) or {})
    with readable_prefix(filename) as path:
        reader = tf.train.load_checkpoint(path)
        shapes = reader.get_variable_to_shape_map()
        if is_legacy(shapes):
            raise ConfigError("%s: %s is a checkpoint of an earlier version of this engine; load it once with "
                              "'load' (or resume from it) and use the checkpoint that run writes" % (where, filename))
        stored = stored_params(shapes)
        count, missing, names = 0, [], loaded
        for own, param in network_params(network).items():
            ids = [id(v) for v in param.param.variables]
            if any(i in done for i in ids) or not param.param.saveable or (prefix and prefix not in own) \
                    or not own.startswith(scope):
                continue
            if scope:
                short = own[len(scope):]
            else:
                short = own.replace(prefix, "") if prefix else own  # RETURNN's: the prefix anywhere in the name
            if short in ignore or short.startswith(ignore_prefixes):
                continue
            source = mapping.get(short, short)
            if source not in stored:
                missing.append(own)
                continue
            if stored[source] != param.shape:
                raise ConfigError("%s: parameter %r has shape %s in %s but %r has %s in the network"
                                  % (where, source, stored[source], filename, own, param.shape))
            param.assign(reader.get_tensor(source))
            done.update(ids)
            count += 1
            if names is not None:
                names.add(own)
    if missing and not opts.get("ignore_missing", False):
        raise ConfigError("%s: checkpoint %s has no parameter for %s (set 'ignore_missing': True to keep their "
                          "initialisation)" % (where, filename, ", ".join(repr(m) for m in missing[:5])
                                               + (" and %i more" % (len(missing) - 5) if len(missing) > 5 else "")))
    print("%s: %i parameter(s) from %s%s" % (where if scope else "preload_from_files %r" % name, count, filename,
          ("; %i not in it keep their initialisation" % len(missing)) if missing else ""), file=log.v3)
    return count


def load_on_init_entries(net_dict: Dict[str, Any], scope: str = "") -> List[Tuple[str, Any]]:
    """RETURNN's ``load_on_init`` of ``subnetwork`` layers: (the subnetwork's parameter scope, e.g.
    ``lm/`` or ``dec/rec/lm/``, its option value) for every one in ``net_dict``, rec units and nested
    subnetworks included."""
    out: List[Tuple[str, Any]] = []
    for name, opts in net_dict.items():
        if not isinstance(opts, dict):
            continue
        if opts.get("class") == "subnetwork" and isinstance(opts.get("subnetwork"), dict):
            if opts.get("load_on_init"):
                if opts.get("name_scope") is not None:
                    raise ConfigError("layer %r (subnetwork): 'load_on_init' together with 'name_scope' is not "
                                      "supported" % (scope + name))
                out.append((scope + name + "/", opts["load_on_init"]))
            out += load_on_init_entries(opts["subnetwork"], scope + name + "/")
        elif opts.get("class") == "rec" and isinstance(opts.get("unit"), dict):
            out += load_on_init_entries(opts["unit"], scope + name + "/rec/")
    return out


def apply_load_on_init(network: tf.Module) -> int:
    """Initialises the parameters of each subnetwork with ``load_on_init`` from its checkpoint (as
    RETURNN's custom initialiser: only where parameters are freshly initialised, i.e. a training
    from scratch or ``allow_random_model_init``; a model checkpoint loaded afterwards wins). The
    file holds the subnetwork's parameters under their names inside it (``lm/x/W`` <- ``x/W``); a
    dict value takes ``filename`` and preload_from_files' options but ``prefix`` and ``init_for_train``.
    Returns the number of parameters loaded."""
    total = 0
    for scope, spec in getattr(network, "load_on_init", {}).items():
        where = "layer %r (subnetwork) option 'load_on_init'" % scope[:-1]
        if callable(spec):
            spec = spec()
        opts = {"filename": spec} if isinstance(spec, str) else spec
        if not isinstance(opts, dict) or not isinstance(opts.get("filename"), str):
            raise ConfigError("%s: expected a checkpoint name or a dict with 'filename', got %r" % (where, spec))
        unknown = sorted(set(opts) - (set(OPTIONS) - {"prefix", "init_for_train"}))
        if unknown:
            raise ConfigError("%s: unknown option(s) %s" % (where, ", ".join(unknown)))
        total += _load(where, opts, network, set(), scope=scope)
    return total
