"""Outputs of a run checked before its work starts: never over one of the run's inputs.

A run reads its config files, data files (every file a dataset reads,
:meth:`returnn.datasets.base.Dataset.data_files`) and checkpoints (the model's, ``load``,
``import_model_train_epoch1``, ``preload_from_files``). It writes ``output_file`` (forward),
``search_output_file``, the files of ``hdf_dump`` layers, the learning-rate file, the model's
checkpoints and the log. Before any work, each output is checked:

* an output that is one of the inputs (the same file by device and inode: the same path, a
  symbolic or a hard link to it) is refused: ``config key 'output_file' names /x/train.hdf, which is
  the data file of dataset 'eval' (HDFDataset): forward would replace it``;
* two outputs naming the same file are refused;
* an output that is a directory, whose directory cannot be created or is not writable (read-only
  file system), is refused, instead of failing after the whole pass.

Each is one :class:`~returnn.errors.ConfigError` line naming the config key (or layer) and the file.
"""
from __future__ import annotations

import glob
import os
import re
import stat
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from returnn.errors import ConfigError

DATASET_KEYS = ("train", "dev", "eval", "eval_datasets", "search_data")
_CHECKPOINT_FILE = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")


def _identity(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


class RunInputs:
    """The files a run reads, each with a description for messages."""

    def __init__(self) -> None:
        self.by_identity: Dict[Tuple[int, int], str] = {}
        self.paths: List[Tuple[str, str]] = []

    def add(self, path: Any, what: str) -> None:
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            return
        path = os.fspath(path)
        ident = _identity(path)
        if ident is None or not os.path.isfile(path):
            return
        self.by_identity.setdefault(ident, what)
        self.paths.append((path, what))

    def add_checkpoint(self, prefix: Any, what: str) -> None:
        """The files of checkpoint ``prefix`` (index, data shards, meta)."""
        if not isinstance(prefix, str) or not prefix:
            return
        if prefix.endswith(".index"):
            prefix = prefix[:-len(".index")]
        for path in glob.glob(glob.escape(prefix) + ".*"):
            if _CHECKPOINT_FILE.search(path[len(prefix):]) and path[len(prefix):].count(".") == 1:
                self.add(path, what)

    def add_model(self, model: Any) -> None:
        """Every checkpoint file of the model prefix ``model`` (``<model>.NNN.index``, ...)."""
        if not isinstance(model, str) or not model:
            return
        for path in glob.glob(glob.escape(model) + ".*"):
            rest = path[len(model):]
            if _CHECKPOINT_FILE.search(rest):
                self.add(path, "a checkpoint file of model %s" % model)

    def which(self, path: str) -> Optional[str]:
        """The description of the input that ``path`` is, if it is one."""
        ident = _identity(path)
        return self.by_identity.get(ident) if ident is not None else None


def run_inputs(config, datasets: Optional[Iterable[Any]] = None, checkpoints: Sequence[str] = ()) -> RunInputs:
    """The inputs of a run: config files, the datasets' files (built datasets, else the existing
    files the dataset dicts name), the model's checkpoints and those ``load``,
    ``import_model_train_epoch1`` and ``preload_from_files`` name, and ``checkpoints``."""
    inputs = RunInputs()
    for path in getattr(config, "files", []):
        inputs.add(path, "the config file")
    for dataset in datasets or ():
        for path in dataset.data_files():
            inputs.add(path, "a data file of %s" % dataset.describe())
    for key in DATASET_KEYS:
        for path in _strings(config.typed_value(key)):
            inputs.add(path, "a file named in dataset %r of the config" % key)
    inputs.add_model(config.value("model"))
    for key in ("load", "import_model_train_epoch1"):
        inputs.add_checkpoint(config.value(key), "a checkpoint file (config key %r)" % key)
    preload = config.typed_value("preload_from_files")
    if isinstance(preload, dict):
        for entry, opts in preload.items():
            if isinstance(opts, dict):
                inputs.add_checkpoint(opts.get("filename"), "a checkpoint file (preload_from_files %r)" % entry)
    for prefix in checkpoints:
        inputs.add_checkpoint(prefix, "the checkpoint the run loads")
    for name, module in sorted(sys.modules.items()):  # code the config (or the engine) imported: read too
        inputs.add(getattr(module, "__file__", None), "the Python module %s the run imported" % name)
    return inputs


def _strings(value: Any, depth: int = 0) -> Iterable[str]:
    """Strings in a dataset dict (file names among them)."""
    if isinstance(value, str):
        yield from (v.strip() for v in value.split(",")) if "," in value and not value.startswith("{") else [value]
    elif depth < 6 and isinstance(value, dict):
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif depth < 6 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, depth + 1)


