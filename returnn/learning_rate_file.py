"""The learning-rate file: per epoch, the learning rate used and the scores measured.

RETURNN's format, so files move between the two projects: a Python dict literal
``{epoch: EpochData(learningRate=..., error={key: value, ...}), ...}``. Newer RETURNN versions add
``':meta:name': value`` entries to ``error`` (effective learning rate, step counts, host name) and
write non-finite numbers as ``float('nan')``; old ones wrote a single score (``error=0.5``).

The file is **parsed, never evaluated**: :func:`parse_learning_rate_text` walks the syntax tree and
accepts only dict/list/tuple literals, strings, numbers (also ``nan``, ``inf``, ``float('inf')``,
``np.float64(0.1)``), ``True``/``False``/``None`` and ``EpochData(...)`` with keyword arguments.
Anything else is a :class:`DataError` naming the file and line (see ``docs/security.md``). Values
are checked as the config's are: a learning rate must be a finite number >= 0 (a negative or NaN
rate in the file would otherwise be used for that epoch); scores may be anything numeric, inf and
NaN included (a broken epoch's scores are data).
"""
from __future__ import annotations

import ast
import math
from typing import Any, Dict, Optional

from returnn.errors import DataError

META_PREFIX = ":meta:"
_NUMPY_SCALARS = ("float64", "float32", "float16", "int64", "int32", "float_")
_NAMED_FLOATS = {"nan": math.nan, "inf": math.inf}


class EpochData:
    """Learning rate, scores and (RETURNN's) meta information of one epoch."""

    def __init__(self, learningRate: float, error: Optional[Dict[str, float]] = None,  # noqa: N803 (file format)
                 meta: Optional[Dict[str, Any]] = None):
        self.learning_rate = float(learningRate)
        if isinstance(error, (int, float)):  # very old files: one score
            error = {"old_format_score": float(error)}
        error = dict(error or {})
        self.meta: Dict[str, Any] = dict(meta or {})
        self.meta.update({k[len(META_PREFIX):]: error.pop(k) for k in list(error) if k.startswith(META_PREFIX)})
        self.error: Dict[str, float] = {k: float(v) for k, v in error.items()}

    def __repr__(self) -> str:
        entries = [(k, float(v)) for k, v in self.error.items()]
        entries += [(META_PREFIX + k, v) for k, v in self.meta.items()]
        items = "".join("%r: %s,\n" % (k, literal_repr(v)) for k, v in sorted(entries))
        # RETURNN's better_repr: an empty dict (an epoch listed in learning_rates, not trained yet) is "{}"
        return "EpochData(learningRate=%s, error={%s})" % (literal_repr(self.learning_rate),
                                                            "\n" + items if items else "")


