"""Pretraining as RETURNN defines it: the network grows over the first epochs (old name ``Pretrain``).

``pretrain = "default"`` (or ``True``, or a dict of options) builds a list of net dicts, one per
pretrain step, from the config's ``network``:

- ``construction_algo = "from_output"`` (default): the first step keeps only the first hidden
  layer(s) below the output; each step adds the next layer, the last step is the full network.
  A step that would connect an output directly to the input, or that only removed non-trainable
  layers, is skipped.
- ``"from_input"``: step N keeps the layers up to N hops from the input (plus outputs, their
  sources re-wired to the nearest kept layers).
- a function ``f(idx, net_dict) -> net_dict or None``: step ``idx`` is what it returns, until it
  returns None; the full network follows.
- ``"no_network_modifications"``: one step, the full network.

Steps adding only non-trainable or output layers are merged into the next (except for custom
functions). ``repetitions`` (int, list, or dict with ``"default"``, ``"final"`` and step indices;
or ``"#repetition"`` in a step's dict) repeats steps; each repetition is one epoch. Values wrapped
in :class:`WrapEpochValue` are resolved per pretrain epoch. Epochs after the last pretrain epoch
use the last (full) net dict. Parameters carry over by name between epochs (the engine does that;
``copy_param_mode`` / ``copy_output_layer`` say what happens to parameters whose shape changed).
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from returnn.errors import ConfigError

NetDict = Dict[str, Dict[str, Any]]
CONSTRUCTION_ALGOS = ("from_output", "from_input", "no_network_modifications")
COPY_PARAM_MODES = (None, "ifpossible", "subset", "reset")


class WrapEpochValue:
    """A value in a net dict that depends on the (pretrain) epoch: ``WrapEpochValue(lambda epoch: ...)``."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func

    def get_value(self, epoch: int) -> Any:
        """The value for ``epoch`` (1-based)."""
        return self.func(epoch=epoch)


def layer_from(layer: Dict[str, Any]) -> List[str]:
    """A layer's ``from`` as a list (default ``["data"]``)."""
    src = layer.get("from", ["data"])
    return [src] if isinstance(src, str) else list(src)


def _listed_from(net: Dict[str, Any], name: str, output: bool) -> List[str]:
    """``from`` of layer ``name`` as RETURNN's ``from_output`` construction reads it: a list (a string
    is iterated by character there, failing on 'l', 'd', ...: a string only of one character works);
    an output layer must have one (KeyError there). ConfigError naming the layer instead of RETURNN's
    crash."""
    layer = net[name]
    if output and "from" not in layer:
        raise ConfigError("pretrain: output layer %r has no 'from': RETURNN's pretrain construction (from_output) "
                          "needs it (it fails with KeyError 'from'); write \"from\": [\"data\"]" % name)
    src = layer.get("from", ["data"])
    _refuse_string_from(name, src, "from_output", any_length=output)  # RETURNN sums the outputs' lists
    return list(src)


def _refuse_string_from(name: str, src: Any, algo: str, any_length: bool = False) -> None:
    """RETURNN's pretrain constructions iterate ``from`` by character: a string of more than one
    character fails there (a one-character one names that layer; an output layer's fails in any case,
    ``any_length``); ConfigError naming the layer."""
    if isinstance(src, str) and (len(src) > 1 or any_length):
        raise ConfigError("pretrain: layer %r has \"from\": %r, a string: RETURNN's pretrain construction "
                          "(%s) needs a list (it iterates the string by character and fails); write "
                          "\"from\": [%r]" % (name, src, algo, src))


