"""Evaluating a dataset (scores reduced over ranks) and forwarding it to an HDF file."""
from __future__ import annotations

from typing import Dict, List


from returnn.datasets.base import Dataset
from returnn.datasets.batching import BatchSlices, generate_batches, shard_batches
from returnn.datasets.prefetch import BatchPrefetcher
from returnn.distributed.context import DistributedContext
from returnn.tf.reporting import ScoreAccumulator
from returnn.tf.steps import StepFunctions


class BatchOptions:
    """The batching options of a config, in one place."""

    def __init__(self, batch_size: int, max_seqs: int, chunking, max_seq_length: int, prefetch: int):
        self.batch_size = int(batch_size)
        self.max_seqs = int(max_seqs)
        self.chunking = chunking
        self.max_seq_length = int(max_seq_length or 0)
        self.prefetch = int(prefetch)

    @classmethod
    def from_config(cls, config) -> "BatchOptions":
        max_seq_length = config.typed_value("max_seq_length", 0)
        if isinstance(max_seq_length, dict):  # RETURNN allows per-key limits; use the largest
            max_seq_length = max(max_seq_length.values()) if max_seq_length else 0
        return cls(batch_size=config.int("batch_size", 1000), max_seqs=config.int("max_seqs", -1),
                   chunking=config.typed_value("chunking", None), max_seq_length=max_seq_length or 0,
                   prefetch=config.int("prefetch_batches", 8))

    def epoch_slices(self, dataset: Dataset, epoch: int, chunked: bool) -> List[BatchSlices]:
        """Orders ``dataset`` for ``epoch`` and cuts it into batches (all ranks' batches)."""
        dataset.init_seq_order(epoch)
        return generate_batches(dataset, self.batch_size, self.max_seqs, self.chunking if chunked else None,
                                self.max_seq_length)


def evaluate_dataset(steps: StepFunctions, dataset: Dataset, epoch: int, batching: BatchOptions,
                     dist: DistributedContext, heartbeat=lambda: None) -> Dict[str, float]:
    """Scores of ``dataset`` without training. Batches are split over ranks (i mod size) and the
    sums reduced, so every rank gets the score of the whole dataset."""
    slices = shard_batches(batching.epoch_slices(dataset, epoch, chunked=False), dist.rank, dist.size)
    acc = ScoreAccumulator(steps.loss_names)
    for batch in BatchPrefetcher(dataset, slices, steps.train_keys, batching.prefetch, transform=steps.to_tensors):
        stats, _ = steps.split_stats(steps.eval_step(batch).numpy())  # eval steps carry no flags
        acc.add(stats)
        heartbeat()
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
