"""RETURNN-style configuration: Python or JSON files, ``++key value`` overrides, typed getters.

A Python config is executed as a module; its public module-level variables become config
entries. While it runs, ``config`` (this object) is in its namespace, already holding the values
given with ``++key value`` on the command line, so the config can read them.
"""
from __future__ import annotations

import ast
import json
import numbers
import os
import re
import sys
import traceback
import types
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from returnn import config_keys
from returnn.cmdline_flags import take_flag
from returnn.errors import ConfigError

_UNSET: Any = object()
"""Default of the getters' ``default``: the key's declared default (returnn/config_keys/)."""
CHECK_KEYS_ENV = "RETURNN_CHECK_KEYS"
"""When set (the test suite sets it), engine code reading an undeclared key raises UndeclaredKeyError."""

_global_config: Optional["Config"] = None


def get_global_config(raise_exception: bool = True, auto_create: bool = False,
                      return_empty_if_none: bool = False) -> Optional["Config"]:
    """The config of the running process (set by the CLI before the config file runs, so config code
    may call it too). Without one: an empty config, as RETURNN's ``auto_create`` /
    ``return_empty_if_none`` give (``raise_exception`` is accepted for RETURNN's signature)."""
    global _global_config
    if _global_config is None:
        _global_config = Config()
    return _global_config


def set_global_config(config: "Config") -> None:
    """Makes ``config`` the one :func:`get_global_config` returns."""
    global _global_config
    _global_config = config


class UndeclaredKeyError(AssertionError):
    """Engine code read a config key that returnn/config_keys/declarations.py does not declare (a bug)."""


def _check_declared(key: str) -> None:
    """Under ``RETURNN_CHECK_KEYS``: engine code (not a config file) may read declared keys only."""
    if not os.environ.get(CHECK_KEYS_ENV) or config_keys.lookup(key) is not None:
        return
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    caller = frame.f_globals.get("__name__", "") if frame is not None else ""
    if caller == "returnn" or caller.startswith("returnn."):
        raise UndeclaredKeyError("%s reads config key %r, which is not declared in returnn/config_keys/declarations.py"
                                 % (caller, key))


def _default(key: str, default: Any) -> Any:
    """``default``, or the declared default of ``key`` when the caller gave none."""
    _check_declared(key)
    return config_keys.default_of(key) if default is _UNSET else default


