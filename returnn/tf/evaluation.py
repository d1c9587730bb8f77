"""Evaluating a dataset (scores reduced over ranks) and forwarding it to an HDF file."""
from __future__ import annotations

from typing import Dict

from returnn.datasets.base import Dataset
from returnn.datasets.batching import BatchOptions
from returnn.datasets.prefetch import BatchPrefetcher
from returnn.distributed.context import DistributedContext
from returnn.tf.losses import reporting_misalignment
from returnn.tf.reporting import ScoreAccumulator
from returnn.tf.steps import StepFunctions


def evaluate_dataset(steps: StepFunctions, dataset: Dataset, epoch: int, batching: BatchOptions,
                     dist: DistributedContext, heartbeat=lambda: None) -> Dict[str, float]:
    """Scores of ``dataset`` without training. Batches are split over ranks (i mod size) and the
    sums reduced, so every rank gets the score of the whole dataset."""
    slices = batching.epoch_slices(dataset, epoch, chunked=False, rank=dist.rank, size=dist.size, packed=True)
    acc = ScoreAccumulator(steps.loss_names)
    batches = BatchPrefetcher(dataset, slices, steps.train_keys, batching.prefetch, transform=steps.to_tensors)
    for batch_slice, batch in zip(slices, batches):
        with reporting_misalignment(dataset, batch_slice):
            stats, _ = steps.split_stats(steps.eval_step(batch).numpy())  # eval steps carry no flags
        acc.add(stats)
        heartbeat()
    dist.meet("evaluation of %r in epoch %i" % (dataset.name, epoch))
    acc.reduce(dist.backend)
    return acc.scores()


def forward_to_hdf(steps: StepFunctions, dataset: Dataset, output_file: str, batching: BatchOptions,
                   epoch: int = 1) -> int:
    """Writes the output layer's activations for every sequence of ``dataset`` to ``output_file``
    (RETURNN's HDF layout, via SimpleHDFWriter). Returns the number of sequences."""
    from returnn.datasets.hdf import SimpleHDFWriter

    spec = steps.network.layers[steps.network.output_layer_name].output
    slices = batching.epoch_slices(dataset, epoch, chunked=False)
    ndim = 1 if spec.sparse else 2
    writer = SimpleHDFWriter(output_file, dim=spec.dim or 1, ndim=ndim)
    count = 0
    try:
        for sl, batch in zip(slices, BatchPrefetcher(dataset, slices, steps.forward_keys, batching.prefetch,
                                                            transform=steps.to_tensors)):
            values, seq_len = steps.forward_step(batch)
            tags = [dataset.get_tag(int(i)) for i in sl.seq_idxs]
            writer.insert_batch(values.numpy(), seq_len.numpy(), tags)
            count += len(tags)
    except BaseException:
        _abandon_writer(writer)
        raise
    writer.close()
    return count


def _abandon_writer(writer) -> None:
    """Drops a half-written output (the writer writes to a temporary name until close())."""
    for name in ("abort", "discard"):
        if hasattr(writer, name):
            getattr(writer, name)()
            return
