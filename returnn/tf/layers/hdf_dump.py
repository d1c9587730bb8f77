"""``hdf_dump``: its input, unchanged, and written sequence by sequence to an HDF file.

``{"class": "hdf_dump", "from": "ctc_forced_align", "filename": "alignments-{dataset_name}.hdf",
"dump_per_run": True, "is_output_layer": True}``. The file has RETURNN's HDF layout (readable by
``HDFDataset``, keyed by the dataset's sequence tags), so a dumped alignment can be a target of a
later training. With ``dump_per_run`` (RETURNN's), one file per dataset run: ``filename`` may hold
``{dataset_name}`` and ``{epoch}``, or be a function taking them as keyword arguments. Without it
(RETURNN's default) the name is taken as it is (RETURNN fills in nothing) and RETURNN writes every
dataset of the run into that one file: here one dataset per run, a second one is refused. Written
in the ``forward`` and ``eval`` tasks (by rank 0; the file appears complete or not at all). Options of RETURNN this engine does not
implement (``extra``, ``dump_whole_batches``, ``extend_existing_file``) are errors when set.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.base import Layer, LayerOutput, RunContext, register_layer
from returnn.tf.layers.helpers import check_sources
from returnn.tf.layers.options import Option

_UNSUPPORTED = ("extra", "dump_whole_batches", "extend_existing_file")


@register_layer
class HDFDumpLayer(Layer):
    """See the module docstring."""

    layer_class = "hdf_dump"
    options = (
        Option("filename", None, "HDF file to write ({dataset_name}, {epoch} are filled in), or a function"),
        Option("labels", None, "class names written with the data"),
        Option("dump_per_run", False, "one file per dataset run, its name filled in (else the name as it is)"),
        Option("extra", None, "not supported: only None or {}"),
        Option("dump_whole_batches", False, "not supported: only False"),
        Option("extend_existing_file", False, "not supported: only False"),
    )

    def __init__(self, name: str, opts: Dict[str, Any], sources: Sequence[Data], seed: int = 42):
        super().__init__(name, opts, sources, seed)
        check_sources(self, sources, 1, 1)
        for key in _UNSUPPORTED:
            if self.opts.get(key):
                raise NetworkError("%s: option %r is not supported (%r)" % (self.desc, key, self.opts[key]))
        filename = self.opt("filename")
        if not (isinstance(filename, str) and filename) and not callable(filename):
            raise NetworkError("%s: 'filename' must be a file name or a function, got %r" % (self.desc, filename))
        self.per_run = bool(self.opt("dump_per_run"))
        if callable(filename) and not self.per_run:
            raise NetworkError("%s: a 'filename' function needs 'dump_per_run': True (RETURNN's rule)" % self.desc)
        self.dumped_runs: List[str] = []  # the dataset runs written (without dump_per_run: one file for the run)
        data = sources[0]
        if data.batch_dim_axis is None:
            raise NetworkError("%s: the input %s has no batch axis" % (self.desc, data.short_repr()))
        labels = self.opt("labels")
        dim = data.dim if (data.sparse or data.feature_dim_axis is not None) else 1
        if labels is not None and (not isinstance(labels, (list, tuple)) or len(labels) != dim):
            raise NetworkError("%s: 'labels' must be a list of %s names" % (self.desc, dim))
        self.output = data.copy(name)

    def filename(self, dataset_name: str, epoch: int) -> str:
        """The file for one run over the dataset ``dataset_name``."""
        spec = self.opt("filename")
        if not self.per_run:
            if self.dumped_runs and dataset_name not in self.dumped_runs:
                raise NetworkError("%s: without 'dump_per_run' RETURNN writes the datasets %s into one file %r; "
                                   "here one dataset per file: set 'dump_per_run': True (and {dataset_name} in the "
                                   "name)" % (self.desc, self.dumped_runs + [dataset_name], spec))
            self.dumped_runs.append(dataset_name)
            return spec
        run_opts = {"dataset_name": dataset_name, "epoch": epoch}
        try:
            name = spec(**run_opts) if callable(spec) else spec.format_map(_Keep(run_opts))
        except Exception as exc:  # noqa: BLE001 - config code: one line naming the layer
            raise NetworkError("%s: 'filename' %r: %s" % (self.desc, spec, exc)) from None
        if not isinstance(name, str) or not name:
            raise NetworkError("%s: 'filename' gave %r, not a file name" % (self.desc, name))
        return name

    def forward(self, sources: List[LayerOutput], ctx: RunContext) -> LayerOutput:
        return sources[0].with_tensor(sources[0].tensor, self.output)


class _Keep(dict):
    """format_map mapping that leaves unknown ``{names}`` as they are."""

    def __missing__(self, key: str) -> str:
        return "{%s}" % key
