"""Checkpoints ``<model>.NNN`` (RETURNN's layout, :mod:`checkpoint_format`), written so a crash never leaves one that
looks complete but is not.

A checkpoint is written under a temporary prefix (in a new private directory
``<model>.NNN.tmp-<pid>``, so no planted link is written through), its files are fsynced, then renamed: the data
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
from typing import Any, Collection, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from returnn.errors import ConfigError, DataError, ReturnnError, output_write_error
from returnn.util.basic import fsync_dir
from returnn.util.run_lock import pid_alive
from returnn.util.safe_files import make_private_dir, remove_name
from returnn.log import log
from returnn.tf import checkpoint_format as fmt
from returnn.tf.checkpoint_fit import named_misfit
from returnn.tf.checkpoint_legacy import restore_legacy
from returnn.tf.layers import param_noise
from returnn.tf.returnn_params import NetParam, network_params, set_returnn_param_values

_DATA_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
INTERRUPTED_SUFFIX = "interrupted"
_PATTERN_CHARS = "*?[\\"  # special in TF's GetMatchingPaths


def epoch_prefix(model: str, epoch: int, pretrain: bool = False) -> str:
    """'/x/model', 3 -> '/x/model.003'; with ``pretrain`` RETURNN's name of a pretrain epoch's model,
    '/x/model.pretrain.003' (its ``epoch_model_filename``)."""
    return "%s%s.%03d" % (model, ".pretrain" if pretrain else "", epoch)


def checkpoint_files(prefix: str) -> List[str]:
    """Existing files of a checkpoint prefix (``.index``, data shards, and the ``.meta`` file that
    RETURNN writes and wants, see :func:`checkpoint_format.write_meta`)."""
    escaped = glob.escape(prefix)
    return sorted(glob.glob(escaped + ".index") + glob.glob(escaped + ".data-*") + glob.glob(escaped + ".meta"))


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


def list_epoch_checkpoints(model: str) -> List[int]:
    """Epochs with a complete checkpoint, ascending."""
    return [e for e in _indexed_epochs(model) if is_complete(existing_epoch_prefix(model, e))]


def prepare_output_dir(path: str, key: str) -> None:
    """Creates the directory of the output file ``path`` (config key ``key``); a one-line
    ConfigError naming the key and the directory when that is impossible."""
    prepare_dir(os.path.dirname(os.path.abspath(path)), key)


def prepare_dir(directory: str, key: str) -> None:
    """Creates ``directory`` (config key ``key``) and checks that a file can be created in it (by
    creating one: ``os.access`` misses read-only mounts for root and file systems like sysfs). A
    path through another user's symbolic link is refused (``safe_files.foreign_link``)."""
    from returnn.util.safe_files import foreign_link
    reason = foreign_link(directory)
    if reason:
        raise ConfigError("config key %r: directory %s: %s" % (key, directory, reason))
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
                                   + r"\.(?:\d{3,}|%s)\.tmp-(\d+)(?:[._].*)?$" % INTERRUPTED_SUFFIX))] if model else []
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
    """Saves and restores network, optimizer, global step and epoch (:mod:`checkpoint_format`)."""

    def __init__(self, model: str, **objects):
        self.model = model
        self.epoch_step = 0  # of the checkpoint restored last: batches of the next epoch already trained
        self._run_state_text = ""  # of the checkpoint restored last
        self.ignore_missing_vars = False  # load_ignore_missing_vars (RETURNN's key)
        self.pretrain_epochs = 0  # epochs 1..N are pretrain epochs: their models are <model>.pretrain.NNN
        self.set_objects(**objects)

    def set_objects(self, network=None, optimizer=None, global_step: Optional[tf.Variable] = None) -> None:
        """What checkpoints hold besides epoch and run state: replaced when the network changes
        between epochs (pretrain, ``get_network``)."""
        self.network, self.optimizer, self.global_step = network, optimizer, global_step

    # ---- writing
    def epoch_prefix(self, epoch: int) -> str:
        """The name RETURNN gives the model of ``epoch`` (its ``get_epoch_model_filename``): ``<model>.NNN``,
        ``<model>.pretrain.NNN`` for a pretrain epoch; epoch 0 (``save_epoch1_initial_model``) is named
        as epoch 1 (RETURNN asks whether its current epoch, 1, is a pretrain epoch)."""
        return epoch_prefix(self.model, epoch, pretrain=max(epoch, 1) <= self.pretrain_epochs)

    def save(self, epoch: int, run_state: Optional[Dict[str, Any]] = None) -> str:
        """Writes the model of ``epoch`` (:meth:`epoch_prefix`) atomically; returns the prefix."""
        return self._write(self.epoch_prefix(epoch), epoch, 0, run_state)

    def save_interrupted(self, epoch_done: int, position: int, run_state: Optional[Dict[str, Any]] = None) -> str:
        """Mid-epoch state after SIGTERM/SIGUSR1: epoch ``epoch_done`` complete plus the first
        ``position`` batches of the next epoch's global batch order; resume continues after them."""
        return self._write(self.interrupted_prefix, epoch_done, position, run_state)

    def values(self, epoch: int, epoch_step: int = 0, run_state: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """Everything a checkpoint stores, by name (see :mod:`checkpoint_format`)."""
        out: Dict[str, Any] = {fmt.EPOCH_KEY: np.int64(epoch), fmt.EPOCH_STEP_KEY: np.int64(epoch_step),
                               fmt.RUN_STATE_KEY: json.dumps(run_state or {}, sort_keys=True)}
        if self.global_step is not None:
            out[fmt.GLOBAL_STEP_KEY] = np.int64(self.global_step.numpy())
        if self.network is None:
            return out
        params = network_params(self.network)
        out.update((name, p.value()) for name, p in params.items() if p.param.saveable)
        if getattr(self.network, "train_flag", False) and param_noise.uses_returnn_generator(self.network):
            out[param_noise.RETURNN_GENERATOR_STATE] = np.array([0, 0, 42], np.int64)  # RETURNN's, see param_noise
        opt = self.optimizer
        if opt is not None:
            for name, p, slot, slot_vars in self._slots(params):
                out["%s/%s" % (name, opt.slot_checkpoint_name(slot))] = p.convert(slot_vars)
            out.update(opt.extra_checkpoint_values())
            out[fmt.ITERATIONS_KEY] = np.int64(opt.iterations.numpy())
            out[fmt.LEARNING_RATE_KEY] = np.float32(opt.learning_rate.numpy())
        return out

    def _slots(self, params: Dict[str, NetParam]):
        """(name, parameter, slot, slot variables of the parameter's variables) of every optimizer slot."""
        opt = self.optimizer
        for name, p in params.items():
            index = [opt.var_index.get(id(v)) for v in p.param.variables]
            if not p.param.saveable or None in index:
                continue  # not trained
            for slot, slot_vars in opt.slots.items():
                if all(slot_vars[i] is not None for i in index):  # (several optimizers: its own slots only)
                    yield name, p, slot, [slot_vars[i] for i in index]

    def _write(self, final: str, epoch: int, epoch_step: int, run_state: Optional[Dict[str, Any]]) -> str:
        prepare_model_dir(self.model)
        values = self.values(epoch, epoch_step, run_state)
        # A private directory (mode 0700, created by mkdir, which never follows a link) holds the
        # temporary files: nothing planted under a predictable name is ever written through.
        tmp_dir = make_private_dir("%s.tmp-%i" % (final, os.getpid()))
        tmp = os.path.join(tmp_dir, "ckpt")
        try:
            fmt.write_named(tmp, values)
            fmt.write_meta(tmp)
            written = checkpoint_files(tmp)
            for path in written:
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
        except (OSError, tf.errors.OpError) as exc:  # a full disk: one line; older checkpoints are untouched
            remove_name(tmp_dir)
            raise output_write_error(final, exc, "checkpoint") from None
        # The old index goes first, so the final name never pairs an old index with new data
        # (data and .meta are renamed before the new index).
        if os.path.exists(final + ".index"):
            os.remove(final + ".index")
        for old in glob.glob(glob.escape(final) + ".data-*"):
            os.remove(old)
        data = [p for p in written if not p.endswith(".index")]
        for path in data:
            os.replace(path, final + path[len(tmp):])
        os.replace(tmp + ".index", final + ".index")
        remove_name(tmp_dir)
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
    def restore(self, prefix: str, params_only: bool = False, skip: Collection[str] = ()) -> int:
        """Loads ``prefix`` (written here or by RETURNN); returns the epoch stored in it (RETURNN's:
        the number in its name). ``params_only``: network parameters and global step, as RETURNN
        takes an initial model (``import_model_train_epoch1``, ``load``); the optimizer starts fresh.
        ``skip``: parameter names loaded already (preload_from_files), neither read nor required.

        A checkpoint that does not fit the network (changed layers, dims) is a ConfigError naming
        it; one whose data cannot be read is a DataError naming it."""
        self.epoch_step, self._run_state_text = 0, ""
        try:
            with readable_prefix(prefix) as path:
                reader = tf.train.load_checkpoint(path)
                shapes = reader.get_variable_to_shape_map()
                if fmt.is_legacy(shapes):
                    optimizer = self.optimizer
                    self.optimizer = None if params_only else optimizer
                    try:
                        return restore_legacy(self, reader, path, prefix)
                    finally:
                        self.optimizer = optimizer
                self._restore_named(reader, shapes, prefix, params_only, skip)
                return fmt.stored_epoch(reader, prefix)
        except ReturnnError:
            raise
        except (tf.errors.OpError, IndexError, OSError, ValueError) as exc:
            raise DataError("checkpoint %s cannot be read (corrupt?): %s: %s"
                            % (prefix, type(exc).__name__, _first_line(exc)))

    def _restore_named(self, reader, shapes: Dict[str, Any], prefix: str, params_only: bool = False,
                       skip: Collection[str] = ()) -> None:
        params = network_params(self.network) if self.network is not None else {}
        params = {name: p for name, p in params.items() if name not in skip}
        if self.network is not None:
            self._check_fit(shapes, params, prefix)
            set_returnn_param_values(self.network, {n: reader.get_tensor(n) for n in params if n in shapes},
                                     ignore_missing=True, where="checkpoint %s" % prefix)
        if self.global_step is not None:
            self.global_step.assign(int(reader.get_tensor(fmt.GLOBAL_STEP_KEY)) if fmt.GLOBAL_STEP_KEY in shapes else 0)
        if params_only:
            return
        if fmt.EPOCH_STEP_KEY in shapes:
            self.epoch_step = int(reader.get_tensor(fmt.EPOCH_STEP_KEY))
        if fmt.RUN_STATE_KEY in shapes:
            self._run_state_text = fmt.as_text(reader.get_tensor(fmt.RUN_STATE_KEY))
        if self.optimizer is not None:
            self._restore_optimizer(reader, shapes, params, prefix)

    def _restore_optimizer(self, reader, shapes: Dict[str, Any], params: Dict[str, NetParam], prefix: str) -> None:
        """Slots as stored; without them (a RETURNN checkpoint, or another optimizer) the optimizer
        starts fresh, as RETURNN's does on every start."""
        opt = self.optimizer
        missing = 0
        for name, p, slot, slot_vars in self._slots(params):
            key = "%s/%s" % (name, opt.slot_checkpoint_name(slot))
            if key in shapes:
                p.assign(reader.get_tensor(key), slot_vars)
            else:
                missing += 1
        extra = {k: reader.get_tensor(k) for k in opt.extra_checkpoint_values() if k in shapes}
        if fmt.ITERATIONS_KEY in shapes:
            opt.iterations.assign(int(reader.get_tensor(fmt.ITERATIONS_KEY)))
        elif opt.iterations_from_checkpoint(extra) is not None:
            opt.iterations.assign(opt.iterations_from_checkpoint(extra))
        if hasattr(opt, "restore_extra_values"):  # several optimizers (updater_opts.py): the others' counts
            opt.restore_extra_values(extra)
        if fmt.LEARNING_RATE_KEY in shapes:
            opt.learning_rate.assign(float(reader.get_tensor(fmt.LEARNING_RATE_KEY)))
        if missing and fmt.is_own(shapes):
            print("checkpoint %s holds no state of the %s optimizer for %i parameter(s) (written with another "
                  "optimizer?): that state starts fresh" % (prefix, type(opt).__name__, missing), file=log.warn)

    def _check_fit(self, shapes: Dict[str, Any], params: Dict[str, NetParam], prefix: str) -> None:
        """Shapes must agree; a parameter the checkpoint lacks (a new or renamed layer) is an error
        unless ``ignore_missing_vars``. Parameters only the checkpoint has are not used, with a
        warning, as RETURNN's restore leaves them (a search network without a training-only layer,
        e.g. the ctc layer of ``if task != "search"`` configs)."""
        detail = named_misfit(shapes, params)
        if detail is None:
            return
        lacks = "the checkpoint lacks" in detail
        if " has shape " in detail or (lacks and not self.ignore_missing_vars):
            raise _unfit(prefix, detail)
        if lacks:
            print("checkpoint %s: %s; load_ignore_missing_vars: those parameters start from their initialisation or "
                  "are left out" % (prefix, detail), file=log.warn)
        else:
            print("checkpoint %s: %s: those values are not used (as RETURNN)" % (prefix, detail), file=log.warn)

    def run_state(self, prefix: str) -> Dict[str, Any]:
        """The run state stored with the checkpoint restored last from ``prefix`` ({} if none)."""
        text = self._run_state_text
        try:
            state = json.loads(text) if text else {}
        except ValueError:
            state = None
        if not isinstance(state, dict):
            raise DataError("checkpoint %s: stored run state is not a JSON object" % prefix)
        return state

    def find_resume_point(self, start_epoch: Optional[int] = None) -> Optional[Tuple[str, int]]:
        """(prefix, completed epoch) to continue training from, or None to start at epoch 1.

        By default the newest checkpoint: the newest ``<model>.NNN`` (or RETURNN's
        ``<model>.pretrain.NNN``) with an index, or ``<model>.interrupted`` when it is at least as
        new. It must be complete and readable, else a DataError naming it. ``start_epoch`` N
        (RETURNN's key) deliberately takes the checkpoint of epoch N-1 instead (N = 1: from scratch)."""
        if start_epoch is not None:
            if start_epoch <= 1:
                return None
            prefix = existing_epoch_prefix(self.model, start_epoch - 1)
            if prefix is None:
                raise ConfigError("config key 'start_epoch': %i needs checkpoint %s, which does not exist"
                                  % (start_epoch, self.epoch_prefix(start_epoch - 1)))
            return prefix, self._check_readable(prefix)
        indexed = _indexed_epochs(self.model)
        point = None
        if indexed:
            prefix = existing_epoch_prefix(self.model, indexed[-1])
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
        return stored_epoch_of(prefix, hint)


def stored_epoch_of(prefix: str, hint: str = "") -> int:
    """The epoch checkpoint ``prefix`` was saved after (its record, else its name's number); a
    DataError naming it when it cannot be read."""
    try:
        with readable_prefix(prefix) as path:
            return fmt.stored_epoch(tf.train.load_checkpoint(path), prefix)
    except Exception as exc:  # noqa: BLE001 - TF raises many types for damaged files; all are reported
        raise DataError("checkpoint %s cannot be read (corrupt?): %s: %s%s" % (prefix, type(exc).__name__,
                                                                                _first_line(exc), hint))


def existing_epoch_prefix(model: str, epoch: int) -> Optional[str]:
    """``<model>.NNN``, or RETURNN's ``<model>.pretrain.NNN``, whichever has an index (None: neither)."""
    for prefix in (epoch_prefix(model, epoch), epoch_prefix(model, epoch, pretrain=True)):
        if os.path.exists(prefix + ".index"):
            return prefix
    return None


def _indexed_epochs(model: str) -> List[int]:
    """Epochs N >= 1 whose ``<model>.NNN.index`` exists, ascending. ``<model>.000`` (the initial
    parameters of ``save_epoch1_initial_model``) is none: RETURNN's ``get_existing_models`` counts
    from epoch 1, so it neither resumes from it nor cleans it up."""
    pattern = re.compile(re.escape(os.path.basename(model)) + r"\.(?:pretrain\.)?(\d{3,})\.index$")
    found = (pattern.match(os.path.basename(p)) for p in glob.glob(glob.escape(model) + ".*.index"))
    return sorted({int(m.group(1)) for m in found if m and int(m.group(1)) >= 1})


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