def parse_override_value(text: str, current: Any = None, key: Optional[str] = None) -> Any:
    """Parses the value of a ``++key value`` argument.

    A key that already holds a string, or is declared as a string, stays a string. Otherwise
    ``true``/``false`` become bools and anything that is a Python literal is parsed as one; the rest
    stays a string.
    """
    if isinstance(current, str):
        return text
    declared = config_keys.lookup(key) if key else None
    if current is None and declared is not None and declared.types == ["str"]:
        return text
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    if isinstance(current, bool) and isinstance(value, int):
        return bool(value)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def strip_json_comments(text: str) -> str:
    """``text`` without ``// ...`` and ``/* ... */`` comments outside strings (RETURNN's JSON
    configs have them); newlines stay, so error line numbers still match the file."""
    out: List[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _unescape(value: str) -> str:
    """RETURNN's escape for values starting with '-': ``++threshold +-0.1`` sets -0.1."""
    return value[1:] if value.startswith("+-") else value


def split_cmd_args(args: Sequence[str]) -> Tuple[List[str], List[Tuple[str, str]]]:
    """Splits argv into config files and ``(key, value)`` overrides (``++key value`` or ``++key=value``,
    and RETURNN's old options such as ``--task search`` or ``-x search``, see
    :mod:`returnn.cmdline_flags`; ``--config FILE`` is one more file). A value ``+-0.1`` means ``-0.1``,
    as in RETURNN. Other arguments starting with ``-`` are returned as files (the caller rejects them)."""
    files: List[str] = []
    overrides: List[Tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag = take_flag(args, i) if arg.startswith("-") else None
        if flag is not None:
            key, value, i = flag
            if key:
                overrides.append((key, _unescape(value)))
            else:
                files.append(value)
            continue
        if arg.startswith("++"):
            key = arg[2:]
            if "=" in key:
                key, value = key.split("=", 1)
            else:
                if i + 1 >= len(args):
                    raise ConfigError("command line: ++%s needs a value" % key)
                value = args[i + 1]
                i += 1
            if not key:
                raise ConfigError("command line: empty key in %r" % arg)
            overrides.append((key, _unescape(value)))
        else:
            files.append(arg)
        i += 1
    return files, overrides


def _bool_word(text: str) -> Optional[bool]:
    """A string that reads as a bool ("true", "yes", "on", "1" / "false", "no", "off", "0"), else None."""
    low = text.strip().lower()
    return True if low in ("true", "yes", "on", "1") else False if low in ("false", "no", "off", "0") else None


class Config:
    """Holds config entries; typed getters with defaults."""

    def __init__(self, items: Optional[Dict[str, Any]] = None):
        self.typed_dict: Dict[str, Any] = dict(items or {})
        self.files: List[str] = []
        self.cmdline_keys: List[str] = []  # keys set with ++key value

    # ---- loading
    def load_file(self, filename: str) -> None:
        """Loads a Python or JSON config file and merges its entries."""
        if not os.path.exists(filename):
            raise ConfigError("config file not found: %s" % filename)
        try:
            with open(filename, encoding="utf-8-sig") as f:  # a leading BOM is not part of the config
                content = f.read()
        except OSError as exc:
            raise ConfigError("cannot read config file %s: %s" % (filename, exc.strerror))
        except UnicodeDecodeError as exc:
            raise ConfigError("config file %s is not UTF-8 text (byte %i)" % (filename, exc.start))
        form = config_form(filename, content)  # a data file is refused here, never run
        self.files.append(filename)
        if form == "json":
            self._load_json(filename, content)
        elif form == "lines":
            self._load_lines(filename, content)  # RETURNN's old "key value" line format
        else:
            self._load_python(filename, content)

    def _load_lines(self, filename: str, content: str) -> None:
        """RETURNN's old line format: ``key value`` per line, ``#`` starts a comment, ``include
        FILE`` loads another config; values are read like ``++key value`` (numbers, true/false,
        Python literals, else strings)."""
        for number, line in enumerate(content.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                raise ConfigError("%s:%i: expected 'key value', got %r" % (filename, number, line))
            key, value = parts
            if not _LINE_KEY.fullmatch(key) or value.startswith("=") or "=" in key:
                raise ConfigError("%s:%i: expected 'key value' (RETURNN's line format), got %r; a Python config "
                                  "needs a '#!' first line (e.g. '#!rnn.py') or a .config/.py name"
                                  % (filename, number, line))
            if key == "include":
                for name in value.split(","):
                    path = name.strip()
                    if not os.path.exists(path):  # relative to the working directory, else to this file
                        path = os.path.join(os.path.dirname(filename), path)
                    self.load_file(path)
                continue
            self.typed_dict[key] = parse_override_value(value, self.typed_dict.get(key), key)

    def _load_json(self, filename: str, content: str) -> None:
        try:
            obj = json.loads(strip_json_comments(content))
        except json.JSONDecodeError as exc:
            raise ConfigError("%s:%i: JSON syntax error: %s" % (filename, exc.lineno, exc.msg))
        if not isinstance(obj, dict):
            raise ConfigError("%s: a JSON config must be an object" % filename)
        self.typed_dict.update(obj)

    def _load_python(self, filename: str, content: str) -> None:
        try:
            code = compile(content, filename, "exec")
        except SyntaxError as exc:
            raise ConfigError("%s:%s: syntax error: %s" % (filename, exc.lineno, exc.msg))
        from returnn.config_env import config_builtins, install_getlogin_fallback, install_old_module_names
        install_old_module_names()
        install_getlogin_fallback()
        namespace: Dict[str, Any] = dict(self.typed_dict)
        namespace.update({"__file__": filename, "__name__": "__returnn_config__", "config": self,
                          "__builtins__": config_builtins()})
        # While the file runs, the config's entries are its namespace (RETURNN runs it in its typed_dict):
        # code it calls sees the names set so far (config.value("target"), typed_dict["target"]).
        entries, self.typed_dict = self.typed_dict, namespace
        try:
            exec(code, namespace)
        except Exception as exc:
            line = _config_error_line(exc, filename)
            raise ConfigError("%s:%s: error while running config: %s: %s"
                              % (filename, line, type(exc).__name__, exc)) from exc
        finally:
            self.typed_dict = entries
        for key, value in namespace.items():
            # '_name's stay readable (RETURNN's typed_value('_f'): config code hides helpers that way)
            if key.startswith("__") or key == "config" or _is_imported_object(value):
                continue
            self.typed_dict[key] = value

    def apply_overrides(self, overrides: Iterable[Tuple[str, str]]) -> None:
        """Applies ``++key value`` overrides, typed by the value the key already holds."""
        for key, text in overrides:
            self.typed_dict[key] = parse_override_value(text, self.typed_dict.get(key), key)

    def parse_cmd_args(self, args: Sequence[str]) -> None:
        """Loads all config files of ``args`` and applies the ``++`` overrides after them.

        The overrides are visible to Python configs while they run (as ``config`` entries and as
        module globals), and are applied again afterwards so they win over the config's own values.
        """
        files, overrides = split_cmd_args(args)
        self.cmdline_keys += [key for key, _ in overrides]
        self.apply_overrides(overrides)
        for filename in files:
            self.load_file(filename)
        self.apply_overrides(overrides)

    # ---- access
    def has(self, key: str) -> bool:
        """Whether ``key`` is set."""
        _check_declared(key)
        return key in self.typed_dict

    def set(self, key: str, value: Any) -> None:
        """Sets ``key``."""
        self.typed_dict[key] = value

    def typed_value(self, key: str, default: Any = _UNSET) -> Any:
        """The raw Python value of ``key``."""
        return self.typed_dict.get(key, _default(key, default))

    def value(self, key: str, default: Any = _UNSET) -> Optional[str]:
        """``key`` as a string (lists joined with commas), or ``default``."""
        default = _default(key, default)
        if key not in self.typed_dict:
            return default
        value = self.typed_dict[key]
        if value is None:
            return default
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)

    def bool(self, key: str, default: Any = _UNSET) -> Any:
        """``key`` as a bool; accepts bools, numbers and strings like 'true'/'0'."""
        if default is _UNSET and key not in config_keys.KEYS:
            default = False  # RETURNN's default for an undeclared key
        default = _default(key, default)
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        if isinstance(value, str):
            word = _bool_word(value)
            if word is None and value.strip():
                raise ConfigError("config key %r: expected a boolean, got %r" % (key, value))
            return bool(word)
        return bool(value)

    def bool_or_other(self, key: str, default: Any = None) -> Any:
        """``key`` as it is, a string as a bool where it reads as one (RETURNN's), or ``default``."""
        value = self.typed_dict.get(key)
        if value is None or value == "":
            return default
        word = _bool_word(value) if isinstance(value, str) else None
        return value if word is None else word

    def is_true(self, key: str, default: Any = _UNSET) -> Any:
        """Same as :meth:`bool`."""
        return self.bool(key, default)

    def int(self, key: str, default: Any = _UNSET) -> Optional[int]:
        """``key`` as an int; a float that is not integral is an error naming the key."""
        default = _default(key, default)
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, numbers.Integral):  # also numpy integers
            return int(value)
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError("config key %r: expected an integer, got %r" % (key, value))

    def float(self, key: str, default: Any = _UNSET) -> Optional[float]:
        """``key`` as a float."""
        default = _default(key, default)
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError("config key %r: expected a number, got %r" % (key, value))

    def list(self, key: str, default: Any = _UNSET) -> Optional[list]:
        """``key`` as a list (a comma-separated string is split)."""
        default = _default(key, default)
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return [value]

    def opt_typed_value(self, key: str, default: Any = _UNSET) -> Any:
        """Same as :meth:`typed_value` (RETURNN's name for configs that call it)."""
        return self.typed_value(key, default)

    def is_typed(self, key: str) -> bool:
        """Whether ``key`` is set (every value here keeps its Python type)."""
        _check_declared(key)
        return key in self.typed_dict

    def int_list(self, key: str, default: Any = _UNSET) -> Optional[List[int]]:
        """``key`` as a list of ints."""
        return self._typed_list(key, default, int, "integers")

    def float_list(self, key: str, default: Any = _UNSET) -> Optional[List[float]]:
        """``key`` as a list of floats."""
        return self._typed_list(key, default, float, "numbers")

    def _typed_list(self, key: str, default: Any, cast, what: str) -> Optional[list]:
        values = self.list(key, None)
        if values is None:
            return _default(key, default)
        try:
            return [cast(v) for v in values]
        except (TypeError, ValueError):
            raise ConfigError("config key %r: expected a list of %s, got %r" % (key, what, self.typed_dict[key]))

    def get_of_type(self, key: str, types_, default: Any = _UNSET) -> Any:
        """The value of ``key`` if it is an instance of ``types_``, else an error naming the key."""
        default = _default(key, default)
        if key not in self.typed_dict or self.typed_dict[key] is None:
            return default
        value = self.typed_dict[key]
        if not isinstance(value, types_):
            raise ConfigError("config key %r: unexpected value %r" % (key, value))
        return value


def _is_imported_object(value: Any) -> bool:
    """Modules, classes and functions imported by a config are not config entries; functions the
    config defines itself are (RETURNN configs may define e.g. custom hooks), and so are the callables
    it makes (a bound method ``get_network = Pretrain(...).get_network``, a partial)."""
    if isinstance(value, types.ModuleType) or isinstance(value, type):
        return True
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return getattr(value, "__module__", None) != "__returnn_config__"
    return False


_LINE_KEY = re.compile(r"[A-Za-z_][\w.:-]*")

# Names of data files (HDF, text corpora and lists, archives, arrays, pickles, audio, the engine's
# own outputs): a file named so is never run as a Python config, whatever its first line says.
DATA_SUFFIXES = (".hdf", ".hdf5", ".h5", ".txt", ".text", ".gz", ".bz2", ".xz", ".zst", ".lzma", ".zip", ".tar",
                 ".tgz", ".npy", ".npz", ".pkl", ".pickle", ".xml", ".json", ".csv", ".tsv", ".lst", ".list",
                 ".vocab", ".ark", ".scp", ".bin", ".data", ".index", ".meta", ".log", ".wav", ".flac", ".ogg",
                 ".mp3", ".png", ".pdf", ".svg")
_DATA_NAME = re.compile(r"\.data-\d+-of-\d+$|\.tmp-\d+", re.I)  # checkpoint shards, temporary files


def data_suffix(filename: str) -> Optional[str]:
    """The data-file suffix of ``filename`` (``.hdf``, ``.txt``, ``.gz``, ...), or None."""
    name = os.path.basename(filename).lower()
    match = _DATA_NAME.search(name)
    if match:
        return match.group(0)
    found = next((suffix for suffix in DATA_SUFFIXES if name.endswith(suffix)), None)
    if found or name.endswith((".config", ".py")):
        return found
    # a data file's suffix followed by more (a copy, a shard, a rotated file: corpus.txt.1,
    # train.hdf.bak, dev.gz.part2) is still a data file
    parts = name.split(".")[1:-1]
    return next(("." + part for part in parts if "." + part in DATA_SUFFIXES), None)


def config_form(filename: str, content: str) -> str:
    """How a config file is read: ``"python"`` (executed), ``"json"`` or ``"lines"`` (parsed, never run).

    RETURNN's rule, plus one leniency of this engine and one restriction (docs/security.md):

    * Python: the first line starts with ``#!`` (``#!rnn.py``, ``#!returnn/rnn.py``, ...) or the name ends
      in ``.py`` (RETURNN), or the name ends in ``.config`` and the text is Python code (this engine;
      RETURNN would read such a file in the line format);
    * JSON: the text starts with ``{`` (RETURNN);
    * otherwise RETURNN's old ``key value`` line format;
    * never Python: a file whose name is a data file's (:data:`DATA_SUFFIXES`: ``.hdf``, ``.txt``, ``.gz``,
      ``.json``, ...), or whose content is binary (NUL bytes). Such a file is refused with one line
      unless it is JSON (a ``.json`` config) or harmless lines.
    """
    text = content.strip()
    suffix = data_suffix(filename)
    if "\0" in content:
        raise ConfigError("%s is binary data, not a config" % filename)
    if text.startswith("#!") or filename.endswith(".py"):
        if suffix:
            raise ConfigError("%s is a data file by its name (%s), not a config: it is never run as Python code, "
                              "even with a '#!' first line (a config is named *.config or *.py)" % (filename, suffix))
        return "python"
    if text.startswith("{"):
        return "json"
    if suffix:
        raise ConfigError("%s is a data file by its name (%s), not a config (a config is named *.config or *.py, "
                          "or is a JSON object)" % (filename, suffix))
    if filename.endswith(".config") and _compiles(content, filename):
        return "python"
    return "lines"


def _compiles(content: str, filename: str) -> bool:
    """Whether ``content`` is Python code (a config without ``#!`` line may still be Python)."""
    try:
        compile(content, filename, "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _config_error_line(exc: BaseException, filename: str) -> str:
    """Line number in ``filename`` where ``exc`` was raised, or '?'."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == filename:
            return str(frame.lineno)
    return "?"


def load_config_from_args(args: Sequence[str]) -> Config:
    """Builds the process config from argv (without the program name)."""
    config = Config()
    files, _ = split_cmd_args(args)
    if not files:
        raise ConfigError("usage: rnn.py CONFIG [CONFIG2 ...] [++key value ...]")
    set_global_config(config)  # config code may call get_global_config() while it runs
    config.parse_cmd_args(args)
    from returnn.old_network import apply_old_network_keys
    apply_old_network_keys(config)
    from returnn.learning_rate_control import parse_learning_rates_string
    parse_learning_rates_string(config)
    return config


if __name__ == "__main__":  # pragma: no cover
    c = load_config_from_args(sys.argv[1:])
    for k in sorted(c.typed_dict):
        print(k, "=", repr(c.typed_dict[k]))
