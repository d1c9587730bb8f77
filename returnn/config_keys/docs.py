"""Text generated from the key registry: ``rnn.py --help-keys`` and docs/config-keys.md."""
from __future__ import annotations

import fnmatch
import re
from typing import Dict, List, Optional, Tuple

from returnn.config_keys.registry import KEYS, RETURNN_DEFAULTS, RETURNN_IGNORED, RETURNN_UNSUPPORTED, Key

DOC_PATH = "docs/config-keys.md"


# Words users search for that key names spell out (RETURNN's names): pattern word -> name parts.
ABBREVIATIONS: Dict[str, Tuple[str, ...]] = {
    "lr": ("learning_rate",), "rate": ("learning_rate",), "newbob": ("learning_rate_control", "newbob"),
    "seq": ("seq", "sequence"), "sequence": ("seq",), "len": ("length",), "length": ("len",),
    "dim": ("dim", "num_inputs", "num_outputs", "extern_data"), "dimension": ("dim", "num_inputs", "num_outputs"),
    "feature": ("num_inputs", "extern_data", "window"), "classes": ("num_outputs", "target"),
    "num": ("num_", "max_"), "number": ("num_", "max_"), "count": ("num_", "max_"), "many": ("num_", "max_"),
    "bs": ("batch_size",), "size": ("size", "num_"),
    "hvd": ("horovod",), "mpi": ("horovod", "distributed"), "rank": ("horovod",), "ranks": ("horovod",),
    "distributed": ("horovod",), "parallel": ("horovod", "threads"),
    "ckpt": ("model", "load", "save_interval", "cleanup_old_models", "preload"),
    "checkpoint": ("model", "load", "save_interval", "cleanup_old_models", "preload", "import_model"),
    "opt": ("optimizer",), "optim": ("optimizer",), "adam": ("adam", "optimizer"), "sgd": ("optimizer",),
    "grad": ("grad", "gradient"), "gradient": ("grad",), "clip": ("gradient_clip",),
    "tb": ("tf_log_dir", "tf_log_step_interval"), "tensorboard": ("tf_log_dir", "tf_log_step_interval"),
    "verbose": ("log_verbosity",), "verbosity": ("log_verbosity",), "quiet": ("log_verbosity",),
    "thread": ("threads", "tf_session_opts"), "threads": ("threads", "tf_session_opts"), "cpu": ("threads",),
    "gpu": ("device",), "device": ("device",), "seed": ("random_seed", "seed"), "random": ("random_seed",),
    "data": ("train", "dev", "eval", "extern_data", "num_inputs", "num_outputs", "cache_size"),
    "dataset": ("train", "dev", "eval", "search_data"), "hdf": ("cache_size", "output_file"),
    "resume": ("start_epoch", "load", "model"), "restart": ("start_epoch", "load"), "epoch": ("epoch",),
    "chunk": ("chunk",), "l2": ("l2",), "reg": ("l2", "reg"), "decoding": ("search",), "beam": ("search",),
}


def _words(pattern: str) -> List[str]:
    return [w for w in re.split(r"[\s_,]+", pattern.lower()) if w]


def _initials_match(word: str, parts: List[str]) -> bool:
    """``word`` spells the initials of consecutive parts of a name (lr: learning_rate, msl: max_seq_length)."""
    if len(word) < 2:
        return False
    if any(not p.isalpha() for p in parts):  # L2_reg is no "lr"
        return False
    initials = "".join(p[0] for p in parts)
    return word in initials and any(initials[i:i + len(word)] == word for i in range(len(initials)))


def _word_in_name(word: str, name: str) -> bool:
    low, parts = name.lower(), [p for p in name.lower().split("_") if p]
    forms = {word, word[:-1] if len(word) > 3 and word.endswith("s") else word}
    expansions = [e for f in forms for e in ABBREVIATIONS.get(f, ())]
    return (any(f in low for f in forms) or any(e in low for e in expansions)
            or _initials_match(word, parts))


