"""Datasets that need no files: the 12AX task, this engine's random data (``RandomDataset``), and given
numpy data; RETURNN's dummy datasets (deterministic ramps, ``DummyDataset`` & co.) are in
:mod:`returnn.datasets.dummy` and importable from here, as in RETURNN."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.options import int_option
from returnn.errors import DataError


class InMemoryDataset(Dataset):
    """Holds the sequences of the current full epoch as numpy dicts."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._seqs: List[Dict[str, np.ndarray]] = []
        self._lengths: Optional[np.ndarray] = None
        self._tags: List[str] = []

    def _set_seqs(self, seqs: List[Dict[str, np.ndarray]], tags: Optional[List[str]] = None) -> None:
        keys = self.get_data_keys()
        self._seqs = seqs
        self._lengths = np.array([[len(s[k]) for k in keys] for s in seqs], dtype=np.int64).reshape(len(seqs), len(keys))
        self._tags = tags if tags is not None else ["seq-%i" % i for i in range(len(seqs))]

    def _corpus_num_seqs(self) -> int:
        if self._lengths is None:
            self._prepare_epoch(1)
        return len(self._seqs)

    def _corpus_seq_lengths(self) -> np.ndarray:
        if self._lengths is None:
            self._prepare_epoch(1)
        return self._lengths

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return [self._seqs[i] for i in corpus_indices]

    def _corpus_tag(self, corpus_index: int) -> str:
        return self._tags[corpus_index]


class GeneratingDataset(InMemoryDataset):
    """Generates ``num_seqs`` sequences per full epoch, deterministically from the epoch's seed."""

    def __init__(self, num_seqs: int = 1000, **kwargs: Any):
        super().__init__(**kwargs)
        self.num_generated_seqs = int_option(self.describe(), "num_seqs", num_seqs, minimum=0)
        self._generated_for_seed: Any = None
        self.generating_epoch = 1  # the full epoch generate_seq currently generates for

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        """One sequence; override."""
        raise NotImplementedError

    def generation_key(self, full_epoch: int) -> Any:
        """Data is generated again when this changes: the seed; datasets whose data depends on the
        epoch itself (e.g. lengths growing per epoch) add the epoch."""
        return self.random_seed_for_epoch(full_epoch)

    def _prepare_epoch(self, full_epoch: int) -> None:
        key = self.generation_key(full_epoch)
        if key == self._generated_for_seed:
            return
        self.generating_epoch = full_epoch
        seed = self.random_seed_for_epoch(full_epoch) % (2 ** 32)
        # RETURNN's get_corpus_seq: each sequence from its own generator, seeded with (epoch seed, index)
        seqs = [self.generate_seq(np.random.RandomState((seed, i)), i) for i in range(self.num_generated_seqs)]
        self._set_seqs(seqs)
        self._generated_for_seed = key


@register_dataset
class Task12AXDataset(GeneratingDataset):
    """The 12AX memory task, as RETURNN generates it. Inputs: the 9 symbols ``123ABCXYZ`` as dense
    one-hot ``data`` (RETURNN's ``class_idx_seq_to_1_of_k``); classes: ``L`` / ``R`` (sparse).

    The target is ``R`` exactly when an ``X`` closes ``1 .. A`` or a ``Y`` closes ``2 .. B``
    (RETURNN's ``make_output_seq``: the last ``1``/``2`` is the outer context, the last ``A``/``B`` the
    inner one, reset by each ``X``/``Y``; ``3``, ``C`` and ``Z`` change nothing). Lengths 10 to 99;
    the draws are RETURNN's (``get_random_seq_len``, ``generate_input_seq``), so the sequences are.
    """

    INPUT_SYMBOLS = "123ABCXYZ"
    OUTPUT_SYMBOLS = "LR"

    def data_infos(self) -> Dict[str, DataInfo]:
        return {"data": DataInfo(9, False, "float32", labels=list(self.INPUT_SYMBOLS)),
                "classes": DataInfo(2, True, "int32", labels=list(self.OUTPUT_SYMBOLS))}

    @classmethod
    def make_targets(cls, symbols: str) -> str:
        """The L/R target string of an input symbol string (RETURNN's rule, see the class doc)."""
        out, outer, inner = [], "", ""
        for s in symbols:
            hit = False
            if s in "12":
                outer = s
            elif s in "AB":
                inner = s
            elif s in "XY":
                hit = outer + inner + s in ("1AX", "2BY")
                inner = ""
            out.append("R" if hit else "L")
        return "".join(out)

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        length = rng.randint(10, 100)
        text = str(rng.choice(["", "1", "2"]))
        while len(text) < length:  # RETURNN's made-up distribution, draw by draw
            if rng.uniform() < 0.5:
                text += str(rng.choice(list("12")))
            if rng.uniform() < 0.9:
                text += str(rng.choice(["AX", "BY"]))
            while rng.uniform() < 0.5:
                text += str(rng.choice(list(self.INPUT_SYMBOLS)))
        text = text[:length]
        data = np.zeros((length, len(self.INPUT_SYMBOLS)), dtype=np.float32)
        data[np.arange(length), [self.INPUT_SYMBOLS.index(c) for c in text]] = 1.0
        return {"data": data,
                "classes": np.array([self.OUTPUT_SYMBOLS.index(c) for c in self.make_targets(text)], dtype=np.int32)}


