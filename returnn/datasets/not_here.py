"""RETURNN's dataset classes this engine does not have, each refused in one line saying why (never
"unknown dataset" for a name RETURNN knows). RASR's classes are in :mod:`returnn.datasets.sprint`.
docs/compat.md lists which RETURNN dataset classes exist here."""
from __future__ import annotations

from typing import Any, Dict

from returnn.datasets.base import Dataset, register_dataset
from returnn.datasets.timit_phones import TimitPhones
from returnn.errors import DataError

_AUDIO = ("it decodes audio and computes features, which needs packages this engine does not install "
          "(soundfile for reading audio, librosa for features); extract the features once in RETURNN's setup "
          "(tools/hdf_dump.py) and read the HDF with HDFDataset")
_BASE = "it is an abstract base class of RETURNN's datasets; name a concrete dataset class"
_NOT_YET = "it is not implemented in this engine; dump its data to HDF once in RETURNN's setup (tools/hdf_dump.py) " \
           "and read it with HDFDataset"

NOT_HERE: Dict[str, str] = {
    "Dataset": _BASE, "CachedDataset": _BASE, "CachedDataset2": _BASE, "GeneratingDataset": _BASE,
    "SprintDatasetBase": "it is the base class of RETURNN's RASR datasets, and RASR is not run here",
    "OggZipDataset": _AUDIO, "TimitDataset": _AUDIO, "LibriSpeechCorpus": _AUDIO, "BlissDataset": _AUDIO,
    "RawWavDataset": _AUDIO,
    "NltkTimitDataset": "it needs the nltk package and its TIMIT sample data; " + _AUDIO,
    "HuggingFaceDataset": "it needs the Hugging Face 'datasets' package and its hub, which this engine does not "
                          "use; export the data to HDF and read it with HDFDataset",
    "Enwik8Corpus": _NOT_YET, "NextGenHDFDataset": _NOT_YET, "SiameseHDFDataset": _NOT_YET,
    "StereoDataset": _NOT_YET, "StereoHdfDataset": _NOT_YET, "DatasetWithTimeContext": _NOT_YET,
    "TranslationFactorsDataset": _NOT_YET, "ConfusionNetworkDataset": _NOT_YET, "TextDictDataset": _NOT_YET,
    "ClusteringDataset": _NOT_YET, "ChunkShuffleDataset": _NOT_YET, "MultiEpochDataset": _NOT_YET,
    "AnythingDataset": _NOT_YET, "DummyGenericDataset": _NOT_YET, "TaskVariableAssignmentDataset": _NOT_YET,
    "PostprocessingDataset": "it runs config functions on RETURNN's TensorDict objects (map_seq, map_seq_stream), "
                             "which this engine does not have; " + _NOT_YET,
    "DistributeFilesDataset": "its per-sub-epoch file sharding (get_sub_epoch_dataset, distrib_shard_files) is not "
                              "implemented; combine the files' datasets with ConcatDataset or list the HDF files in "
                              "one HDFDataset",
    "SingleStreamPipeDataset": "it is fed from RETURNN's own processes (a pipe inside its engine), which this engine "
                               "does not run",
}


def _refusing(class_name: str, reason: str) -> type:
    def __init__(self, name: Any = None, **_opts: Any):
        what = "dataset %s (%s)" % (name, class_name) if name and name != class_name else "dataset %s" % class_name
        raise DataError("%s: RETURNN's dataset class %s is not available here: %s" % (what, class_name, reason))
    # TIMIT's classes keep RETURNN's class-level phone tables (TimitDataset.get_label_map() in configs)
    bases = (TimitPhones, Dataset) if "Timit" in class_name else (Dataset,)
    return type(class_name, bases, {"__init__": __init__, "__doc__": "Refused: " + reason, "__module__": __name__})


REFUSED: Dict[str, type] = {}
for _name, _reason in NOT_HERE.items():
    REFUSED[_name] = register_dataset(_refusing(_name, _reason))
globals().update({k: v for k, v in REFUSED.items() if k not in ("Dataset",)})  # importable by RETURNN's names