def literal_repr(value: Any) -> str:
    """``repr`` that :func:`parse_learning_rate_text` reads back (non-finite floats as RETURNN writes them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "float(%r)" % repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal_repr(v) for v in value)
        return ("[%s]" if isinstance(value, list) else "(%s,)" if len(value) == 1 else "(%s)") % inner
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (literal_repr(k), literal_repr(v)) for k, v in value.items())
    return repr(value)


def format_learning_rate_file(epochs: Dict[int, EpochData]) -> str:
    """The file text for ``epochs``."""
    return "{\n" + "".join("%i: %r,\n" % (ep, epochs[ep]) for ep in sorted(epochs)) + "}\n"


class _Reject(Exception):
    def __init__(self, node: ast.AST, what: str):
        super().__init__(what)
        self.lineno = getattr(node, "lineno", 1)


def _number(node: ast.AST) -> float:
    value = _literal(node)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Reject(node, "expected a number")
    return value


def _literal(node: ast.AST) -> Any:
    """The value of a literal expression; :class:`_Reject` for anything that is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _number(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Name) and node.id in _NAMED_FLOATS:
        return _NAMED_FLOATS[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [_literal(e) for e in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _Reject(node, "'**' in a dict")
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call) and _call_name(node) is not None and not node.keywords and len(node.args) == 1:
        name = _call_name(node)
        arg = node.args[0]
        if name == "float" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            try:
                return float(arg.value)
            except ValueError:
                raise _Reject(node, "float(%r) is not a number" % arg.value) from None
        if name in ("float", "int") or name.split(".")[-1] in _NUMPY_SCALARS and name.split(".")[0] in ("np", "numpy"):
            value = _number(arg)
            return int(value) if name == "int" or "int" in name.split(".")[-1] else float(value)
    raise _Reject(node, "not a literal (%s)" % type(node).__name__)


def _call_name(node: ast.Call) -> Optional[str]:
    """'float', 'np.float64', ... for a call of a plain or dotted name."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return "%s.%s" % (func.value.id, func.attr)
    return None


def _epoch_data(node: ast.AST) -> EpochData:
    if not (isinstance(node, ast.Call) and _call_name(node) == "EpochData"):
        raise _Reject(node, "expected EpochData(learningRate=..., error={...})")
    if node.args:
        raise _Reject(node, "EpochData takes keyword arguments only")
    kwargs: Dict[str, Any] = {}
    for kw in node.keywords:
        name = {"learningRate": "learningRate", "learning_rate": "learningRate"}.get(kw.arg or "", kw.arg)
        if name not in ("learningRate", "error", "meta") or name in kwargs:
            raise _Reject(kw.value, "EpochData: unexpected argument %r" % kw.arg)
        kwargs[name] = _literal(kw.value)
    if "learningRate" not in kwargs:
        raise _Reject(node, "EpochData without learningRate")
    lr = kwargs["learningRate"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)):
        raise _Reject(node, "learningRate is not a number")
    if not math.isfinite(lr) or lr < 0:  # checked as config key 'learning_rate' is: the rate would be used
        raise _Reject(node, "learningRate %s is not a finite number >= 0" % literal_repr(float(lr)))
    error = kwargs.get("error")
    if error is not None and not isinstance(error, (dict, int, float)) or isinstance(error, bool):
        raise _Reject(node, "error must be a dict of scores")
    if isinstance(error, dict):
        for key, value in error.items():
            if not isinstance(key, str):
                raise _Reject(node, "score key %r is not a string" % (key,))
            if not key.startswith(META_PREFIX) and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise _Reject(node, "score %r is not a number" % key)
    meta = kwargs.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise _Reject(node, "meta must be a dict")
    return EpochData(lr, error, meta)


def parse_learning_rate_text(text: str, filename: str) -> Dict[int, EpochData]:
    """Parses the file content ``text`` (``filename`` is for messages) without evaluating it."""
    try:
        tree = ast.parse(text, filename, mode="eval")
    except SyntaxError as exc:
        where = ":%i" % exc.lineno if exc.lineno else ""  # NUL bytes have no line
        raise DataError("%s%s: cannot parse learning-rate file: %s" % (filename, where, exc.msg))
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise DataError("%s: cannot parse learning-rate file: %s" % (filename, type(exc).__name__))
    body = tree.body
    if not isinstance(body, ast.Dict):
        raise DataError("%s:%i: learning-rate file must hold a dict {epoch: EpochData(...)}"
                        % (filename, getattr(body, "lineno", 1)))
    epochs: Dict[int, EpochData] = {}
    lines: Dict[int, int] = {}
    try:
        for key, value in zip(body.keys, body.values):
            if key is None:
                raise _Reject(value, "'**' in the epoch dict")
            epoch = _literal(key)
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise _Reject(key, "epoch key %r is not a non-negative integer" % (epoch,))
            if epoch in epochs:  # Python's dict would keep the last one silently: which rate was meant?
                raise _Reject(key, "epoch %i occurs twice (also at line %i)" % (epoch, lines[epoch]))
            epochs[epoch] = _epoch_data(value)
            lines[epoch] = getattr(key, "lineno", 1)
    except _Reject as exc:
        raise DataError("%s:%i: bad learning-rate file: %s" % (filename, exc.lineno, exc))
    except RecursionError:
        raise DataError("%s: bad learning-rate file: nested too deeply" % filename)
    return epochs


# A learning-rate file holds a few hundred bytes per epoch (RETURNN's with meta entries about 300):
# 16 MB are some 50,000 epochs. Parsing costs about 100 bytes of memory per byte of text, so a
# larger file (a planted one, or /dev/zero behind a link) would take the run's memory and time.
MAX_FILE_BYTES = 16 * 2 ** 20


def read_learning_rate_file(filename: str) -> Dict[int, EpochData]:
    """Reads and parses a learning-rate file (ours or RETURNN's); one-line DataError when it cannot.
    Only a regular file is read (a FIFO would block the run, a device never end), and at most
    :data:`MAX_FILE_BYTES`."""
    import os
    import stat
    try:
        fd = os.open(filename, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise DataError("learning-rate file %s is a directory" % filename)
    except OSError as exc:
        raise DataError("cannot read learning-rate file %s: %s" % (filename, exc.strerror or exc))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise DataError("learning-rate file %s is a directory" % filename)
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or \
                stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a file"
            raise DataError("learning-rate file %s is not a regular file (%s)" % (filename, kind))
        if st.st_size > MAX_FILE_BYTES:
            raise DataError("learning-rate file %s holds %i bytes, more than the %i MB a learning-rate file of "
                            "50,000 epochs needs: not a learning-rate file?" % (filename, st.st_size,
                                                                                MAX_FILE_BYTES // 2 ** 20))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as f:
            fd = -1
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DataError("cannot read learning-rate file %s: %s" % (filename, exc.strerror or exc))
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > MAX_FILE_BYTES:  # grew while read
        raise DataError("learning-rate file %s holds more than %i MB: not a learning-rate file?"
                        % (filename, MAX_FILE_BYTES // 2 ** 20))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DataError("%s:%i: learning-rate file is not UTF-8 text (byte %i)" % (filename, line, exc.start))
    return parse_learning_rate_text(text, filename)