@register_dataset
class RandomDataset(GeneratingDataset):
    """This engine's own random data (no RETURNN class of this name): dense float32 ``data`` uniform in
    [-1, 1) (or sparse with ``input_sparse``) and sparse ``classes``, drawn from the epoch's seed.

    ``seq_len`` is an int (all sequences equally long) or a ``(min, max)`` pair. Until issue 28 this was
    the engine's ``DummyDataset``; that name is now RETURNN's deterministic ramp
    (:class:`returnn.datasets.dummy.DummyDataset`), so a RETURNN config trains on the same data here.
    """

    def __init__(self, input_dim: int, output_dim: int, num_seqs: int = 100, seq_len: Any = 20,
                 input_sparse: bool = False, **kwargs: Any):
        super().__init__(num_seqs=num_seqs, **kwargs)
        owner = self.describe()
        self.input_dim = int_option(owner, "input_dim", input_dim, minimum=1)
        self.output_dim = int_option(owner, "output_dim", output_dim, minimum=1)
        self.input_sparse = bool(input_sparse)
        lens = seq_len if isinstance(seq_len, (list, tuple)) and len(seq_len) == 2 else (seq_len, seq_len)
        low, high = (int_option(owner, "seq_len", v, minimum=1) for v in lens)
        if high < low:
            raise DataError("%s: option 'seq_len' range %r is empty" % (owner, seq_len))
        self.seq_len_range = (low, high)

    def data_infos(self) -> Dict[str, DataInfo]:
        data = (DataInfo(self.input_dim, True, "int32") if self.input_sparse
                else DataInfo(self.input_dim, False, "float32"))
        return {"data": data, "classes": DataInfo(self.output_dim, True, "int32")}

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        t = rng.randint(self.seq_len_range[0], self.seq_len_range[1] + 1)
        if self.input_sparse:
            data = rng.randint(0, self.input_dim, size=(t,)).astype(np.int32)
        else:
            data = rng.uniform(-1.0, 1.0, size=(t, self.input_dim)).astype(np.float32)
        classes = rng.randint(0, self.output_dim, size=(t,)).astype(np.int32)
        return {"data": data, "classes": classes}


@register_dataset
class StaticDataset(InMemoryDataset):
    """Sequences given as a list of dicts key -> numpy array (time axis first).

    Integer 1-D arrays are sparse; their dim is ``output_dim`` (int for 'classes', or a dict
    key -> dim / [dim, ndim]) or else max+1 over the data. ``input_dim`` sets the dim of 'data'.
    """

    def __init__(self, data: List[Dict[str, Any]], output_dim: Any = None, input_dim: Optional[int] = None,
                 tags: Optional[List[str]] = None, **kwargs: Any):
        super().__init__(**kwargs)
        if not data:
            raise DataError("StaticDataset: 'data' is empty")
        seqs = [{k: np.asarray(v) for k, v in seq.items()} for seq in data]
        dims: Dict[str, Any] = {}
        if isinstance(output_dim, dict):
            dims.update({k: (v[0] if isinstance(v, (list, tuple)) else v) for k, v in output_dim.items()})
        elif output_dim is not None:
            dims["classes"] = output_dim
        if input_dim is not None:
            dims["data"] = input_dim
        for i, seq in enumerate(seqs):
            missing = [k for k in seqs[0] if k not in seq]
            if missing:
                raise DataError("StaticDataset: sequence %i lacks key(s) %s" % (i, ", ".join(map(repr, missing))))
        self._infos: Dict[str, DataInfo] = {}
        for key, first in seqs[0].items():
            sparse = first.ndim == 1 and np.issubdtype(first.dtype, np.integer)
            if sparse:
                dim = dims.get(key) or int(max(int(s[key].max(initial=0)) for s in seqs)) + 1
                dtype = "int32"
            else:
                if first.ndim != 2:
                    raise DataError("StaticDataset: key %r must be (T,) ints or (T, dim), got shape %s"
                                    % (key, first.shape))
                dim = first.shape[1]
                dtype = str(first.dtype)
            self._infos[key] = DataInfo(int(dim), sparse, dtype)
        for seq in seqs:
            for key, info in self._infos.items():
                seq[key] = seq[key].astype(info.dtype, copy=False)
        self._set_seqs(seqs, tags)

    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _prepare_epoch(self, full_epoch: int) -> None:
        pass


# RETURNN has the demo tasks in this module: ``from returnn.datasets.generating import CopyTaskDataset``.
from returnn.datasets.tasks import (CopyTaskDataset, TaskEpisodicCopyDataset,  # noqa: E402,F401
                                    TaskNumberBaseConvertDataset, TaskXmlModelingDataset)
_IN_DUMMY = ("DummyDataset", "DummyDatasetMultipleSequenceLength", "DummyDatasetMultipleDataKeys")
_IN_VOCABULARY = ("Vocabulary", "BytePairEncoding", "CharacterTargets")


def __getattr__(name: str) -> Any:
    """RETURNN's dummy datasets, importable from here as in RETURNN (``from returnn.datasets.generating
    import DummyDataset``); defined in :mod:`returnn.datasets.dummy`, which builds on this module; its
    vocabulary classes (:mod:`returnn.datasets.vocabulary`)."""
    if name in _IN_DUMMY:
        from returnn.datasets import dummy
        return getattr(dummy, name)
    if name in _IN_VOCABULARY:
        from returnn.datasets import vocabulary
        return getattr(vocabulary, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
# RETURNN's classes of this module that are refused here, importable as there (returnn/datasets/not_here.py)
from returnn.datasets.not_here import (BlissDataset, DummyGenericDataset, Enwik8Corpus,  # noqa: E402,F401
                                       LibriSpeechCorpus, NltkTimitDataset, TaskVariableAssignmentDataset,
                                       TimitDataset)
