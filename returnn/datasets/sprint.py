"""RETURNN's dataset classes that need RASR (Sprint) to run. This engine does not run RASR: each
class is one line saying how to get the same data as HDF."""
from __future__ import annotations

from typing import Any

from returnn.datasets.base import Dataset, register_dataset
from returnn.errors import DataError

HOW = ("dump its data to HDF once in the original RETURNN + RASR setup (python3 returnn/tools/hdf_dump.py "
       "CONFIG train.hdf, per dataset), then use {'class': 'HDFDataset', 'files': ['train.hdf']} "
       "(alignments in a second HDF file: MetaDataset)")


class _NeedsRasr(Dataset):
    def __init__(self, name: Any = None, **_opts: Any):
        what = "dataset %s (%s)" % (name, type(self).__name__) if name else "dataset %s" % type(self).__name__
        raise DataError("%s needs RASR, which this engine does not run: %s" % (what, HOW))


@register_dataset
class ExternSprintDataset(_NeedsRasr):
    """Needs RASR: see :data:`HOW`."""


@register_dataset
class SprintDataset(_NeedsRasr):
    """Needs RASR: see :data:`HOW`."""


@register_dataset
class SprintCacheDataset(_NeedsRasr):
    """Needs RASR caches: see :data:`HOW`."""