def resolve_epoch_values(value: Any, epoch: int) -> Any:
    """``value`` with every :class:`WrapEpochValue` inside (dicts, lists, tuples) resolved for ``epoch``."""
    if isinstance(value, WrapEpochValue):
        return value.get_value(epoch=epoch)
    if isinstance(value, dict):
        return {k: resolve_epoch_values(v, epoch) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(resolve_epoch_values(v, epoch) for v in value)
    return value


class Pretrain:
    """The per-epoch net dicts of a pretraining scheme."""

    def __init__(self, original_network_json: NetDict, copy_param_mode: Optional[str] = None,
                 copy_output_layer: Union[bool, str, None] = None, greedy: Optional[bool] = None,
                 repetitions: Union[None, int, List[int], Dict[Any, int]] = None,
                 construction_algo: Union[str, Callable] = "from_output",
                 output_layers: Sequence[str] = ("output",), input_layers: Sequence[str] = ("data",),
                 network_init_args: Any = None):
        if copy_param_mode not in COPY_PARAM_MODES:
            raise ConfigError("pretrain: copy_param_mode %r unknown (known: %s)"
                              % (copy_param_mode, ", ".join(str(m) for m in COPY_PARAM_MODES)))
        if greedy:
            raise ConfigError("pretrain: greedy (train only the new layers) is not supported")
        if copy_output_layer is None:
            copy_output_layer = copy_param_mode or "ifpossible"
        self.copy_param_mode = copy_param_mode
        self.copy_output_layer = False if copy_output_layer == "reset" else copy_output_layer
        self.construction_algo = construction_algo
        self.original = original_network_json
        self.output_layers = list(output_layers)
        self.input_layers = list(input_layers)
        if callable(construction_algo):
            steps = self._construct_custom(construction_algo)
        elif construction_algo == "from_output":
            steps = self._construct_from_output()
        elif construction_algo == "from_input":
            steps = self._construct_from_input()
        elif construction_algo == "no_network_modifications":
            steps = [self.original]
        else:
            raise ConfigError("pretrain: construction_algo %r unknown (known: %s, or a function)"
                              % (construction_algo, ", ".join(CONSTRUCTION_ALGOS)))
        if not callable(construction_algo):
            steps = self._drop_steps_without_new_trainable(steps)
        steps = [copy.deepcopy(s) for s in steps]
        self.repetitions = self._repetitions(repetitions, steps)
        self._nets: List[NetDict] = []
        for count, net in zip(self.repetitions, steps):
            self._nets.extend(copy.deepcopy(net) for _ in range(count))
        self._nets = [resolve_epoch_values(net, i + 1) for i, net in enumerate(self._nets)]

    # ---- construction
    def _is_output(self, net: NetDict, name: str) -> bool:
        layer = net[name]
        return name in self.output_layers or layer.get("class") == "softmax" or "target" in layer

    def _construct_custom(self, func: Callable) -> List[NetDict]:
        steps: List[NetDict] = []
        while True:
            net = func(idx=len(steps), net_dict=copy.deepcopy(self.original))
            if not net:
                break
            steps.append(net)
        return steps + [self.original]

    def _construct_from_output(self) -> List[NetDict]:
        steps = [self.original]
        while True:
            smaller = self._shrink_from_output(steps[0])
            if smaller is None:
                return steps
            steps.insert(0, smaller)

    def _shrink_from_output(self, net: NetDict) -> Optional[NetDict]:
        """The next smaller net: the outputs' sources replaced by their own sources; None at the end."""
        net = copy.deepcopy(net)
        for name in self.output_layers:
            if name not in net:
                raise ConfigError("pretrain: output layer %r not in the network (set pretrain "
                                  "{'output_layers': [...]})" % name)
        while True:
            new_sources, deleted = set(), set()
            for out in self.output_layers:
                for src in _listed_from(net, out, output=True):
                    if src in self.input_layers:
                        new_sources.add(src)
                    elif src in net:
                        new_sources.update(_listed_from(net, src, output=False))
                        del net[src]
                        deleted.add(src)
                    else:  # RETURNN asserts (also on a 'data:' source, or one another output layer just removed)
                        raise ConfigError("pretrain: output layer %r reads %r, which RETURNN's pretrain construction "
                                          "(from_output) cannot shrink: neither one of its input_layers %r nor a "
                                          "layer left in the step" % (out, src, self.input_layers))
            current = set(s for out in self.output_layers for s in layer_from(net[out]))
            if new_sources == current:
                return None
            for out in self.output_layers:
                net[out]["from"] = sorted(new_sources)
            if new_sources & set(self.input_layers):
                continue  # the output would read the input directly: shrink further
            if all(not self.original[d].get("trainable", True) for d in deleted):
                continue
            return net

    def _descendants(self, sources: Sequence[str]) -> List[str]:
        """The layers reading one of ``sources``, by name; as RETURNN tests it, a string 'from' reads every
        source it contains ('data:classes' reads 'data'), and the step with it is then refused."""
        return [name for name, layer in sorted(self.original.items())
                if any(s in layer.get("from", ["data"]) for s in sources)]

    def _existing_inputs(self, net: NetDict, name: str) -> List[str]:
        """Sources of ``name`` in the original net, skipping (transitively) layers not in ``net``; RETURNN's
        from_input keeps ``data`` itself only (its ``input_layers`` are not read there) and fails on a source
        that is no layer (``data:classes``: KeyError)."""
        found: List[str] = []
        seen = {name}
        todo = list(layer_from(self.original[name]))
        while todo:
            src = todo.pop(0)
            if src in net or src == "data":
                if src not in found:
                    found.append(src)
            elif src not in seen:
                if src not in self.original:
                    raise ConfigError("pretrain: layer %r reads %r, which RETURNN's pretrain construction (from_input) "
                                      "cannot follow (no layer of the network; it fails with KeyError)" % (name, src))
                seen.add(src)
                _refuse_string_from(src, self.original[src].get("from"), "from_input")  # followed by character
                todo = list(layer_from(self.original[src])) + todo
        return found

    def _from_input_step(self, depth: int) -> Optional[NetDict]:
        net: NetDict = {}
        sources = ["data"]  # RETURNN's from_input: its input_layers are not read
        while True:  # non-trainable layers on the input (windows, feature extraction) come first
            added = [n for n in self._descendants(sources) if n not in net and not self.original[n].get("trainable", True)]
            if not added:
                break
            for name in added:
                net[name] = copy.deepcopy(self.original[name])
            sources += added
        for _ in range(depth):
            level = [n for n in self._descendants(sources) if n not in net]
            if not level:
                return None
            for name in level:
                net[name] = copy.deepcopy(self.original[name])
            sources = level
        for name in sorted(self.original):
            if name not in net and self._is_output(self.original, name):
                net[name] = copy.deepcopy(self.original[name])
        for name in sorted(net):  # RETURNN rewires the step here: KeyError (e.g. 'd') on a string 'from'
            _refuse_string_from(name, net[name].get("from"), "from_input")
        missing = {s for layer in net.values() for s in layer_from(layer)} - set(net) - {"data"}
        if not missing:
            return None  # this is the full topology
        for name in sorted(net):
            rewired = self._existing_inputs(net, name)
            if rewired != layer_from(net[name]):
                net[name]["from"] = [s for s in rewired if s != "data"]
        return net

    def _construct_from_input(self) -> List[NetDict]:
        steps: List[NetDict] = []
        while True:
            step = self._from_input_step(len(steps) + 1)
            if step is None:
                return steps + [self.original]
            steps.append(step)

    def _drop_steps_without_new_trainable(self, steps: List[NetDict]) -> List[NetDict]:
        kept: List[NetDict] = []
        previous: NetDict = {}
        for net in steps[:-1]:
            if any(name not in previous and not self._is_output(net, name) and layer.get("trainable", True)
                   for name, layer in net.items()):
                kept.append(net)
            previous = net
        return kept + [steps[-1]]

    @staticmethod
    def _repetitions(repetitions: Any, steps: List[NetDict]) -> List[int]:
        n = len(steps)
        if not repetitions:
            counts = [1] * n
        elif isinstance(repetitions, dict):
            opts = dict(repetitions)
            counts = [int(opts.pop("default", 1))] * n
            steps_named = [k for k in opts if not (k == "final" or (isinstance(k, int) and -n <= k < n))]
            if steps_named or ("final" in opts and len(opts) > 1):  # RETURNN sorts the keys and indexes a list
                raise ConfigError("pretrain: repetitions %r: besides 'default', give either 'final' or step indices "
                                  "(ints below the %i steps), as RETURNN takes them" % (repetitions, n))
            for key, value in opts.items():
                counts[n - 1 if key == "final" else key] = int(value)
        else:
            counts = [int(r) for r in (repetitions if isinstance(repetitions, (list, tuple)) else [repetitions])]
            if len(counts) > n:
                raise ConfigError("pretrain: %i repetitions given for %i pretrain steps" % (len(counts), n))
            counts += [counts[-1]] * (n - len(counts))
        for i, net in enumerate(steps):
            if "#repetition" in net:
                counts[i] = int(net.pop("#repetition"))
        return counts

    # ---- public interface
    def get_train_num_epochs(self) -> int:
        """Number of pretrain epochs (steps times repetitions; the last is the full network)."""
        return len(self._nets)

    def get_network_json_for_epoch(self, epoch: int) -> NetDict:
        """The net dict of ``epoch`` (1-based); after pretraining, the final one."""
        return self._nets[min(max(epoch, 1), len(self._nets)) - 1]

    def get_final_network_json(self) -> NetDict:
        """The full network (with epoch values resolved for the last pretrain epoch)."""
        return self._nets[-1]

    def __str__(self) -> str:
        algo = getattr(self.construction_algo, "__name__", self.construction_algo)
        text = "Pretrain construction algo %r, number of pretrain epochs: %i" % (algo, self.get_train_num_epochs())
        if set(self.repetitions) != {1}:
            text += " (repetitions: %r)" % self.repetitions
        return text


def pretrain_from_config(config) -> Optional[Pretrain]:
    """The :class:`Pretrain` of ``pretrain`` (``"default"``, ``True`` or an options dict), or None."""
    value = config.typed_value("pretrain")
    if isinstance(value, str) and value.lower() in ("", "0", "false", "none", "no"):
        value = None
    if not value:
        return None
    if not (value is True or value == "default" or value in ("1", "true") or isinstance(value, dict)):
        raise ConfigError("config key 'pretrain': expected 'default', True or a dict of options, got %r" % (value,))
    network = config.typed_value("network")
    if not isinstance(network, dict) or not network:
        raise ConfigError("config key 'pretrain' needs 'network' (the full net dict)")
    opts = dict(value) if isinstance(value, dict) else {}
    if config.has("pretrain_copy_output_layer"):
        opts.setdefault("copy_output_layer", config.bool_or_other("pretrain_copy_output_layer", "ifpossible"))
    if config.has("pretrain_greedy"):
        opts.setdefault("greedy", config.bool("pretrain_greedy"))
    if config.has("pretrain_repetitions"):  # a string (command line, plain-text config): a list of ints
        reps = config.typed_value("pretrain_repetitions")
        opts.setdefault("repetitions", config.int_list("pretrain_repetitions") if isinstance(reps, str) else reps)
    if config.has("pretrain_construction_algo"):
        if callable(config.typed_value("pretrain_construction_algo")):  # RETURNN reads it as a string: an error
            raise ConfigError("config key 'pretrain_construction_algo' takes the name of an algorithm (RETURNN reads it "
                              "as a string); give a function as pretrain = {'construction_algo': f}")
        opts.setdefault("construction_algo", config.value("pretrain_construction_algo"))
    try:
        return Pretrain(network, **opts)
    except TypeError as exc:
        raise ConfigError("config key 'pretrain': %s" % exc)
