"""No option is accepted and ignored: every declared option of every layer class, every loss option
and every config key has its RETURNN effect (code reads it), or is refused unless it has a value
that changes nothing here (``Option(..., only=(...))``, a one-line NetworkError / ConfigError), or is
declared as a no-op with the reason why the result is the same here (``Option(..., noop="why")``,
``ignore(names, reason)`` for config keys).

"Read by code" is a source scan (``tests/option_scan.py``, whose docstring lists what counts:
``self.opt("x")``, ``opts.get("x")``, ``opts["x"]``, ``"x" in opts``, the same through loop
variables over literal tuples, class attributes and helper functions that read their parameter):

- a layer class's options are looked up in the modules of the classes of its hierarchy (below the
  base ``Layer``) and the helper modules they import (``returnn.*`` modules that define no layer
  class of their own, e.g. ``helpers``, ``spatial``, ``lstm_layernorm``), plus the modules listed in
  :data:`READ_ELSEWHERE` for classes whose options another module reads on their behalf (a choice's
  beam options are read by the rec loop's beam search). Options in a class's ``ref_options`` are
  read by the network (it builds the named layer and passes it as an extra source);
- the base ``Layer``'s options are looked up in every module of ``returnn/tf``;
- loss options (``Loss.declared()``: the common ones, each loss's ``options``, and nested tables such
  as ``CtcLoss.ctc_options``) in ``returnn/tf/losses.py``;
- config keys declared in ``returnn/config_keys/declarations.py``: a config getter call with the
  key (``config.int("num_epochs")``, also through literal loops and tables) anywhere in
  ``returnn/`` or ``tools/``; RETURNN keys not read are listed in ``returnn_keys.py`` with the reason
  they change nothing here (``ignore``) or with RETURNN's default, the only value not refused at
  start-up (``refuse``).

Options whose effect belongs to code owned elsewhere are listed explicitly (``LEAD_PENDING*``); each
list fails once an entry is handled, so it only shrinks.
"""
from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple, Type

import pytest

from helpers import REPO
from option_scan import Scan, imported_modules
from returnn.errors import NetworkError
from returnn.tf import layers as _all_layers  # noqa: F401  (registers every layer class)
from returnn.tf.layers.base import LAYER_CLASSES, Layer
from returnn.tf.layers.options import Option, declared_options

TF_DIR = REPO / "returnn" / "tf"

# Base-layer options owned by the lead engineer (returnn/tf/layers/base.py, network.py): pending there.
LEAD_PENDING: set = set()
# Layer options whose effect is which layers the network builds (returnn/tf/network.py, the lead's):
# RETURNN builds copy's extra_deps layers (they become dependencies); here layer_sources() takes only
# string-valued ref_options, and a list is common. Pending there; the test fails once one is handled.
LEAD_PENDING_LAYER_OPTIONS: Dict[str, Set[str]] = {}
# Loss options that need the network (the lead's): RETURNN's CTC error decodes with beam search of
# beam_width in evaluation (greedy in training); Loss.compute does not know train from eval yet.
LEAD_PENDING_LOSS_OPTIONS: Set[Tuple[str, str]] = set()

# Layer classes whose options (some of them) another module reads on their behalf.
READ_ELSEWHERE: Dict[str, List[str]] = {
    "ChoiceLayer": ["returnn/tf/layers/rec_net/search.py", "returnn/tf/layers/rec_net/layer.py",
                    "returnn/tf/layers/rec_net/deps.py", "returnn/tf/layers/rec_net/search_scores.py"],
    "CopyLayer": ["returnn/tf/network.py"],  # extra_deps: layers the network builds and runs with it
    "DropoutLayer": ["returnn/tf/network.py"],
    "SourceLayer": ["returnn/tf/net_sources.py"],  # data_key: the data entry it reads
}


