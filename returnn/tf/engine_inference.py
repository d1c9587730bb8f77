"""The engine's tasks that load a model and run it without training: ``eval`` (scores of the
dev/eval datasets), ``search`` (beam search, :mod:`returnn.tf.search_task`) and ``forward`` (the
output layer's values to HDF), and how they find the model (``load`` / ``load_epoch`` / the
newest checkpoint). A mix-in of :class:`returnn.tf.engine.Engine`, whose state it uses."""
from __future__ import annotations

import os
from typing import Set

from returnn.datasets import init_dataset
from returnn.datasets.context_window import pop_context_window
from returnn.errors import ConfigError
from returnn.log import log
from returnn.tf.checkpoint import (
    CheckpointManager, epoch_prefix, existing_epoch_prefix, is_complete, prepare_output_dir, stored_epoch_of,
)
from returnn.tf.eval_output import runner_scores, write_eval_output
from returnn.tf.evaluation import dump_to_hdf, evaluate_dataset, forward_to_hdf
from returnn.tf.preload import preload_from_files
from returnn.tf.reporting import format_scores, with_exp_scores
from returnn.tf.search_task import search_output_layers
from returnn.util.output_guard import check_run_outputs


class InferenceTasks:
    """``task_eval``, ``task_search``, ``task_forward`` of the engine (see the module docstring)."""

    def _load_for_inference(self) -> int:
        """Loads ``load`` / ``load_epoch`` / the newest checkpoint; returns its epoch."""
        load = self.config.value("load")
        if load:
            prefix = load[:-len(".index")] if load.endswith(".index") else load
        else:
            if self.model is None:
                raise ConfigError("task needs 'model' or 'load' to find a checkpoint")
            epoch = self.config.int("load_epoch")
            if epoch is None:
                point = self.checkpoints.find_resume_point()
                if point is None and self.config.bool("allow_random_model_init"):
                    print("no checkpoint found for model %s: parameters randomly initialised "
                          "(allow_random_model_init)" % self.model, file=log.v2)
                    self._use_network_of_epoch(1)
                    preload_from_files(self.config.typed_value("preload_from_files"), self.network,
                                       starting_training=False, fresh=True)
                    return 1
                if point is None:
                    raise ConfigError("no complete checkpoint found for model %s" % self.model)
                prefix = point[0]
            else:
                # RETURNN's get_existing_models: <model>.NNN, else <model>.pretrain.NNN
                prefix = existing_epoch_prefix(self.model, epoch) or epoch_prefix(self.model, epoch)
        if not is_complete(prefix):
            raise ConfigError("checkpoint %s is missing or incomplete" % prefix)
        if self.checkpoints is None:
            self.checkpoints = CheckpointManager(prefix)
        self._use_network_of_epoch(max(1, stored_epoch_of(prefix)))
        self.checkpoints.set_objects(network=self.network, optimizer=self.optimizer, global_step=self.global_step_var)
        self.checkpoints.ignore_missing_vars = self.config.bool("load_ignore_missing_vars")
        # RETURNN: the recognition entries of preload_from_files first; the model checkpoint then
        # loads only what they did not (an LM fused in for decoding need not be in the AM's checkpoint)
        preloaded: Set[str] = set()
        preload_from_files(self.config.typed_value("preload_from_files"), self.network, starting_training=False,
                           loaded=preloaded)
        epoch = self.checkpoints.restore(prefix, skip=preloaded)
        print("loaded checkpoint %s (epoch %i)" % (prefix, epoch), file=log.v3)
        return epoch

    def task_eval(self) -> None:
        epoch = self._load_for_inference()
        names = self._eval_dataset_names()
        if not names:
            raise ConfigError("task 'eval' needs a 'dev', 'eval' or 'eval_datasets' dataset")
        if self.dist.is_chief:
            check_run_outputs(self.config, "eval", self.datasets.values(), self.network,
                              [self.datasets[n].name for n in names], epoch)
        results = {}
        for name in names:
            scores = evaluate_dataset(self.steps, self.datasets[name], epoch, self.batching.for_eval(name), self.dist)
            print("epoch %i %s: %s" % (epoch, name, format_scores(scores, False)), file=log.v1)
            results[name] = runner_scores(scores, self.steps.loss_labels)
            self._dump(self.datasets[name], epoch)
            if not self.config.value("load"):  # RETURNN's eval of 'model' at load_epoch: into the learning-rate file
                if self.config.bool("calculate_exp_loss"):
                    scores = with_exp_scores(scores, self.steps.loss_labels)
                self.lr_control.set_epoch_error(epoch, {"%s_%s" % (name, k): v for k, v in scores.items()})
                if self.dist.is_chief:
                    self.lr_control.save()
        output_file = self.config.value("eval_output_file")
        if output_file and self.dist.is_chief:  # RETURNN's eval_model: every dataset's scores, after the last
            write_eval_output(output_file, results)

    def _dump(self, dataset, epoch: int) -> None:
        """Rank 0 writes the network's hdf_dump layers over ``dataset``."""
        if self.network.dump_layers and self.dist.is_chief:
            files = dump_to_hdf(self.steps, dataset, self.batching.for_forward(), epoch)
            print("dumped %s of %s to %s" % (", ".join(self.network.dump_layers), dataset.name, ", ".join(files)),
                  file=log.v1)

    def task_search(self) -> None:
        """Beam search (see :mod:`returnn.tf.search_task`); rank 0 decodes and writes."""
        from returnn.tf.search_task import beam_of_layer, hypothesis_text, label_names, run_search, write_hypotheses
        epoch = self._load_for_inference()
        self.network.require_output_layer("search")
        spec = self.config.typed_value("search_data")
        if spec in ("train", "dev", "eval"):  # RETURNN: the config's dataset of that name
            if spec not in self.datasets:
                raise ConfigError("config key 'search_data': %r names the config's %r dataset, which it lacks"
                                  % (spec, spec))
            dataset = self.datasets[spec]
        elif spec:
            spec, context = pop_context_window(spec, self.config.typed_value("context_window"), "search_data")
            dataset = init_dataset(spec, {"cache_size": self.config.typed_value("cache_size")}, name="search_data")
            dataset.context_window = context
        else:  # RETURNN's default search_data is "eval"
            dataset = self.datasets.get("eval")
        if dataset is None:
            raise ConfigError("task 'search' needs 'search_data' or an 'eval' dataset (RETURNN searches 'eval' by "
                              "default: 'set search_data')")
        output_file = self.config.value("search_output_file")
        if output_file and isinstance(self.config.typed_value("search_output_layer"), (list, tuple)) \
                and self.config.value("search_output_file_format") != "py":
            raise ConfigError("config key 'search_output_layer' is a list: its hypotheses {layer: hypothesis} need "
                              "search_output_file_format 'py' (as RETURNN)")
        if output_file:
            prepare_output_dir(output_file, "search_output_file")
        if not self.dist.is_chief:
            return
        check_run_outputs(self.config, "search", list(self.datasets.values()) + [dataset])
        target = self.config.value("target") or "classes"
        layers = search_output_layers(self.config)
        names = {}

        # a layer that still has the beam (RETURNN's Data.beam: no decide after the searched rec layer) gives all its
        # hypotheses with their scores: those rec layers keep their beams (as in a training network)
        searched = {beam_of_layer(self.network, name) for name in layers or [self.network.output_layer_name]} - {None}
        for name in searched:
            self.network.layers[name].keep_beams = True

        def check_layers() -> None:  # RETURNN: the labels to write each layer's hypotheses with
            for name in layers or [self.network.output_layer_name]:
                names[name] = label_names(self.network, dataset, name, target)
        keyed = output_file if output_file and self.config.value("search_output_file_format") == "py" else None
        keyed_layers = isinstance(self.config.typed_value("search_output_layer"), (list, tuple))
        results, stats = run_search(self.steps, dataset, self.batching.for_eval(), epoch, target, layers, keyed,
                                    keyed_layers, check_layers if output_file else None, bool(searched))
        if output_file:
            single = (layers or [self.network.output_layer_name])[0]
            write_hypotheses(output_file, [(tag, {k: hypothesis_text(v, names[k]) for k, v in labels.items()}
                                            if isinstance(labels, dict) else hypothesis_text(labels, names[single]))
                                           for tag, labels in results],
                             self.config.value("search_output_file_format"))
        line = "search epoch %i %s: %i sequences" % (epoch, dataset.name, len(results))
        if stats:
            line += ", edit distance %i of %i reference labels (%.2f%% error rate)" % (
                stats["edit_distance"], stats["ref_len"], 100.0 * stats["error_rate"])
        if output_file:
            line += ", hypotheses in %s" % output_file
        print(line, file=log.v1)

    def task_forward(self) -> None:
        """RETURNN's TF forward_to_hdf: the output layer's (or forward_output_layer's) frames of the eval
        dataset to ``output_file`` (default ``dump-fwd-epoch-N.hdf``, as RETURNN)."""
        epoch = self._load_for_inference()
        dataset = self.datasets.get("eval")
        if dataset is None:
            raise ConfigError("task 'forward' needs an 'eval' dataset (RETURNN: 'no eval data provided')")
        output_file = self.config.value("output_file") or "dump-fwd-epoch-%i.hdf" % epoch
        layer = self.config.value("forward_output_layer") or self.network.require_output_layer("forward")
        if layer not in self.network.layers:  # RETURNN: "output layer %r not found"
            raise ConfigError("config key 'forward_output_layer': no layer %r in the network" % layer)
        if not self.dist.is_chief:
            return
        check_run_outputs(self.config, "forward", self.datasets.values(), self.network, [dataset.name], epoch)
        if not self.batching.forward_batch_size:  # RETURNN's TF task forward fails so too (after loading)
            raise ConfigError("task 'forward' needs forward_batch_size (frames per batch; RETURNN: 'forward_batch_size "
                              "not set')")
        if os.path.exists(output_file) and not self.config.bool("forward_override_hdf_output"):
            # RETURNN's forward_to_hdf asserts it is not there (deleting it only with forward_override_hdf_output)
            raise ConfigError("config key 'output_file': %s exists; set forward_override_hdf_output = True to replace "
                              "it (RETURNN stops on it too)" % output_file)
        self._dump(dataset, epoch)
        directory = os.path.dirname(os.path.abspath(output_file))
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise ConfigError("config key 'output_file': cannot create directory %s: %s"
                              % (directory, exc.strerror or exc))
        count = forward_to_hdf(self.steps, dataset, output_file, self.batching.for_forward(), epoch, layer,
                               self.config.value("target") or "classes")
        print("forwarded %i sequences of %s to %s" % (count, dataset.name, output_file), file=log.v1)
