"""Checkpoints ``<model>.NNN`` (TF2 checkpoint files), written so a crash never leaves one that
looks complete but is not.

A checkpoint is written under a temporary prefix, its files are fsynced, then renamed: the data
shards first, the ``.index`` file last. The ``.index`` file is the completion mark: resume discovery
only considers prefixes whose index exists. A crash never leaves an index without its data, so a
newest checkpoint whose data is missing or cannot be read is damage: an error naming it, never
skipped silently (``start_epoch`` chooses an older one deliberately).

TensorFlow's reader treats a checkpoint prefix as a file pattern (``*?[\\``): a prefix with such
characters (``exp[lr=0.01]/model``) is read through symlinks in a private directory.

``<model>.interrupted`` holds the state saved on SIGTERM/SIGUSR1 mid-epoch (with the epoch it
belongs to); it is used on resume when it is newer than the newest epoch checkpoint.

Temporary files of a killed writer never count as checkpoints; :func:`remove_stale_temp_files`
tidies them up at the next start. See ``docs/reliability.md``.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf

from returnn.errors import ConfigError, DataError, ReturnnError
from returnn.util.basic import fsync_dir
from returnn.util.run_lock import pid_alive
from returnn.log import log
from returnn.tf.checkpoint_fit import misfit, removed_layers

_DATA_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
INTERRUPTED_SUFFIX = "interrupted"
_PATTERN_CHARS = "*?[\\"  # special in TF's GetMatchingPaths
RUN_STATE_KEY = "run_state/.ATTRIBUTES/VARIABLE_VALUE"


def epoch_prefix(model: str, epoch: int) -> str:
    """'/x/model', 3 -> '/x/model.003'."""
    return "%s.%03d" % (model, epoch)


def checkpoint_files(prefix: str) -> List[str]:
    """Existing files of a checkpoint prefix."""
    return sorted(glob.glob(glob.escape(prefix) + ".index") + glob.glob(glob.escape(prefix) + ".data-*"))


def missing_part(prefix: str) -> Optional[str]:
    """The first missing file of checkpoint ``prefix`` (index, or a data shard), or None if complete."""
    if not os.path.exists(prefix + ".index"):
        return prefix + ".index"
    shards = [m for m in (_DATA_RE.search(s) for s in glob.glob(glob.escape(prefix) + ".data-*-of-*")) if m]
    if not shards:
        return prefix + ".data-00000-of-00001"
    total = int(shards[0].group(2))
    missing = sorted(set(range(total)) - {int(m.group(1)) for m in shards})
    return "%s.data-%05d-of-%05d" % (prefix, missing[0], total) if missing else None


def is_complete(prefix: str) -> bool:
    """Index present and all data shards present."""
    return missing_part(prefix) is None


@contextlib.contextmanager
def readable_prefix(prefix: str) -> Iterator[str]:
    """A prefix naming the same checkpoint files without pattern characters, for TF's reader."""
    if not any(c in prefix for c in _PATTERN_CHARS):
        yield prefix
        return
    tmp = tempfile.mkdtemp(prefix="returnn-ckpt-")
    if any(c in tmp for c in _PATTERN_CHARS):  # an odd TMPDIR
        shutil.rmtree(tmp, ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix="returnn-ckpt-", dir="/tmp")
    try:
        for path in checkpoint_files(prefix):
            os.symlink(os.path.abspath(path), os.path.join(tmp, "ckpt" + path[len(prefix):]))
        yield os.path.join(tmp, "ckpt")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_tensor(prefix: str, key: str):
    """One stored value of checkpoint ``prefix``; a DataError naming the checkpoint if it cannot be read."""
    try:
        with readable_prefix(prefix) as path:
            return tf.train.load_checkpoint(path).get_tensor(key)
    except Exception as exc:  # noqa: BLE001 - TF raises many types for damaged files; all are reported
        raise DataError("checkpoint %s cannot be read (corrupt?): %s: %s" % (prefix, type(exc).__name__,
                                                                              _first_line(exc)))


