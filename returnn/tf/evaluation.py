"""Evaluating a dataset (scores reduced over ranks) and forwarding it to an HDF file."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.batching import BatchOptions
from returnn.datasets.integrity import check_datasets_unchanged, first_rank_message, nonfinite_culprit
from returnn.datasets.prefetch import BatchPrefetcher
from returnn.distributed.context import DistributedContext
from returnn.errors import ConfigError, DataError
from returnn.interrupts import raise_if_stop_pending
from returnn.log import log
from returnn.tensor import Data
from returnn.tf.losses import reporting_misalignment
from returnn.tf.reporting import ScoreAccumulator
from returnn.tf.steps import StepFunctions


def evaluate_dataset(steps: StepFunctions, dataset: Dataset, epoch: int, batching: BatchOptions,
                     dist: DistributedContext, heartbeat=lambda: None) -> Dict[str, float]:
    """Scores of ``dataset`` without training. Batches are split over ranks (i mod size) and the
    sums reduced, so every rank gets the score of the whole dataset."""
    slices = batching.epoch_slices(dataset, epoch, "eval", rank=dist.rank, size=dist.size, packed=True)
    acc = ScoreAccumulator(steps.loss_labels)
    batches = BatchPrefetcher(dataset, slices, steps.train_keys, batching.prefetch, transform=steps.to_tensors)
    for batch_slice, batch in zip(slices, batches):
        with reporting_misalignment(dataset, batch_slice):
            stats, _ = steps.split_stats(steps.eval_step(batch).numpy(), train=False)  # eval steps carry no flags
        acc.add(stats)
        heartbeat()
    dist.meet("evaluation of %r in epoch %i" % (dataset.name, epoch))
    # scores of data whose file changed meanwhile are not reported (every rank checks its own)
    check_datasets_unchanged([dataset], dist, "after evaluating %s" % dataset.name)
    acc.reduce(dist.backend)
    scores = acc.scores()
    if not all(np.isfinite(v) for v in scores.values()):
        _report_nonfinite(dataset, epoch, scores, slices, steps.train_keys, dist)
    return scores


def _report_nonfinite(dataset: Dataset, epoch: int, scores: Dict[str, float], slices, keys, dist) -> None:
    """A non-finite evaluation score is kept (as RETURNN does; the learning-rate control and
    cleanup_old_models treat it as the worst, see docs/reliability.md), and said in the log with
    the sequence whose data is not finite, if one is (looked for only now, in this rank's part)."""
    try:
        culprit = nonfinite_culprit(dataset, slices, keys)
    except DataError as exc:
        culprit = str(exc)
    culprit = first_rank_message(dist, culprit) if dist.size > 1 else culprit
    if not dist.is_chief:
        return
    bad = ", ".join("%s %s" % (k, v) for k, v in sorted(scores.items()) if not np.isfinite(v))
    cause = ("non-finite input data: %s" % culprit) if culprit and "changed while" not in culprit else \
        (culprit or "the data of %s is finite: the model gives non-finite scores on it" % dataset.name)
    print("epoch %i %s: %s (not finite); the score is kept, as RETURNN does. Cause: %s"
          % (epoch, dataset.name, bad, cause), file=log.warn)


def forward_to_hdf(steps: StepFunctions, dataset: Dataset, output_file: str, batching: BatchOptions,
                   epoch: int = 1, layer: Optional[str] = None, target: str = "classes") -> int:
    """Writes the activations of ``layer`` (default: the output layer; RETURNN's forward_output_layer)
    for every sequence of ``dataset`` to ``output_file`` (RETURNN's HDF layout, via SimpleHDFWriter).
    As RETURNN's forward_to_hdf, the file's ``labels`` are the dataset's labels of the default
    ``target`` when there are as many as the layer's dim. Returns the number of sequences."""
    spec = steps.network.layers[layer or steps.network.output_layer_name].output
    info = dataset.data_infos().get(target)
    labels = getattr(info, "labels", None) if info is not None else None
    writer = _writer(spec, output_file, labels if labels and len(labels) == (spec.dim or 1) else None)
    if layer and layer != steps.network.output_layer_name:
        step, keys = steps.layers_step([layer])
        return _write_dataset(steps, dataset, batching, epoch, keys, step, [writer])
    return _write_dataset(steps, dataset, batching, epoch, steps.forward_keys,
                          lambda batch: [steps.forward_step(batch)], [writer])


def dump_to_hdf(steps: StepFunctions, dataset: Dataset, batching: BatchOptions, epoch: int = 1) -> List[str]:
    """Writes every ``hdf_dump`` layer's value for every sequence of ``dataset`` to its file;
    returns the file names (none without such layers)."""
    network = steps.network
    if not network.dump_layers:
        return []
    files, writers = [], []
    try:
        for name in network.dump_layers:
            layer = network.layers[name]
            filename = layer.filename(dataset.name, epoch)
            directory = os.path.dirname(os.path.abspath(filename))
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise ConfigError("layer %r (hdf_dump): cannot create directory %s: %s"
                                  % (name, directory, exc.strerror or exc)) from None
            files.append(filename)
            writers.append(_writer(layer.output, filename, layer.opt("labels")))
    except BaseException:
        for writer in writers:
            _abandon_writer(writer)
        raise
    _write_dataset(steps, dataset, batching, epoch, steps.dump_keys, steps.dump_step, writers)
    return files


def _writer(spec: Data, filename: str, labels: Optional[Sequence[str]] = None):
    from returnn.datasets.hdf import SimpleHDFWriter
    return SimpleHDFWriter(filename, dim=spec.dim or 1, ndim=1 if spec.sparse else 2, labels=labels)


def _write_dataset(steps: StepFunctions, dataset: Dataset, batching: BatchOptions, epoch: int, keys: List[str],
                   step_fn: Callable, writers: List[Any]) -> int:
    """Runs ``step_fn`` (batch -> one (frames, lengths) pair per writer) over ``dataset`` and writes
    the sequences under their tags; a failure leaves no file behind."""
    count = 0
    try:
        slices = batching.epoch_slices(dataset, epoch, "forward")
        for sl, batch in zip(slices, BatchPrefetcher(dataset, slices, keys, batching.prefetch,
                                                            transform=steps.to_tensors)):
            tags = [dataset.get_tag(int(i)) for i in sl.seq_idxs]
            with reporting_misalignment(dataset, sl):  # a data check failing in the step: one line
                values_per_writer = [(v.numpy(), n.numpy()) for v, n in step_fn(batch)]
            for writer, (values, seq_len) in zip(writers, values_per_writer):
                if np.ndim(seq_len) == 1 and np.ndim(values) >= 2 and len(seq_len) and seq_len.max() > values.shape[1]:
                    # values shorter than their sizes (reinterpret_data's size_base): RETURNN's writer fails too
                    raise DataError("dataset %s: a batch of sequences %s: the output has a sequence of %i frames, "
                                    "its values only %i (reinterpret_data's size_base longer than the values?)" % (
                                        dataset.name, ", ".join(map(repr, tags[:5])) + (", ..." if len(tags) > 5
                                                                                       else ""),
                                        int(seq_len.max()), values.shape[1]))
                writer.insert_batch(values, seq_len, tags)
            count += len(tags)
            raise_if_stop_pending()  # a stop signal that C code cleared on the way still stops the pass
        dataset.check_files_unchanged()  # nothing computed from a changed data file is written
    except BaseException:
        for writer in writers:
            _abandon_writer(writer)
        raise
    for writer in writers:
        writer.close()
    return count


def _abandon_writer(writer) -> None:
    """Drops a half-written output (the writer writes to a temporary name until close())."""
    for name in ("abort", "discard"):
        if hasattr(writer, name):
            getattr(writer, name)()
            return
