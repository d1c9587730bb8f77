"""Helpers that RETURNN configs import (``from returnn.util.basic import ...``)."""
from __future__ import annotations

import getpass
import importlib
import os
import shutil
import socket
import subprocess
import sys
import types

from returnn.util.numbers_dict import NumbersDict  # noqa: F401 (configs import it from here)

PY3 = True  # old configs branch on these
unicode = str
long = int


class NotSpecified:
    """Marks an argument that was not given (distinct from None)."""


def get_login_username() -> str:
    """The login name of the current user (works without a controlling terminal)."""
    try:
        return getpass.getuser()
    except Exception:  # pragma: no cover - unusual environments
        return str(os.getuid())


def hms(seconds: float) -> str:
    """Formats seconds as H:MM:SS, like RETURNN's log lines (hours keep counting past 24)."""
    total = max(0, int(round(seconds)))
    return "%i:%02i:%02i" % (total // 3600, total // 60 % 60, total % 60)


def get_hostname() -> str:
    """Short host name."""
    return socket.gethostname()


def human_bytes(n: float, sep: str = "") -> str:
    """1536 -> '1.5KB' (``sep`` between number and unit: ' ' gives '1.5 KB')."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return ("%.1f%s%s" % (n, sep, unit)) if unit != "B" else ("%i%s%s" % (n, sep, unit))
        n /= 1024.0
    return "%.1f%sTB" % (n, sep)


def parse_size(value) -> int:
    """Parses RETURNN-style sizes: 0, "0", "10G", "512M", "1k", -1 -> bytes (-1 = unlimited)."""
    if isinstance(value, (int, float)):
        return int(value)
    s = str(value).strip().upper()
    if not s:
        return 0
    factors = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
    if s[-1] == "B" and len(s) > 1 and s[-2] in factors:
        s = s[:-1]
    if s[-1] in factors:
        return int(float(s[:-1]) * factors[s[-1]])
    return int(float(s))


def atomic_write_text(path: str, text: str) -> None:
    """Writes a text file via a temporary file + fsync + rename, so readers never see half a file;
    never through a symbolic link (:mod:`returnn.util.safe_files`)."""
    from returnn.util.safe_files import atomic_write_bytes
    atomic_write_bytes(path, text.encode("utf-8"))


def fsync_dir(directory: str) -> None:
    """fsyncs a directory so a rename in it is durable."""
    from returnn.util.safe_files import fsync_dir as _fsync_dir
    _fsync_dir(directory)


class BackendEngine:
    """Which backend runs the network: always TensorFlow here (configs ask before using tf)."""

    TensorFlowNetDict = 1
    TensorFlow = 2
    Torch = 3
    Jax = 4
    selected_engine = TensorFlowNetDict

    @classmethod
    def select_engine(cls, engine=None, **_kwargs) -> None:
        """Only TensorFlow engines are accepted."""
        if engine not in (None, cls.TensorFlowNetDict, cls.TensorFlow):
            raise ValueError("this engine runs TensorFlow only (asked for backend %r)" % engine)
        cls.selected_engine = engine or cls.TensorFlowNetDict

    @classmethod
    def get_selected_engine(cls) -> int:
        return cls.selected_engine

    @classmethod
    def is_tensorflow_selected(cls) -> bool:
        return True

    @classmethod
    def is_torch_selected(cls) -> bool:
        return False

    @classmethod
    def is_jax_selected(cls) -> bool:
        return False


def describe_returnn_version() -> str:
    """Version of this package (with the git commit when run from a checkout)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        out = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        commit = out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return "returnn-tf2 (%s)" % commit if commit else "returnn-tf2"


def describe_tensorflow_version() -> str:
    """TensorFlow's version and install path."""
    import tensorflow as tf
    return "%s (%s)" % (tf.__version__, os.path.dirname(tf.__file__))


def cleanup_env_var_path(env_var: str, path_prefix: str) -> None:
    """Removes the entries equal to or under ``path_prefix`` from the ``:``-separated ``env_var``."""
    if env_var not in os.environ:
        return
    keep = []
    for entry in os.environ[env_var].split(":"):
        if entry == path_prefix or entry.startswith(path_prefix.rstrip("/") + "/"):
            print("Removing %s from %s." % (entry, env_var))
        else:
            keep.append(entry)
    os.environ[env_var] = ":".join(keep)


def py2_utf8_str_to_unicode(s: str) -> str:
    """Python 2 leftover: strings are already text."""
    return s


def cf(filename: str) -> str:
    """The i6 cluster cache manager: ``cf FILE`` prints a local copy's path. Without the ``cf``
    tool (or when it fails) the file itself is used."""
    if shutil.which("cf") is None:
        return filename
    try:
        out = subprocess.run(["cf", filename], capture_output=True, text=True, check=True, timeout=3600)
    except (OSError, subprocess.SubprocessError):
        return filename
    cached = out.stdout.strip()
    return cached if cached and os.path.exists(cached) else filename


def generic_import_module(filename: str) -> types.ModuleType:
    """Imports a module by name (``a.b``) or by file path (``dir/mod.py``: the first directory
    above it without ``__init__.py`` goes on ``sys.path``)."""
    if "/" not in filename:
        return importlib.import_module(filename)
    path = os.path.abspath(filename)
    if not os.path.exists(path):
        raise ImportError("generic_import_module: %s not found" % filename)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    directory = os.path.dirname(path)
    while os.path.exists(os.path.join(directory, "__init__.py")):
        parts.insert(0, os.path.basename(directory))
        directory = os.path.dirname(directory)
    if directory not in sys.path:
        sys.path.append(directory)
    return importlib.import_module(".".join(parts))


# ---- more of RETURNN's returnn.util.basic that configs import
class OptionalNotImplementedError(NotImplementedError):
    """RETURNN's marker of an optional method that is not implemented."""


def dict_joined(*ds: dict) -> dict:
    """The dicts merged, later ones winning."""
    out: dict = {}
    for d in ds:
        out.update(d)
    return out


def make_hashable(obj):
    """``obj`` with lists as tuples, dicts as sorted tuples of pairs, sets as frozensets (RETURNN's)."""
    if isinstance(obj, (list, tuple)):
        return tuple(make_hashable(x) for x in obj)
    if isinstance(obj, dict):
        return tuple(sorted(((make_hashable(k), make_hashable(v)) for k, v in obj.items()), key=repr))
    if isinstance(obj, (set, frozenset)):
        return frozenset(make_hashable(x) for x in obj)
    try:
        import numpy as np
        if isinstance(obj, np.ndarray):
            return tuple(make_hashable(x) for x in obj.tolist())
    except ImportError:  # pragma: no cover
        pass
    return obj


def better_repr(obj) -> str:
    """``repr`` with dicts in sorted key order (stable text, as RETURNN writes its files)."""
    if isinstance(obj, dict):
        return "{%s}" % ", ".join("%s: %s" % (better_repr(k), better_repr(v)) for k, v in sorted(obj.items(), key=repr))
    if isinstance(obj, list):
        return "[%s]" % ", ".join(better_repr(v) for v in obj)
    if isinstance(obj, tuple):
        return "(%s%s)" % (", ".join(better_repr(v) for v in obj), "," if len(obj) == 1 else "")
    return repr(obj)


def get_fwd_compat_kwargs() -> dict:
    """RETURNN passes this to config functions to make them take ``**kwargs``; nothing here."""
    return {}


def hms_fraction(seconds: float, decimals: int = 4) -> str:
    """Like :func:`hms`, with ``decimals`` digits of the seconds."""
    total = max(0.0, float(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return "%i:%02i:%0*.*f" % (hours, minutes, 3 + decimals if decimals else 2, decimals, secs)


def softmax(x, axis=None):
    """Numpy softmax along ``axis``."""
    import numpy as np
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def which(program: str):
    """The path of ``program`` on PATH, or None."""
    return shutil.which(program)


class DictAsObj:
    """A dict's entries as attributes."""

    def __init__(self, dikt: dict):
        self.__dict__.update(dikt)


class ObjAsDict(dict):
    """An object's attributes as a read-only dict view."""

    def __init__(self, obj):
        super().__init__()
        self.__obj = obj

    def __getitem__(self, item):
        try:
            return getattr(self.__obj, item)
        except AttributeError as exc:
            raise KeyError(item) from exc

    def __contains__(self, item) -> bool:
        return hasattr(self.__obj, item)

    def items(self):
        return vars(self.__obj).items()


class BehaviorVersion:
    """RETURNN's ``behavior_version``: the config's key (0 when unset); :meth:`require` fails when a
    config at that version or newer does what the version forbids."""

    _forced = None

    @classmethod
    def get(cls) -> int:
        if cls._forced is not None:
            return cls._forced
        from returnn.config import get_global_config
        return int(get_global_config().int("behavior_version") or 0)

    @classmethod
    def set(cls, version) -> None:
        cls._forced = None if version is None else int(version)

    @classmethod
    def is_set(cls) -> bool:
        return cls.get() > 0

    @classmethod
    def require(cls, condition: bool, message: str, version: int) -> None:
        if not condition and cls.get() >= version:
            raise ValueError("%s (behavior_version %i >= %i)" % (message, cls.get(), version))
