"""RETURNN's ``use_last_best_model``: at the start of a training epoch, the parameters of an earlier epoch
that scored better than the last one. A mix-in of :class:`returnn.tf.engine.Engine`, whose state it uses
(``config``, ``lr_control``, ``schedule``, ``dist``, ``checkpoints``, ``steps``, the global step)."""
from __future__ import annotations

from typing import Optional

from returnn.errors import ConfigError
from returnn.log import log
from returnn.tf.checkpoint import epoch_prefix, existing_epoch_prefix, is_complete

# Rank 0 alone may take this many times horovod_stall_timeout to write a checkpoint (the other
# ranks wait for it): a long write is no stall, but a rank 0 stuck in one must still end the run.
CHECKPOINT_STALL_FACTOR = 4.0


class BestModel:
    """``_maybe_use_better_last_model`` of the engine (see the module docstring)."""

    def _maybe_use_better_last_model(self, epoch: int) -> None:
        """RETURNN's ``use_last_best_model`` (its ``Engine._maybe_use_better_last_model``): at the start
        of a non-pretrain epoch (every ``modulo``-th, or after a last score above ``filter_score``),
        when an earlier epoch scored better than the last one (``LearningRateControl.last_best_epoch``),
        its parameters and global step are loaded and the optimizer starts fresh. Rank 0 decides and
        loads; all ranks take its variables."""
        value = self.config.typed_value("use_last_best_model")
        if not value or self.schedule.is_pretrain_epoch(epoch):
            return
        best = 0
        if self.dist.is_chief:
            best = self._last_best_epoch(epoch, dict(value) if isinstance(value, dict) else {}) or 0
        if self.dist.size > 1:
            best = int(self._broadcast_scalar(float(best)))
        if not best:
            return
        control = self.lr_control
        print("Last epoch %i (score: %f) is not the optimal model but epoch %i has better score %f (%r), will use "
              "that model." % (epoch - 1, control.epoch_error(epoch - 1), best, control.epoch_error(best),
                               control.epochs[best].error), file=log.v2)
        if self.dist.is_chief:
            prefix = existing_epoch_prefix(self.model, best)
            if prefix is None or not is_complete(prefix):
                raise ConfigError("config key 'use_last_best_model': the model of epoch %i, %s, does not exist (not "
                                  "saved, save_interval %i, or deleted by cleanup_old_models); RETURNN fails there too"
                                  % (best, self.checkpoints.epoch_prefix(best), self.save_interval))
            self.checkpoints.restore(prefix, params_only=True)
            print("loaded the parameters of %s (global step %i); the optimizer starts fresh"
                  % (prefix, int(self.global_step_var.numpy())), file=log.v4)
        self.steps.update.reset_state()  # RETURNN: init_optimizer_vars
        if self.dist.size > 1:
            self.dist.meet("loading the model of epoch %i (use_last_best_model)" % best, CHECKPOINT_STALL_FACTOR)
            self._sync_from_chief()
        self.global_step = int(self._broadcast_scalar(float(self.global_step_var.numpy())))  # RETURNN: the model's
        self.global_step_var.assign(self.global_step)

    def _last_best_epoch(self, epoch: int, opts: dict) -> Optional[int]:
        """RETURNN's choice for ``use_last_best_model`` at the start of ``epoch`` (None: keep the last model)."""
        control = self.lr_control
        if epoch % int(opts.pop("modulo", 1)) != 0:
            # RETURNN: only every modulo-th epoch, unless the last score was above filter_score
            if (control.epoch_error(epoch - 1) or 0) <= opts.get("filter_score", float("inf")):
                return None
        pretrain = self.schedule.pretrain
        opts.setdefault("first_epoch", pretrain.get_train_num_epochs() if pretrain else 1)
        best = control.last_best_epoch(last_epoch=epoch - 1, **opts)
        return best if best and best != epoch - 1 else None
