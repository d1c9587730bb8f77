"""The engine: builds datasets, network, optimizer and step functions from a config, and runs the
tasks ``train``, ``eval`` and ``forward``.

The training loop, per epoch: choose the learning rate, cut this rank's batches, run the compiled
step on prefetched batches (timing only the step and parameter sync as computing time), average
parameters (``param`` reduce), evaluate dev/eval sets, record scores, save a checkpoint (rank 0).
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from returnn.config import Config
from returnn.config_keys.values import check_epoch_config
from returnn.datasets import eval_dataset_spec, init_dataset
from returnn.datasets.base import Dataset
from returnn.datasets.options import int_option
from returnn.datasets.context_window import pop_context_window
from returnn.datasets.windowing import WindowedDataset
from returnn.datasets.batching import BatchOptions, shard_batches
from returnn.datasets.prefetch import BatchPrefetcher
from returnn.datasets.integrity import check_datasets_unchanged, nonfinite_error
from returnn.distributed.backend import rank_hosts, stall_text
from returnn.distributed.context import DistributedContext
from returnn.errors import ConfigError, DataError, NonFiniteScoreError
from returnn.extern_data import check_dataset_matches, extern_data_from_config
from returnn.interrupts import StopRequest
from returnn.util.output_guard import check_run_outputs
from returnn.util.watchdog import Watchdog
from returnn.learning_rate_control import LearningRateControl
from returnn.log import log
from returnn.tf.checkpoint import CheckpointManager, prepare_model_dir
from returnn.tf.evaluation import evaluate_dataset
from returnn.tf.gradients import GradientOptions
from returnn.tf.model_cleanup import cleanup_old_models, cleanup_options
from returnn.tf.network import TFNetwork
from returnn.tf.network_schedule import ConfigOverlay, NetworkSchedule, carry_params, split_net_dict
from returnn.tf.optimizers import create_optimizer
from returnn.tf.progress import ProgressReporter
from returnn.tf.resume import empty_epoch_message, make_run_state, order_digest
from returnn.tf.returnn_params import network_params
from returnn.tf.engine_best_model import CHECKPOINT_STALL_FACTOR, BestModel
from returnn.tf.engine_inference import InferenceTasks
from returnn.tf.engine_restore import TrainingRestore
from returnn.tf.search_task import search_output_layers
from returnn.tf.reporting import (
    EpochTimer, breakdown_line, finished_line, format_scores, with_exp_scores,
)
from returnn.tf.steps import StepFunctions
from returnn.tf.summaries import SummaryLogger
from returnn.tf.train_loop import run_train_steps, step_seeds
from returnn.util.basic import hms



class Engine(BestModel, InferenceTasks, TrainingRestore):
    """Everything a run needs, built once from the config."""

    def __init__(self, config: Config, dist: DistributedContext):
        self.config = config
        self.dist = dist
        self.seed = config.int("random_seed")
        self.num_epochs = config.int("num_epochs")
        self.save_interval = max(1, config.int("save_interval"))
        self.model = config.value("model")
        self.stop_on_nonfinite = config.bool("stop_on_nonfinite_train_score")
        self.batching = BatchOptions.from_config(config)
        self.datasets = self._init_datasets()
        dist.meet("data set-up")
        train = self.datasets.get("train")
        specs = extern_data_from_config(config, train)
        for name, dataset in self.datasets.items():
            check_dataset_matches(specs, dataset, name, config)
        self.network_data = specs
        self.schedule = NetworkSchedule.from_config(config)
        if self.schedule.get_network is None:  # every epoch's '#config' is known now: checked at start-up
            for epoch in range(1, self.schedule.pretrain_epochs + 2):
                check_epoch_config(self.schedule.net_dict_for_epoch(epoch), epoch)
        self.config_overlay = ConfigOverlay(config)
        self.global_step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        self.checkpoints = CheckpointManager(self.model) if self.model else None
        if self.checkpoints is not None:
            self.checkpoints.pretrain_epochs = self.schedule.pretrain_epochs  # RETURNN's <model>.pretrain.NNN
        self.net_dict: Optional[dict] = None
        self.network: Optional[TFNetwork] = None
        # task search: as RETURNN (use_search_flag), the only network built is the search network
        self.search_mode = config.value("task") == "search"
        self._use_network_of_epoch(1)
        self._check_ranks_agree(1)
        self.lr_control = LearningRateControl.from_config(config)
        self.stop_request = StopRequest()
        self.global_step = 0
        # steps of the current epoch trained before an interruption (resumed mid-epoch; RETURNN, which has no
        # mid-epoch state, trains that epoch whole: its learning-rate file counts them as the epoch's)
        self.epoch_steps_before = 0
        self._scores_before: Optional[dict] = None  # (rank 0) their score sums, of the interrupted state
        # RETURNN's own step count (Engine.global_train_step, the ':meta:global_train_step' of the learning-rate
        # file) minus the global step: it starts at 0 with import_model_train_epoch1 whatever the step imported
        self.meta_step_offset = 0
        self._resume: Optional[tuple] = None  # (run state, stored position, prefix) until the first epoch
        self._continues_interrupted = False  # the first epoch continues an interrupted state
        self.epoch_order = ("", 0)  # digest and length of the current epoch's global batch order
        self.summaries = SummaryLogger.from_config(config, dist.is_chief)
        self.progress = ProgressReporter.from_config(config)
        self.activity = "start-up"  # what the training loop does, for the stall watchdog's message

    # ---- set-up
    def _init_datasets(self) -> Dict[str, Dataset]:
        defaults = {"cache_size": self.config.typed_value("cache_size")}
        out: Dict[str, Dataset] = {}
        specs = [(name, self.config.typed_value(name), name == "train") for name in ("train", "dev", "eval")]
        specs += [(name, spec, False) for name, spec in (self.config.typed_value("eval_datasets") or {}).items()]
        for name, spec, is_train in specs:
            if not is_train:
                spec = eval_dataset_spec(spec, name)
            elif isinstance(spec, dict) and "seq_ordering" not in spec and self.config.has("batching"):
                spec = dict(spec, seq_ordering=self.config.value("batching"))  # RETURNN's global default
            if not spec:
                continue
            window = self.config.int("window")
            if isinstance(spec, dict) and spec.get("window") is not None:  # the dataset's own wins (RETURNN)
                spec = dict(spec)
                window = int_option("dataset %s" % name, "window", spec.pop("window"), minimum=0)
            if window > 1 and isinstance(spec, dict) and spec.get("class") in ("MetaDataset", "CombinedDataset"):
                raise ConfigError("dataset %s (%s): 'window' = %i (the config's or its own): RETURNN's %s does not "
                                  "implement it (assert window == 1)" % (name, spec["class"], window, spec["class"]))
            spec, context = pop_context_window(spec, self.config.typed_value("context_window"), "dataset %s" % name)
            dataset = init_dataset(spec, defaults, name=name)
            dataset.context_window = context
            if is_train and self.dist.dataset_seed_offset():
                dataset.random_seed_offset += self.dist.dataset_seed_offset()
            out[name] = WindowedDataset(dataset, window) if window > 1 else dataset  # RETURNN's input windowing
        return out

    def _eval_dataset_names(self) -> List[str]:
        names = [n for n in ("dev", "eval") if n in self.datasets]
        names += [n for n in (self.config.typed_value("eval_datasets") or {}) if n not in names]
        return names

    def _broadcast_scalar(self, value: float) -> float:
        """Rank 0's value on every rank."""
        contribution = np.array([value if self.dist.is_chief else 0.0])
        return float(self.dist.backend.allreduce_host(contribution, "sum")[0])

    def _sync_from_chief(self) -> None:
        self.dist.backend.broadcast_variables(list(self.network.variables) + list(self.optimizer.variables))

    def _use_network_of_epoch(self, epoch: int, carry: bool = False) -> bool:
        """Builds network, optimizer and step functions for the net dict of ``epoch`` unless the
        current ones were built from the same dict; with ``carry``, parameters of the old network
        move over by name (see :mod:`returnn.tf.network_schedule`). Returns whether it rebuilt."""
        net_dict = self.schedule.net_dict_for_epoch(epoch)
        if self.net_dict is not None and net_dict == self.net_dict:
            return False
        layers, meta = split_net_dict(net_dict)
        search_layers = search_output_layers(self.config) if self.search_mode else []
        for search_layer in search_layers:
            if search_layer not in layers:
                raise ConfigError("config key 'search_output_layer': no layer %r" % search_layer)
        search_layer = search_layers[0] if search_layers else None
        # RETURNN builds what its task names too; only_on_eval layers in every task but forward
        network = TFNetwork(layers, self.network_data, seed=self.seed, default_target=self.config.value("target"),
                            search=self.search_mode, eval_flag=self.config.value("task") != "forward",
                            extra_roots=search_layers, train_flag=self.config.value("task") == "train",
                            search_train_layers=self._search_train_layers(meta))
        if search_layer:
            network.output_layer_name = search_layer
        if self.config.value("task") in ("train", "eval"):  # RETURNN: when the objective is built
            network.check_losses()
        if carry and self.network is not None:
            skip = [] if self.schedule.copy_output_layers(epoch) else \
                [info.layer for info in self.network.losses] + [self.network.output_layer_name]
            moved = carry_params(self.network.layers, network.layers, self.schedule.copy_param_mode(meta, epoch), skip)
            print("network for epoch %i: layers %s; parameters copied: %i, partly copied: %i, new: %s"
                  % (epoch, ", ".join(network.order), len(moved["copied"]), len(moved["partial"]),
                     ", ".join(moved["fresh"]) or "none"), file=log.v3)
        self.network, self.net_dict = network, net_dict
        self.batching.fit_network(network)
        config = self.config
        self.optimizer = create_optimizer(config, network.trainable_variables)
        self.steps = StepFunctions(network, self.optimizer, self.dist, config.float("gradient_clip"),
                                   config.float("gradient_clip_global_norm"),
                                   config.float("gradient_clip_norm"), config.float("gradient_noise"),
                                   accum_grad_multiple_step=config.int("accum_grad_multiple_step") or 0,
                                   gradient_options=GradientOptions.from_config(config))
        if self.checkpoints is not None:
            self.checkpoints.set_objects(network=network, optimizer=self.optimizer, global_step=self.global_step_var)
        return True

    def _search_train_layers(self, meta: dict) -> List[str]:
        """``search_train_network_layers`` of the network being built: its ``#config`` value, else the
        config's own (RETURNN applies ``#config`` before it builds the network)."""
        key = "search_train_network_layers"
        overrides = meta.get("#config") or {}
        if key in overrides:
            value = overrides[key]
        elif key in self.config_overlay.originals:  # an earlier epoch's #config is still set
            value = self.config_overlay.original(key)
        else:
            value = self.config.list("search_train_network_layers")
        return [value] if isinstance(value, str) else list(value or [])

    def _check_ranks_agree(self, epoch: int) -> None:
        """Every rank built the same network (returnn/distributed/agreement.py): one line, exit 2 else."""
        if self.dist.size > 1:
            params = {name: p.shape for name, p in network_params(self.network).items()}
            self.dist.check_network_agrees(self.net_dict, self.network_data, params, epoch)

    def _apply_epoch_config(self, epoch: int) -> None:
        """``#config`` of the epoch's net dict: config keys for this epoch (batching is re-read),
        ``learning_rate`` as the epoch's rate."""
        check_epoch_config(self.net_dict, epoch)  # get_network's: known only now
        overrides = split_net_dict(self.net_dict)[1].get("#config") or {}
        growing = {"max_seq_length", "inc_seq_length"} & set(overrides)
        if growing and (self.batching.inc_seq_length or overrides.get("inc_seq_length")):
            raise ConfigError("network of epoch %i, '#config': %s with inc_seq_length is not supported (RETURNN "
                              "grows max_seq_length before it applies '#config')" % (epoch, sorted(growing)[0]))
        for key, (old, new) in self.config_overlay.apply(overrides).items():
            print("epoch %i: config key %r: %r -> %r (#config)" % (epoch, key, old, new), file=log.v3)
            self.batching = BatchOptions.from_config(self.config)
            self.batching.fit_network(self.network)
        if "learning_rate" in overrides:
            self.lr_control.get_learning_rate_for_epoch(epoch)
            self.lr_control.epochs[epoch].learning_rate = float(overrides["learning_rate"])

    def _learning_rate_of_epoch(self, epoch: int) -> float:
        """RETURNN's rule: pretrain epochs use ``pretrain_learning_rate`` (default ``learning_rate``),
        the first epoch after them ``learning_rate`` again, unless ``use_learning_rate_control_always``."""
        if not self.config.bool("use_learning_rate_control_always") and self.schedule.pretrain is not None:
            # RETURNN trains these epochs at that rate; the file keeps a rate it has (listed in learning_rates)
            rate = None
            if self.schedule.is_pretrain_epoch(epoch):
                rate = self.config.float("pretrain_learning_rate", self.lr_control.default_learning_rate)
            elif epoch == self.schedule.pretrain_epochs + 1:
                rate = self.lr_control.default_learning_rate
            if rate is not None:
                self.lr_control.set_default_learning_rate_for_epoch(epoch, rate)
                return rate
        return self.lr_control.get_learning_rate_for_epoch(epoch)

    def _trace(self) -> None:
        t0 = time.perf_counter()
        self.steps.trace(with_eval=bool(self._eval_dataset_names()), with_forward=False)
        self.dist.meet("tracing")
        print("step functions traced in %.2f sec (one-time cost, not part of epoch timing)"
              % (time.perf_counter() - t0), file=log.v4)

    # ---- tasks
    def run(self, task: str) -> None:
        """Runs ``task`` (one of :data:`returnn.__main__.KNOWN_TASKS`, checked there before start-up)."""
        try:
            getattr(self, "task_" + task)()
        finally:
            self.summaries.close()
            for dataset in self.datasets.values():
                dataset.close()

    def task_train(self) -> None:
        if "train" not in self.datasets:
            raise ConfigError("task 'train' needs a 'train' dataset in the config")
        if self.checkpoints is None:
            raise ConfigError("task 'train' needs 'model' (the checkpoint path prefix)")
        if all(info.only_on_eval for info in self.network.losses) and not self.network.has_constraints:
            raise ConfigError("task 'train': the network has no loss to train (no layer with 'loss' outside "
                              "only_on_eval, and no L2 or other constraint) (RETURNN: 'no loss defined?')")
        if self.dist.is_chief:
            prepare_model_dir(self.model)
            check_run_outputs(self.config, "train", self.datasets.values())  # never over an input
        start_epoch = self._restore_for_training()
        if start_epoch > self.num_epochs:
            if start_epoch == 1:
                print("nothing to train (num_epochs = %i)" % self.num_epochs, file=log.v2)
            else:
                print("model %s is already trained (num_epochs = %i, checkpoint of epoch %i found); nothing to do: "
                      "a larger num_epochs trains on" % (self.model, self.num_epochs, start_epoch - 1), file=log.v2)
            print("Finished training in epoch %i." % self.num_epochs, file=log.v3)
            return
        print("start training at epoch %i" % start_epoch, file=log.v3)
        self._trace()
        watchdog = None
        if self.dist.has_stall_watchdog:
            text = stall_text(self.dist.rank, rank_hosts(self.dist.backend))
            watchdog = Watchdog(self.dist.stall_timeout, describe=lambda: "%s (this rank was in %s)" % (text, self.activity))
        self.stop_request.install()
        try:
            if watchdog:
                self.dist.watchdog = watchdog
                watchdog.start()
                watchdog.arm()
            for epoch in range(start_epoch, self.num_epochs + 1):
                self._train_and_report_epoch(epoch, watchdog)
        finally:
            self.stop_request.uninstall()
            if watchdog:
                watchdog.stop()
                self.dist.watchdog = None
        print("Finished training in epoch %i." % self.num_epochs, file=log.v3)

    def _train_and_report_epoch(self, epoch: int, watchdog: Optional[Watchdog]) -> None:
        if self.config.bool("reinit_network_each_epoch") and not self._continues_interrupted:
            # RETURNN builds network and updater anew each epoch (parameters carried over); an interrupted
            # epoch continues with the optimizer state it had (RETURNN trains it again whole, reinit first)
            self.net_dict = None
        self._continues_interrupted = False
        if (self.schedule.changes_per_epoch or self.net_dict is None) and self._use_network_of_epoch(epoch, carry=True):
            if self.dist.size > 1:
                self._check_ranks_agree(epoch)  # the ranks meet there
                self._sync_from_chief()
            self._trace()
        self._apply_epoch_config(epoch)
        grown = self.batching.start_train_epoch(epoch)
        if grown is not None:
            print("increasing sequence lengths to %i (inc_seq_length)" % grown, file=log.v3)
        lr = self._broadcast_scalar(self._learning_rate_of_epoch(epoch))
        effective = lr * self.dist.learning_rate_factor()
        self.optimizer.learning_rate.assign(effective)
        note = (" (horovod_scale_lr: effective %s = %s * %i ranks)" % (effective, lr, self.dist.size)
                if effective != lr else "")
        self._maybe_use_better_last_model(epoch)
        print("start epoch %i with learning rate %s ...%s" % (epoch, lr, note), file=log.v3)
        heartbeat = watchdog.beat if watchdog else (lambda: None)
        self.activity = "the training steps of epoch %i" % epoch
        check_datasets_unchanged(self.datasets.values(), self.dist, "at the start of epoch %i" % epoch)
        if epoch == 1 and self.config.bool("save_epoch1_initial_model") and self.checkpoints is not None:
            self._save_initial_model()
        train_scores, timer, steps = self._train_epoch(epoch, heartbeat)
        # the epoch's steps and first step as RETURNN counts them (an interrupted epoch: also those before)
        epoch_steps, self.epoch_steps_before = steps + self.epoch_steps_before, 0
        first_step = self.global_step - epoch_steps
        print(finished_line("train", epoch, steps, timer), file=log.v3)
        self._report_time_split(epoch, timer)
        eval_scores = {}
        for name in self._eval_dataset_names():
            self.activity = "evaluation of %r in epoch %i" % (name, epoch)
            eval_scores[name] = evaluate_dataset(self.steps, self.datasets[name], epoch, self.batching.for_eval(name),
                                                 self.dist, heartbeat)
        if self.config.bool("calculate_exp_loss"):
            labels = self.steps.train_loss_labels
            train_scores = with_exp_scores(train_scores, labels)
            eval_scores = {name: with_exp_scores(scores, labels) for name, scores in eval_scores.items()}
        # nothing read from a changed file is saved: checked on all ranks before rank 0 writes
        check_datasets_unchanged(self.datasets.values(), self.dist, "after epoch %i, before its checkpoint" % epoch)
        errors = {"train_" + k: v for k, v in train_scores.items()}
        for name, scores in eval_scores.items():
            errors.update({"%s_%s" % (name, k): v for k, v in scores.items()})
        self.lr_control.set_epoch_error(epoch, errors)
        self.lr_control.set_epoch_meta(epoch, {  # RETURNN's ':meta:' entries of the file (not the host name)
            "global_train_step": first_step + self.meta_step_offset,
            "effective_learning_rate": self.steps.update.rate_of_step(first_step, effective),
            "epoch_num_train_steps": epoch_steps, "epoch_train_time_secs": round(timer.elapsed)})
        saving = epoch % self.save_interval == 0 or epoch == self.num_epochs
        if self.dist.is_chief:
            with self.dist.watchdog_paused():
                self.lr_control.save()
                if saving:
                    self.global_step_var.assign(self.global_step)
                    prefix = self.checkpoints.save(epoch, self._run_state())
                    self.checkpoints.remove_interrupted()
                    print("saved model %s" % prefix, file=log.v4)
                    self._cleanup_old_models()
        # the others wait for rank 0's write: a long one is no stall, up to the factor
        self.dist.meet("saving the %s of epoch %i" % ("checkpoint" if saving else "learning-rate file", epoch),
                       CHECKPOINT_STALL_FACTOR)
        line = "epoch %i %s elapsed: %s" % (epoch, format_scores(train_scores, True), hms(timer.elapsed))
        for name, scores in eval_scores.items():
            line += " %s: %s" % (name, format_scores(scores, False))
        print(line, file=log.v1)  # RETURNN's level for the epoch score line
        self.summaries.epoch(epoch, lr, train_scores, eval_scores, timer.computing_fraction)

    def _epoch_batches(self, epoch: int):
        """(dataset, this rank's batch slices of ``epoch``, start position in the epoch's batch order):
        sharded, cut to the smallest rank's count, without what an interrupted run already trained."""
        dataset = self.datasets["train"]
        ordered = self.batching.epoch_slices(dataset, epoch, "train", packed=True)
        self.epoch_order = (order_digest(ordered), len(ordered))
        start = self._resume_start(epoch)
        slices = ordered[start:]
        if self.dist.shards_batches:
            slices = shard_batches(slices, self.dist.rank, self.dist.size)
        if self.dist.size > 1:  # the epoch ends for all when the first rank runs out
            self.dist.meet("preparing epoch %i" % epoch)
            count = int(self.dist.backend.allreduce_host(np.array([len(slices)]), "min")[0])
            if count < len(slices):
                print("train epoch %i: using %i of this rank's %i batches (another rank has fewer)"
                      % (epoch, count, len(slices)), file=log.v4)
            slices = slices[:count]
        if not slices and not start:
            raise DataError(empty_epoch_message(dataset.name, epoch, len(ordered), self.dist.size, dataset))
        return dataset, slices, start

    def _train_epoch(self, epoch: int, heartbeat):
        """Runs one epoch; returns (scores reduced over ranks, timer, number of steps)."""
        dataset, slices, start = self._epoch_batches(epoch)
        per_step = self.dist.size if self.dist.shards_batches else 1  # global batches per step
        seeds = iter(step_seeds(epoch, self.global_step, len(slices)))

        def step_input(batch):  # in the prefetch thread: tensors of the batch, and its step's seed
            return self.steps.to_tensors(batch), next(seeds)
        prefetcher = BatchPrefetcher(dataset, slices, self.steps.train_keys, self.batching.prefetch,
                                     transform=step_input)
        progress, summaries, loss_names = self.progress, self.summaries, self.steps.train_loss_labels
        first_step = self.global_step

        def on_step(step: int, stats: np.ndarray, batch: dict) -> None:
            heartbeat()
            progress.step(step, stats, batch, loss_names)
            summaries.train_step(first_step + step, stats, loss_names)
        progress.start_epoch("train", epoch, len(slices))
        try:
            done = run_train_steps(self.steps, prefetcher, slices, dataset, self.dist,
                                   lambda: self.stop_request.requested, on_step, self.stop_on_nonfinite,
                                   self.config.int("reset_updater_vars_mod_step"))
        except NonFiniteScoreError as exc:  # name the data's sequence if it is the cause (prefetching stopped)
            prefetcher.close()
            bad = list(getattr(exc, "steps", []))  # this rank's batches of the step; earlier ones of the epoch
            raise nonfinite_error(exc, dataset, [slices[i] for i in bad], self.steps.train_keys, self.dist,
                                  earlier=slices[:min(bad or [0])]) from None
        finally:
            prefetcher.close()
        self.global_step = first_step + done.steps
        acc = done.scores
        before, self._scores_before = self._scores_before, None
        if isinstance(before, dict) and before.get("losses") == acc.loss_names:  # (rank 0; summed over ranks next)
            acc.totals += np.asarray(before["totals"], dtype=np.float64).reshape(acc.totals.shape)
        if done.stopped:
            acc.reduce(self.dist.backend)
            self._save_interrupted(epoch, done.steps, start + done.steps * per_step, acc)
        timer = done.timer
        timer.data_wait = prefetcher.wait_time
        progress.end_epoch()
        acc.reduce(self.dist.backend)
        scores = acc.scores()
        if self.stop_on_nonfinite and any(not np.isfinite(v) for v in scores.values()) and done.steps > 0:
            raise NonFiniteScoreError("Model seems broken, got inf or nan score.")
        return scores, timer, done.steps

    def _run_state(self) -> dict:
        return make_run_state(self.dist.size, self.dist.shards_batches, *self.epoch_order, self.lr_control)

    def _save_interrupted(self, epoch: int, steps_done: int, position: int, scores) -> None:
        """All ranks agreed to stop after ``steps_done`` steps of ``epoch`` (the first ``position``
        batches of its order): rank 0 saves a resumable state, everyone exits. The state keeps the
        epoch's steps and score sums (``scores``, over ranks) so far: RETURNN, which has no mid-epoch
        state, trains the epoch again whole; the resumed epoch's learning-rate file entry is that too."""
        check_datasets_unchanged(self.datasets.values(), self.dist, "before saving the interrupted state")
        if self.dist.is_chief:
            self.global_step_var.assign(self.global_step)
            state = dict(self._run_state(), epoch_steps=self.epoch_steps_before + steps_done,
                         epoch_scores={"losses": list(scores.loss_names), "totals": scores.totals.tolist()})
            prefix = self.checkpoints.save_interrupted(epoch - 1, position, state)
            self.lr_control.save()
            print("stop requested (signal) in epoch %i after step %i; saved %s; run the same command again to "
                  "continue from there" % (epoch, steps_done, prefix), file=log.v1)
        self.dist.backend.barrier()
        raise self.stop_request.interrupted()

    def _report_time_split(self, epoch: int, timer: EpochTimer) -> None:
        """Where each rank's epoch time went (printed at log_verbosity >= 4). The figures are
        gathered every epoch whatever the verbosity (one small collective), so a logging setting
        never decides whether ranks communicate."""
        figures = np.zeros((self.dist.size, 4))
        figures[self.dist.rank] = timer.as_array()
        if self.dist.size > 1:
            figures = self.dist.backend.allreduce_host(figures.reshape(-1), "sum").reshape(self.dist.size, 4)
        if self.dist.size == 1:
            print("train epoch %i, time split: %s" % (epoch, breakdown_line(None, figures[0], False)), file=log.v4)
            return
        print("train epoch %i, time split per rank:" % epoch, file=log.v4)
        for rank in range(self.dist.size):
            print(breakdown_line(rank, figures[rank], self.dist.reduces_gradients), file=log.v4)

    def _save_initial_model(self) -> None:
        """RETURNN's ``save_epoch1_initial_model``: the parameters before epoch 1 as ``<model>.000``
        (``<model>.pretrain.000`` when epoch 1 is a pretrain epoch)."""
        if self.dist.is_chief:
            self.global_step_var.assign(self.global_step)
            print("save initial epoch1 model %s" % self.checkpoints.save(0, self._run_state()), file=log.v4)
        self.dist.meet("saving the initial model", CHECKPOINT_STALL_FACTOR)

    def _cleanup_old_models(self) -> None:
        value = self.config.typed_value("cleanup_old_models")
        if not value:
            return
        scores = {e: d.error for e, d in self.lr_control.epochs.items()}
        removed = cleanup_old_models(self.model, cleanup_options(value), scores)
        if removed:
            print("cleanup_old_models: deleted the checkpoints of epochs %s" % removed, file=log.v3)