def list_epoch_checkpoints(model: str) -> List[int]:
    """Epochs with a complete checkpoint, ascending."""
    return [e for e in _indexed_epochs(model) if is_complete(epoch_prefix(model, e))]


def prepare_output_dir(path: str, key: str) -> None:
    """Creates the directory of the output file ``path`` (config key ``key``); a one-line
    ConfigError naming the key and the directory when that is impossible."""
    prepare_dir(os.path.dirname(os.path.abspath(path)), key)


def prepare_dir(directory: str, key: str) -> None:
    """Creates ``directory`` (config key ``key``) and checks that a file can be created in it (by
    creating one: ``os.access`` misses read-only mounts for root and file systems like sysfs)."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        blocker = _non_directory_ancestor(directory)
        reason = ("%s is a file, not a directory" % blocker) if blocker else (exc.strerror or str(exc))
        raise ConfigError("config key %r: cannot create directory %s: %s" % (key, directory, reason))
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError("config key %r: directory %s is not writable: %s" % (key, directory, exc.strerror or exc))


def _non_directory_ancestor(directory: str) -> Optional[str]:
    """The first existing path on the way to ``directory`` that is not a directory, if any."""
    path = directory
    chain = []
    while True:
        chain.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for candidate in reversed(chain):
        if os.path.exists(candidate) and not os.path.isdir(candidate):
            return candidate
    return None


def prepare_model_dir(model: str) -> None:
    """Creates the directory of ``model``; an error naming the key when that is impossible."""
    prepare_output_dir(model, "model")


def remove_stale_temp_files(model: str, extra_files: Sequence[str] = ()) -> List[str]:
    """Removes what a killed writer left behind: ``<model>.NNN.tmp-PID*`` and
    ``<model>.interrupted.tmp-PID*`` checkpoint parts (including TF's ``*_temp`` directory) and
    ``<file>.tmp-PID`` of ``extra_files`` (e.g. the learning-rate file), when process PID is gone.

    These names never count as checkpoints, so this is tidying, not a correctness step. Returns
    the removed paths."""
    patterns = [(model, re.compile(re.escape(os.path.basename(model))
                                   + r"\.(?:\d{3,}|%s)\.tmp-(\d+)(?:[._].*)?$" % INTERRUPTED_SUFFIX))]
    patterns += [(f, re.compile(re.escape(os.path.basename(f)) + r"\.tmp-(\d+)$")) for f in extra_files if f]
    removed: List[str] = []
    for base, pattern in patterns:
        for path in glob.glob(glob.escape(base) + ".*"):
            m = pattern.match(os.path.basename(path))
            if not m or pid_alive(int(m.group(1))):
                continue
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
                removed.append(path)
            except OSError:
                pass  # a read-only leftover is harmless: it never looks like a checkpoint
    return removed


def _unfit(prefix: str, detail: str) -> ConfigError:
    """The error for a checkpoint whose parameters do not fit the network (``detail``: which)."""
    hint = "" if " has shape " in detail else (". load_ignore_missing_vars = True starts parameters the checkpoint "
                                               "lacks from their initialisation and leaves out those the network lacks")
    return ConfigError("checkpoint %s does not fit the network of the config: %s%s" % (prefix, detail, hint))


class CheckpointManager:
    """Saves and restores network, optimizer, global step and epoch."""

    def __init__(self, model: str, **objects):
        self.model = model
        self.epoch_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        # Batches of the following epoch's global batch order already trained (only non-zero in an
        # interrupted state).
        self.epoch_step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch_step")
        # JSON: how the run was set up (ranks, batch order) and the learning-rate control's state.
        self.run_state_var = tf.Variable("", dtype=tf.string, trainable=False, name="run_state")
        self.ignore_missing_vars = False  # load_ignore_missing_vars (RETURNN's key)
        self.set_objects(**objects)

    def set_objects(self, **objects) -> None:
        """What checkpoints hold besides epoch and run state (network, optimizer, ...): replaced
        when the network changes between epochs (pretrain, ``get_network``)."""
        self._objects = dict(objects, epoch=self.epoch_var, epoch_step=self.epoch_step_var)
        self.checkpoint = tf.train.Checkpoint(run_state=self.run_state_var, **self._objects)

    # ---- writing
    def save(self, epoch: int, run_state: Optional[Dict[str, Any]] = None) -> str:
        """Writes ``<model>.NNN`` atomically; returns the prefix."""
        return self._write(epoch_prefix(self.model, epoch), epoch, 0, run_state)

    def save_interrupted(self, epoch_done: int, position: int, run_state: Optional[Dict[str, Any]] = None) -> str:
        """Mid-epoch state after SIGTERM/SIGUSR1: epoch ``epoch_done`` complete plus the first
        ``position`` batches of the next epoch's global batch order; resume continues after them."""
        return self._write(self.interrupted_prefix, epoch_done, position, run_state)

    def _write(self, final: str, epoch: int, epoch_step: int, run_state: Optional[Dict[str, Any]]) -> str:
        prepare_model_dir(self.model)
        self.epoch_var.assign(epoch)
        self.epoch_step_var.assign(epoch_step)
        self.run_state_var.assign(json.dumps(run_state or {}, sort_keys=True))
        tmp = "%s.tmp-%i" % (final, os.getpid())
        for stale in checkpoint_files(tmp):
            os.remove(stale)
        self.checkpoint.write(tmp)
        written = checkpoint_files(tmp)
        for path in written:
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        # The old index goes first, so the final name never pairs an old index with new data.
        if os.path.exists(final + ".index"):
            os.remove(final + ".index")
        for old in glob.glob(glob.escape(final) + ".data-*"):
            os.remove(old)
        data = [p for p in written if not p.endswith(".index")]
        for path in data:
            os.replace(path, final + path[len(tmp):])
        os.replace(tmp + ".index", final + ".index")
        fsync_dir(os.path.dirname(os.path.abspath(final)))
        return final

    def remove_interrupted(self) -> None:
        """Drops the interrupted state once a newer epoch checkpoint exists (index first, so a kill
        in between leaves data without index: not a checkpoint)."""
        for path in sorted(checkpoint_files(self.interrupted_prefix), key=lambda p: not p.endswith(".index")):
            os.remove(path)

    @property
    def interrupted_prefix(self) -> str:
        return "%s.%s" % (self.model, INTERRUPTED_SUFFIX)

    # ---- reading
    def restore(self, prefix: str) -> int:
        """Loads ``prefix``; returns the epoch stored in it.

        A checkpoint that does not fit the network (changed layers, dims or optimizer) is a
        ConfigError naming it; one whose data cannot be read is a DataError naming it."""
        self.run_state_var.assign("")
        try:
            with readable_prefix(prefix) as path:
                reader = tf.train.load_checkpoint(path)
                self._check_layers(reader, prefix)
                checkpoint = self.checkpoint if reader.has_tensor(RUN_STATE_KEY) else \
                    tf.train.Checkpoint(**self._objects)  # written before run_state existed
                status = checkpoint.read(path)
                status.expect_partial()  # no warnings about unused values when this fails
                if not self.ignore_missing_vars:
                    status.assert_existing_objects_matched()
                elif self._misfit(reader):
                    print("checkpoint %s: %s; load_ignore_missing_vars: those parameters start from their "
                          "initialisation or are left out" % (prefix, self._misfit(reader)), file=log.warn)
        except ReturnnError:
            raise
        except (ValueError, AssertionError) as exc:
            detail = self._misfit(reader)
            if detail:
                raise _unfit(prefix, detail)
            raise ConfigError("checkpoint %s does not fit the network/optimizer of the config (changed layers, "
                              "n_out or optimizer?): %s" % (prefix, _first_line(exc)))
        except (tf.errors.OpError, IndexError, OSError) as exc:
            raise DataError("checkpoint %s cannot be read (corrupt?): %s: %s"
                            % (prefix, type(exc).__name__, _first_line(exc)))
        return int(self.epoch_var.numpy())

    def _misfit(self, reader) -> Optional[str]:
        """What does not fit the network, by layer and parameter (:mod:`checkpoint_fit`), or None."""
        network = self._objects.get("network")
        return misfit(reader.get_variable_to_shape_map(), network) if network is not None else None

    def _check_layers(self, reader, prefix: str) -> None:
        """A layer only in the checkpoint (removed or renamed in the config) is an error unless
        ``ignore_missing_vars``; TensorFlow's restore would skip its values silently."""
        network = self._objects.get("network")
        if network is None or self.ignore_missing_vars or not removed_layers(reader.get_variable_to_shape_map(), network):
            return
        raise _unfit(prefix, self._misfit(reader))

    def run_state(self, prefix: str) -> Dict[str, Any]:
        """The run state stored with the checkpoint restored last from ``prefix`` ({} if none)."""
        text = self.run_state_var.numpy().decode("utf-8", "replace")
        try:
            state = json.loads(text) if text else {}
        except ValueError:
            state = None
        if not isinstance(state, dict):
            raise DataError("checkpoint %s: stored run state is not a JSON object" % prefix)
        return state

    def find_resume_point(self, start_epoch: Optional[int] = None) -> Optional[Tuple[str, int]]:
        """(prefix, completed epoch) to continue training from, or None to start at epoch 1.

        By default the newest checkpoint: the newest ``<model>.NNN`` with an index, or
        ``<model>.interrupted`` when it is at least as new. It must be complete and readable, else
        a DataError naming it. ``start_epoch`` N (RETURNN's key) deliberately takes ``<model>.N-1``
        instead (N = 1: from scratch)."""
        if start_epoch is not None:
            if start_epoch <= 1:
                return None
            prefix = epoch_prefix(self.model, start_epoch - 1)
            if not os.path.exists(prefix + ".index"):
                raise ConfigError("config key 'start_epoch': %i needs checkpoint %s, which does not exist"
                                  % (start_epoch, prefix))
            return prefix, self._check_readable(prefix)
        indexed = _indexed_epochs(self.model)
        point = None
        if indexed:
            prefix = epoch_prefix(self.model, indexed[-1])
            point = (prefix, self._check_readable(prefix))
        if os.path.exists(self.interrupted_prefix + ".index"):
            stored = self._check_readable(self.interrupted_prefix)
            if point is None or stored >= point[1]:
                point = (self.interrupted_prefix, stored)
        return point

    @staticmethod
    def _check_readable(prefix: str) -> int:
        """The epoch stored in checkpoint ``prefix``; DataError naming it when it is damaged."""
        missing = missing_part(prefix)
        hint = ("; delete it to resume from an older checkpoint, or choose one with ++start_epoch N "
                "(continues after <model>.N-1)")
        if missing:
            raise DataError("checkpoint %s is damaged: %s is missing%s" % (prefix, missing, hint))
        try:
            return int(read_tensor(prefix, "epoch/.ATTRIBUTES/VARIABLE_VALUE"))
        except DataError as exc:
            raise DataError(str(exc) + hint)


def _indexed_epochs(model: str) -> List[int]:
    """Epochs N whose ``<model>.NNN.index`` exists, ascending."""
    pattern = re.compile(re.escape(os.path.basename(model)) + r"\.(\d{3,})\.index$")
    found = (pattern.match(os.path.basename(p)) for p in glob.glob(glob.escape(model) + ".*.index"))
    return sorted(int(m.group(1)) for m in found if m)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