def _word_in_text(word: str, text: str) -> bool:
    forms = {word, word[:-1] if len(word) > 3 and word.endswith("s") else word} | set(ABBREVIATIONS.get(word, ()))
    return any(re.search(r"\b%ss?\b" % re.escape(f.replace("_", " ")), text.lower().replace("_", " "))
               for f in forms)


def _matches(name: str, pattern: Optional[str], doc: str = "") -> bool:
    """Whether the key ``name`` (described by ``doc``) is what ``pattern`` looks for: a glob on the name
    (``horovod_*``), else every word of the pattern is in the name (a substring, an abbreviation RETURNN's
    names spell out, ``lr`` for learning_rate, or the initials of its parts) or a word of ``doc``."""
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    if pattern.lower() in name.lower():
        return True
    words = _words(pattern)
    return bool(words) and all(_word_in_name(w, name) or (doc and _word_in_text(w, doc)) for w in words)


def _groups(keys: List[Key]) -> List[str]:
    seen: List[str] = []
    for key in keys:
        if key.group not in seen:
            seen.append(key.group)
    return seen


def help_keys_text(pattern: Optional[str] = None) -> str:
    """Declared keys (name, type, default, doc) matching ``pattern`` (a glob, or words searched in the
    names, their abbreviations and the descriptions: :func:`_matches`), by group; then RETURNN's keys
    this engine does not read that match by name."""
    keys = [k for k in KEYS.values() if _matches(k.name, pattern, k.doc)]
    out: List[str] = []
    for group in _groups(keys):
        out.append("[%s]" % group)
        for key in (k for k in keys if k.group == group):
            out.append("  %-34s %-12s default %-10s %s" % (key.name, key.type, repr(key.default), key.doc))
    for title, table in (("RETURNN keys without effect here", RETURNN_IGNORED),
                         ("RETURNN keys not implemented here (refused unless RETURNN's default)", RETURNN_UNSUPPORTED)):
        names = sorted(n for n in table if _matches(n, pattern))
        if names and pattern:
            out.append("[%s]" % title)
            out.extend("  %-34s %s%s" % (n, table[n], "" if n not in RETURNN_DEFAULTS else
                                          "; only %r" % (RETURNN_DEFAULTS[n][0],)) for n in names)
        elif names:
            out.append("[%s] %i keys; rnn.py --help-keys PATTERN shows them" % (title, len(names)))
    if not out:
        return "no config key matches %r" % pattern
    return "\n".join(out)


def markdown() -> str:
    """The whole reference as Markdown (docs/config-keys.md)."""
    out = ["# Config keys", "",
           "Generated from `returnn/config_keys/` by `tools/gen-config-keys-doc.py`; do not edit by hand.",
           "`rnn.py --help-keys [PATTERN]` prints the same. A key that is not listed gets a warning at",
           "start-up naming the nearest known key.", ""]
    keys = list(KEYS.values())
    for group in _groups(keys):
        out += ["## %s" % group.capitalize(), "", "| Key | Type | Default | Meaning |", "|---|---|---|---|"]
        for key in (k for k in keys if k.group == group):
            doc = key.doc.replace("|", "\\|")
            out.append("| `%s` | %s | `%r` | %s |" % (key.name, key.type.replace("|", " or "), key.default, doc))
        out.append("")
    for title, table in (("RETURNN keys without effect here", RETURNN_IGNORED),
                         ("RETURNN keys not implemented here (refused unless RETURNN's default)", RETURNN_UNSUPPORTED)):
        out += ["## %s" % title, ""]
        by_reason: dict = {}
        for name in sorted(table):
            by_reason.setdefault(table[name], []).append(name)
        for reason, names in by_reason.items():
            listed = ", ".join("`%s`" % n if n not in RETURNN_DEFAULTS else "`%s` (`%r`)" % (n, RETURNN_DEFAULTS[n][0])
                               for n in names)
            out += ["%s: %s." % (reason[0].upper() + reason[1:], listed), ""]
    return "\n".join(out)