def _subclasses(cls: type) -> Iterable[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def layer_classes() -> List[Type[Layer]]:
    """Every layer class: registered ones (aliases included), class_selector targets (the rec
    sub-network, the rec step cell, eval for combine) and any other subclass of Layer."""
    from returnn.tf.layers.rec_net.layer import RecSubnetLayer  # noqa: F401  (class_selector target)
    from returnn.tf.layers.rec_step import RecStepLayer  # noqa: F401  (rec in a loop)
    classes = set(LAYER_CLASSES.values()) | set(_subclasses(Layer))
    return sorted((c for c in classes if c.__module__.startswith("returnn.")), key=lambda c: (c.__module__, c.__name__))


def _source(cls: type) -> Path:
    return Path(inspect.getsourcefile(cls)).resolve()


def _layer_homes(classes: Iterable[type]) -> Set[Path]:
    return {_source(c) for c in classes}


def layer_modules(cls: Type[Layer], homes: Set[Path]) -> Set[Path]:
    """The modules whose reads count for ``cls`` (see the module docstring)."""
    mods: Set[Path] = set()
    for klass in cls.__mro__:
        if klass is Layer or not (isinstance(klass, type) and issubclass(klass, Layer)):
            continue
        home = _source(klass)
        mods.add(home)
        mods |= {m for m in imported_modules(home, REPO) if m not in homes and m != _source(Layer)}
        mods |= {(REPO / p).resolve() for p in READ_ELSEWHERE.get(klass.__name__, ())}
    return mods


def unhandled_options(cls: Type[Layer], scan: Scan, homes: Set[Path], skip: Iterable[str] = ()) -> List[str]:
    """Options of ``cls`` (its own and inherited, not the base Layer's) neither read, nor refused
    outside ``only``, nor declared as a no-op."""
    base = {o.name for o in Layer.options}
    reads = scan.reads(layer_modules(cls, homes)) | set(cls.ref_options)
    return [o.name for o in declared_options(cls).values()
            if o.name not in base and o.name not in skip and not handled(o, reads)]


def handled(opt: Option, reads: Set[str]) -> bool:
    return opt.name in reads or opt.only is not None or bool(opt.noop)


@pytest.fixture(scope="module")
def tf_scan() -> Scan:
    return Scan(sorted((REPO / "returnn").rglob("*.py")))


def test_every_layer_option_has_an_effect_a_refusal_or_a_reason(tf_scan):
    classes = layer_classes()
    homes = _layer_homes(classes)
    problems = []
    for cls in classes:
        bad = unhandled_options(cls, tf_scan, homes, skip=LEAD_PENDING_LAYER_OPTIONS.get(cls.__name__, ()))
        if bad:
            problems.append("%s (%s, %s): %s" % (cls.__name__, cls.layer_class, cls.__module__, ", ".join(bad)))
    assert not problems, ("options accepted but never read: give them their RETURNN effect, refuse other values "
                          "with Option(..., only=(...)), or declare Option(..., noop='why the result is the same "
                          "here'):\n" + "\n".join(problems))


def test_base_layer_options(tf_scan):
    """The base Layer's options, read anywhere in returnn/tf; the lead's pending ones excepted (and
    the pending list holds only options that still need it)."""
    reads = tf_scan.reads(sorted(TF_DIR.rglob("*.py")))
    bad = [o.name for o in Layer.options if o.name not in LEAD_PENDING and not handled(o, reads)]
    assert not bad, "base Layer options accepted but never read: %s" % bad
    done = sorted(o.name for o in Layer.options if o.name in LEAD_PENDING and (o.only is not None or o.noop))
    assert not done, "drop these from LEAD_PENDING (handled now): %s" % done


def test_lead_pending_layer_options_still_pending(tf_scan):
    """The pending list shrinks: an entry whose option got its effect, refusal or reason must go."""
    classes = {c.__name__: c for c in layer_classes()}
    homes = _layer_homes(classes.values())
    for name, pending in LEAD_PENDING_LAYER_OPTIONS.items():
        still = set(unhandled_options(classes[name], tf_scan, homes))
        assert pending <= still, "drop from LEAD_PENDING_LAYER_OPTIONS[%r] (handled now): %s" % (name, pending - still)


def test_declarations_are_consistent():
    """``only`` holds the default; a no-op says why; nobody declares both."""
    for cls in layer_classes() + [Layer]:
        for o in declared_options(cls).values():
            where = "%s.%s" % (cls.__name__, o.name)
            assert not (o.only is not None and o.noop), where
            if o.only is not None:
                assert isinstance(o.only, tuple) and o.accepts(o.default), where
            if o.noop is not None:
                assert isinstance(o.noop, str) and len(o.noop.split()) >= 3, where


def test_refusal_is_one_line_naming_layer_and_option():
    from returnn.tf.layers.options import check_unknown
    opt = Option("unroll", False, "RETURNN's loop unrolling", only=(False,))
    check_unknown("layer 'x' (rec)", {"unroll": False}, {"unroll": opt})
    with pytest.raises(NetworkError) as exc:
        check_unknown("layer 'x' (rec)", {"unroll": True}, {"unroll": opt})
    assert "\n" not in str(exc.value) and "layer 'x' (rec)" in str(exc.value) and "'unroll'" in str(exc.value)
    assert not Option("a", 0, "d", only=(0,)).accepts(False) and not Option("a", None, "d", only=(None,)).accepts(0)


def _dummy_module(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "dummy_layers.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_audit_catches_an_unread_option(tmp_path, monkeypatch):
    """The scan can fail: a class declaring an option no code reads is reported; reads through
    opt(), opts.get, opts[...], ``in opts``, literal loops and helpers that read their parameter count."""
    path = _dummy_module(tmp_path, '''
        from returnn.tf.layers.base import Layer
        from returnn.tf.layers.options import Option

        KEYS = ("via_constant",)


        def helper(layer, option_name):
            return layer.opt(option_name)


        class DummyLayer(Layer):
            layer_class = "dummy_audit"
            options = (Option("read", 1, "read by opt"), Option("unread", 2, "declared, never read"),
                       Option("got", 0, "opts.get"), Option("indexed", 0, "opts[...]"), Option("tested", 0, "in opts"),
                       Option("looped", 0, "loop"), Option("via_constant", 0, "constant"),
                       Option("via_helper", 0, "helper"), Option("refused", 0, "refused", only=(0,)),
                       Option("noop", 0, "no-op", noop="the same result here whatever the value"),
                       Option("only_in_doc", 0, "named in a message only"))

            def __init__(self, name, opts, sources, seed=42):
                super().__init__(name, opts, sources, seed)
                self.opt("read") + opts.get("got", 0) + (opts["indexed"] if "tested" in opts else 0)
                for key in ("looped",):
                    self.opt(key)
                for key in KEYS:
                    self.opt(key)
                helper(self, "via_helper")
                raise ValueError("only_in_doc")
    ''')
    monkeypatch.syspath_prepend(str(tmp_path))
    import dummy_layers
    try:
        scan = Scan([path] + sorted((REPO / "returnn").rglob("*.py")))
        homes = _layer_homes(layer_classes())
        assert unhandled_options(dummy_layers.DummyLayer, scan, homes) == ["unread", "only_in_doc"]
    finally:
        sys.modules.pop("dummy_layers", None)
        LAYER_CLASSES.pop("dummy_audit", None)


# ---------------------------------------------------------------- losses

def loss_option_declarations():
    """(loss name, Option) for every loss_opts option and nested option table (ctc_opts) of every loss."""
    from returnn.tf.losses import LOSS_CLASSES
    for name, cls in sorted(LOSS_CLASSES.items()):
        for opt in list(cls.declared().values()) + list(getattr(cls, "ctc_options", ())):
            yield name, opt


def test_every_loss_option_has_an_effect_a_refusal_or_a_reason(tf_scan):
    reads = tf_scan.reads([TF_DIR / "losses.py", TF_DIR / "losses_ctc.py", TF_DIR / "sampling.py", TF_DIR / "losses_tts.py",
                           TF_DIR / "losses_search.py", TF_DIR / "losses_extra.py"])  # own modules
    bad = sorted("%s: %s" % (name, o.name) for name, o in loss_option_declarations()
                 if not handled(o, reads) and (name, o.name) not in LEAD_PENDING_LOSS_OPTIONS)
    assert not bad, "loss_opts accepted but never read (effect, only=..., or noop='why'): %s" % bad
    still = {(name, o.name) for name, o in loss_option_declarations() if not handled(o, reads)}
    assert LEAD_PENDING_LOSS_OPTIONS <= still, "drop from LEAD_PENDING_LOSS_OPTIONS: %s" % (
        LEAD_PENDING_LOSS_OPTIONS - still)
    for name, o in loss_option_declarations():
        assert not (o.only is not None and o.noop) and (o.only is None or o.accepts(o.default)), (name, o.name)


# ---------------------------------------------------------------- config keys

def config_key_reads() -> Set[str]:
    """Keys read by a config getter (``<...config...>.int("x")`` etc., also through literal loops and
    tables, see option_scan) in returnn/, tools/ and rnn.py (the getters in returnn/config.py aside)."""
    import ast
    from option_scan import _Module
    getters = {"int", "float", "bool", "is_true", "value", "typed_value", "opt_typed_value", "list", "int_list",
               "float_list", "has", "is_typed", "get_of_type"}
    files = sorted((REPO / "returnn").rglob("*.py")) + sorted((REPO / "tools").rglob("*.py")) + [REPO / "rnn.py"]
    found: Set[str] = set()
    for path in files:
        if path == REPO / "returnn" / "config.py" or "config_keys" in path.parts:
            continue
        mod = _Module(path)
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in getters \
                    and node.args and "config" in ast.unparse(node.func.value).lower():
                key = node.args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.add(key.value)
                elif isinstance(key, ast.Name):
                    found.update(mod.loop_values(key) or ())
    return found


def test_every_declared_config_key_is_read():
    from returnn import config_keys
    unread = sorted(set(config_keys.KEYS) - config_key_reads())
    assert not unread, "declared config keys no code reads (read them, or list them in returnn_keys.py): %s" % unread


def test_returnn_keys_not_read_here_say_why_or_are_refused():
    """Every RETURNN key the engine does not read is a no-op with its reason, or refused unless it has
    RETURNN's default (the old warn-only group is gone)."""
    from returnn.config_keys.registry import RETURNN_DEFAULTS, RETURNN_IGNORED, RETURNN_UNSUPPORTED
    for name, reason in RETURNN_IGNORED.items():
        assert len(reason.split()) >= 3, name
    assert set(RETURNN_UNSUPPORTED) == set(RETURNN_DEFAULTS)
    read = config_key_reads()
    assert not (read & (set(RETURNN_IGNORED) | set(RETURNN_UNSUPPORTED))), "listed as not read, but read"


def test_unsupported_returnn_key_refused_unless_default():
    from returnn.config_keys.registry import RETURNN_DEFAULTS, RETURNN_UNSUPPORTED
    from returnn.config_keys.values import check_values
    from returnn.errors import ConfigError
    for name in RETURNN_UNSUPPORTED:
        check_values({name: RETURNN_DEFAULTS[name][0]})
        check_values({name: None})
    with pytest.raises(ConfigError) as exc:
        check_values({"share_batches": True})
    assert "'share_batches'" in str(exc.value) and "\n" not in str(exc.value)
    check_values({"shuffle_batches": False, "share_batches": False, "inf_value": float("inf"), "start_batch": "auto"})
    with pytest.raises(ConfigError, match="'global_norm_tag'"):
        check_values({"global_norm_tag": "encoder"})


def test_unsupported_returnn_key_stops_rnn_py_in_one_line(tmp_path):
    from helpers import TINY_12AX, assert_one_line_error, run_rnn, train_args, write_config
    config = write_config(tmp_path / "c.config", TINY_12AX + "gradient_clip_global_norm_tag = 'encoder'\n")
    assert_one_line_error(run_rnn(train_args(config, tmp_path)), "gradient_clip_global_norm_tag")