class OutputPlan:
    """The outputs of a run, checked against its inputs and each other."""

    def __init__(self, inputs: RunInputs):
        self.inputs = inputs
        self.outputs: Dict[Tuple[int, int], str] = {}
        self.planned: Dict[str, str] = {}  # realpath -> who

    def file(self, who: str, path: Any, doing: str) -> None:
        """Checks the output file ``path`` of ``who`` (e.g. "config key 'output_file'"), which the
        run will write by ``doing`` (for the message)."""
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            return
        path = os.fspath(path)
        if os.path.isdir(path) or path.endswith(("/", os.sep)):
            raise ConfigError("%s: %s is a directory, not a file" % (who, path))
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            mode = None
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
            raise ConfigError("%s: %s is %s, not a regular file: %s would replace it; choose another file"
                              % (who, path, kind, doing))
        what = self.inputs.which(path)
        if what:
            raise ConfigError("%s names %s, which is %s: %s would replace it; choose another file"
                              % (who, path, what, doing))
        real = os.path.realpath(path)
        other = self.planned.get(real)
        if other is None and _identity(path) is not None:
            other = self.outputs.get(_identity(path))
        if other is not None and other != who:
            raise ConfigError("%s and %s name the same file %s" % (other, who, path))
        self.planned[real] = who
        if _identity(path) is not None:
            self.outputs[_identity(path)] = who
        check_writable_dir(os.path.dirname(os.path.abspath(path)), who)

    def model(self, model: Any) -> None:
        """The model prefix of a training: no input may be one of the files it writes
        (``<model>.NNN.*``, ``<model>.interrupted.*``, their temporary files, ``<model>.lock``)."""
        if not isinstance(model, str) or not model:
            return
        base = os.path.realpath(model)
        written = re.compile(re.escape(os.path.basename(base)) + r"\.(\d{3,}|interrupted)(\.tmp-\d+.*)?"
                             r"\.(index|meta|data-\d+-of-\d+)$|" + re.escape(os.path.basename(base)) + r"\.lock$")
        for path, what in self.inputs.paths:
            if what.startswith("a checkpoint file"):
                continue  # a training may start from its own or other checkpoints
            real = os.path.realpath(path)
            if os.path.dirname(real) == os.path.dirname(base) and written.match(os.path.basename(real)):
                raise ConfigError("config key 'model' (%s) makes the training write %s, which is %s; choose another "
                                  "model path" % (model, path, what))


def check_writable_dir(directory: str, who: str) -> None:
    """Creates ``directory`` if needed and checks that a file can be made there (one line naming
    ``who`` otherwise; see :func:`returnn.tf.checkpoint.prepare_dir`)."""
    import tempfile
    from returnn.util.safe_files import foreign_link
    reason = foreign_link(directory)
    if reason:
        raise ConfigError("%s: directory %s: %s" % (who, directory, reason))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ConfigError("%s: cannot create directory %s: %s" % (who, directory, exc.strerror or exc))
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError("%s: directory %s is not writable: %s" % (who, directory, exc.strerror or exc))


def check_run_outputs(config, task: str, datasets: Iterable[Any], network=None, dump_runs: Sequence[str] = (),
                      epoch: int = 1) -> None:
    """Checks every output of ``task`` before its work starts (rank 0, which writes them):
    ``dump_runs`` are the names of the datasets whose passes the ``hdf_dump`` layers of ``network``
    write (forward, eval)."""
    plan = OutputPlan(run_inputs(config, datasets))
    from returnn.log import log
    for path in log.filenames:  # every task logs: no other output may be its log file
        plan.file("config key 'log'", path, "logging")
    if task == "train":
        plan.model(config.value("model"))
        plan.file("config key 'learning_rate_file'", config.value("learning_rate_file"), "training")
    if task == "forward":
        plan.file("config key 'output_file'", config.value("output_file"), "forward")
    if task == "search":
        plan.file("config key 'search_output_file'", config.value("search_output_file"), "search")
    if task == "eval":
        plan.file("config key 'eval_output_file'", config.value("eval_output_file"), "eval")
    if network is not None:
        for name in dump_runs:
            for layer_name in network.dump_layers:
                layer = network.layers[layer_name]
                plan.file("layer %r (hdf_dump)" % layer_name, layer.filename(name, epoch), task)


def check_early_outputs(config, task: str, log_files: Sequence[str], is_chief: bool = True) -> None:
    """Before the log files are opened (appended to) and the learning-rate file is read: none of
    them, nor the model's files, may be an input of the run known from the config alone (config
    files, the files the dataset dicts name, checkpoints). The engine checks again with the files
    the datasets actually read (:func:`check_run_outputs`). Each rank checks its own log file;
    rank 0 (``is_chief``) the files it alone writes."""
    plan = OutputPlan(run_inputs(config))
    for path in log_files:
        if path:
            what = plan.inputs.which(path)
            if what:
                raise ConfigError("config key 'log' names %s, which is %s: the log would be appended to it; choose "
                                  "another file" % (path, what))
    if task == "train" and is_chief:  # rank 0 writes them
        plan.model(config.value("model"))
        plan.file("config key 'learning_rate_file'", config.value("learning_rate_file"), "training")


def remove_stale_temp_files(path: str) -> List[str]:
    """Removes ``<path>.tmp-<pid>`` leftovers of writers of ``path`` (``atomic_write_bytes``'s
    temporary files: search outputs, plots) whose process no longer runs on this host; returns
    them. (Checkpoints and the learning-rate file: ``returnn.tf.checkpoint.remove_stale_temp_files``
    at the start of a training; HDF outputs: ``returnn.datasets.hdf_write.remove_stale_hdf_temp_files``.)"""
    from returnn.util.run_lock import pid_alive
    pattern = re.compile(re.escape(os.path.basename(path)) + r"\.tmp-(\d+)$")
    removed = []
    for candidate in glob.glob(glob.escape(path) + ".tmp-*"):
        m = pattern.match(os.path.basename(candidate))
        if not m or pid_alive(int(m.group(1))):
            continue
        try:
            if os.path.isfile(candidate) or os.path.islink(candidate):
                os.remove(candidate)
                removed.append(candidate)
        except OSError:
            pass
    return removed
