"""Where training starts: the newest complete checkpoint (resumed on all ranks, an interrupted epoch
at its position in the batch order), else RETURNN's initial models (``import_model_train_epoch1``,
``load`` with ``start_epoch``/``load_epoch``). A mix-in of :class:`returnn.tf.engine.Engine`, whose
state it uses (``config``, ``dist``, ``checkpoints``, ``network``, ``lr_control``, the global step)."""
from __future__ import annotations

from typing import Optional, Tuple

from returnn.errors import ConfigError
from returnn.log import log
from returnn.tf.checkpoint import is_complete, stored_epoch_of
from returnn.tf.checkpoint_format import epoch_from_filename
from returnn.tf.engine_best_model import CHECKPOINT_STALL_FACTOR
from returnn.tf.preload import apply_load_on_init, preload_from_files
from returnn.tf.resume import map_resume_position, reconcile_learning_rates, stored_steps


class TrainingRestore:
    """The engine's start of training (see the module docstring)."""

    def _restore_for_training(self) -> int:
        """Loads the newest complete checkpoint (rank 0's choice) and syncs all ranks to it.
        Without one, RETURNN's initial models: ``import_model_train_epoch1`` (parameters for epoch
        1), else ``load`` (parameters of its epoch N; training continues with epoch N+1)."""
        start = self._start_epoch()
        # RETURNN's get_epoch_model: 'load' with a start_epoch comes before the checkpoints of 'model'
        new_from_load = start is not None and bool(self.config.value("load"))
        point = self.checkpoints.find_resume_point(start) if self.dist.is_chief and not new_from_load else None
        initial = self._initial_model(start) if self.dist.is_chief and point is None else None
        self.dist.meet("building the network and finding the checkpoint to resume from")
        completed = int(self._broadcast_scalar(point[1] if point else (initial[1] if initial else 0)))
        interrupted = self._broadcast_scalar(1.0 if point and point[0] == self.checkpoints.interrupted_prefix else 0.0)
        self._continues_interrupted = bool(interrupted)  # (all ranks)
        # the network the checkpoint was written from: of its epoch, or of the next one if interrupted in it
        self._use_network_of_epoch(max(1, completed + (1 if interrupted else 0)))
        if not point and self.dist.is_chief:  # RETURNN's custom initialisers (restored parameters win)
            apply_load_on_init(self.network)
        if point:
            self.checkpoints.ignore_missing_vars = self.config.bool("load_ignore_missing_vars")
            self.checkpoints.restore(point[0])
            print("loaded checkpoint %s (after epoch %i, global step %i)"
                  % (point[0], completed, int(self.global_step_var.numpy())), file=log.v4)
        elif initial:
            self.checkpoints.ignore_missing_vars = self.config.bool("load_ignore_missing_vars")
            self.checkpoints.restore(initial[0], params_only=True)
            # RETURNN: a new training (its epoch None) counts its steps from 0 (the global step is imported)
            new_training = initial[2] == "import_model_train_epoch1" or start is not None
            self.meta_step_offset = -int(self.global_step_var.numpy()) if new_training else 0
            print("loaded the parameters of %s (%s); training starts with epoch %i"
                  % (initial[0], initial[2], completed + 1), file=log.v3)
        if not point and self.dist.is_chief and completed == 0:  # RETURNN's init_for_train preloading
            preload_from_files(self.config.typed_value("preload_from_files"), self.network, starting_training=True)
        self.dist.meet("restoring the checkpoint", CHECKPOINT_STALL_FACTOR)
        self._sync_from_chief()
        self.global_step = int(self._broadcast_scalar(float(self.global_step_var.numpy())))  # rank 0's
        self.global_step_var.assign(self.global_step)
        if point:
            stored = self.checkpoints.run_state(point[0])
            reconcile_learning_rates(self.lr_control, stored, completed, point[0])
            self._resume = (stored, self.checkpoints.epoch_step, point[0])
        elif completed:  # the other ranks take part in rank 0's resume decisions (same collectives)
            self._resume = (None, 0, "")
        return completed + 1

    def _initial_model(self, start: Optional[int]) -> Optional[Tuple[str, int, str]]:
        """(prefix, epoch it counts as, config key) of RETURNN's initial model of a training without
        own checkpoints: ``import_model_train_epoch1`` (epoch 0: training starts with epoch 1),
        else ``load`` (its epoch: ``load_epoch`` or the number in its name). ``load`` with a
        ``start_epoch`` (whatever its value) is RETURNN's import for a new training: epoch 0, and it
        comes first (RETURNN's get_epoch_model gives epoch None, so its training starts with epoch 1)."""
        keys = ("load",) if start is not None and self.config.value("load") else ("import_model_train_epoch1", "load")
        for key in keys:
            value = self.config.value(key)
            if not value or (key == "import_model_train_epoch1" and start not in (None, 1)):
                continue
            prefix = value[:-len(".index")] if value.endswith(".index") else value
            if not is_complete(prefix):
                raise ConfigError("config key %r: checkpoint %s is missing or incomplete (expected %s.index and its "
                                  "data)" % (key, prefix, prefix))
            if key == "import_model_train_epoch1":
                epoch = 0
            elif start is not None:  # RETURNN: load's parameters, a new training (from epoch 1)
                epoch = 0
            else:
                epoch = self.config.int("load_epoch") or epoch_from_filename(prefix) or stored_epoch_of(prefix)
            return prefix, epoch, key
        return None

    def _start_epoch(self) -> Optional[int]:
        """``start_epoch`` (RETURNN's key): ``"auto"`` (default, resume from the newest checkpoint) or N
        (continue after ``<model>.N-1``; 1 = from scratch)."""
        value = self.config.value("start_epoch")
        if value == "auto":
            return None
        epoch = self.config.int("start_epoch")
        if epoch < 1:
            raise ConfigError("config key 'start_epoch': expected \"auto\" or an epoch >= 1, got %r" % value)
        return epoch

    def _resume_start(self, epoch: int) -> int:
        """Position in ``epoch``'s batch order to start from: non-zero only in the first epoch after
        resuming an interrupted state (rank 0 checks it against this run's order; all ranks get it)."""
        if self._resume is None:
            return 0
        (stored, position, prefix), self._resume = self._resume, None
        if self.dist.is_chief:
            digest, batches = self.epoch_order
            position = map_resume_position(stored, position, self.dist.size, self.dist.shards_batches, digest,
                                           batches, prefix)
        position = int(self._broadcast_scalar(float(position)))
        if position:
            print("continuing epoch %i after the first %i batches of its batch order (interrupted run)"
                  % (epoch, position), file=log.v3)
            before = 0
            if self.dist.is_chief:
                before = int(stored.get("epoch_steps", stored_steps(stored, position)))
                self._scores_before = stored.get("epoch_scores")
            self.epoch_steps_before = int(self._broadcast_scalar(float(before)))
        return position
