"""Helpers for command-line tools that take a dataset argument (``tools/hdf_dump.py``,
``tools/dump-dataset.py``).

The argument is one of:
* a config file (by its form, :func:`returnn.config.config_form`: a data file such as ``.txt`` or ``.gz``
  is refused, never run): its ``train`` dataset (or the one ``config_key`` names: ``dev``, ``eval`` or a name
  in ``eval_datasets``) is used, with the config's global options (e.g. ``cache_size``) as defaults;
* a ``{...}`` dict literal, e.g. ``"{'class': 'Task12AXDataset', 'num_seqs': 10}"``;
* one HDF file or a comma-separated list of HDF files.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO, Tuple

from returnn.config import Config, data_suffix
from returnn.datasets import init_dataset
from returnn.datasets.base import Dataset
from returnn.datasets.hdf import is_hdf5_file
from returnn.errors import ConfigError, DataError
from returnn.util.basic import hms
from returnn.util.progress import bar, remaining_seconds

HDF_SUFFIXES = (".hdf", ".hdf5", ".h5")


def dataset_from_cli_arg(arg: str, config_key: str = "train") -> Tuple[Dataset, Optional[Config]]:
    """Builds the dataset a tool argument describes; returns it and the config (if a config file
    was given). Bad arguments are a DataError / ConfigError naming the file or key."""
    text = arg.strip()
    if not text:
        raise DataError("empty dataset argument")
    if text.startswith("{"):
        return init_dataset(text, name=config_key), None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if len(parts) > 1 or is_hdf5_file(text) or text.lower().endswith(HDF_SUFFIXES):
        return init_dataset({"class": "HDFDataset", "files": parts}, name=config_key), None
    if not os.path.exists(text):
        raise ConfigError("no such config or dataset file: %s" % text)
    suffix = data_suffix(text)
    if suffix and suffix != ".json":  # never run as a config (returnn.config.config_form); JSON is parsed
        raise ConfigError("%s is neither a config nor an HDF file (its name has %s, a data file's suffix; data files "
                          "are never run as configs): give a dataset dict \"{'class': ..., ...}\" that reads it"
                          % (text, suffix))
    config = Config()
    config.load_file(text)
    return init_dataset(_config_dataset(config, text, config_key), defaults=config.typed_dict, name=config_key), config


def _config_dataset(config: Config, filename: str, name: str):
    """The dataset dict ``name`` of a config: a top-level key, or an entry of ``eval_datasets``."""
    extra = config.typed_value("eval_datasets") or {}
    spec = extra.get(name) if isinstance(extra, dict) and name in extra else config.typed_dict.get(name)
    if spec is None:
        have = [n for n in ("train", "dev", "eval") if config.typed_dict.get(n)]
        have += sorted(extra) if isinstance(extra, dict) else []
        raise ConfigError("config %s has no %r dataset (it has: %s; choose one with --dataset NAME)"
                          % (filename, name, ", ".join(have) or "none"))
    return spec


class ProgressPrinter:
    """``progress(done, total)`` callback: a bar with sequences/s and ETA on a terminal, else a
    plain line every ``interval`` seconds."""

    def __init__(self, prefix: str, stream: Optional[TextIO] = None, interval: float = 5.0,
                 is_tty: Optional[bool] = None):
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        if is_tty is None:
            isatty = getattr(self.stream, "isatty", None)
            is_tty = bool(isatty and isatty())
        self.is_tty = is_tty
        self.start = time.monotonic()
        self._last = 0.0
        self._bar_shown = False

    def text(self, done: int, total: int) -> str:
        """The progress text (without bar)."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        fraction = done / total if total else 1.0
        return "%i/%i seqs (%.1f%%), %.1f seqs/s, ETA %s" % (done, total, 100.0 * fraction, done / elapsed,
                                                            hms(remaining_seconds(elapsed, fraction)))

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.is_tty:
            self.stream.write("\r%s %s %s\x1b[K" % (self.prefix, bar(done / total if total else 1.0),
                                                  self.text(done, total)))
            self.stream.flush()
            self._bar_shown = True
        elif now - self._last >= self.interval or done >= total:
            self._last = now
            self.stream.write("%s: %s\n" % (self.prefix, self.text(done, total)))
            self.stream.flush()

    def finish(self) -> None:
        """Ends the bar line on a terminal."""
        if self._bar_shown:
            self.stream.write("\n")
            self.stream.flush()
            self._bar_shown = False
