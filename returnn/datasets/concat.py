"""ConcatSeqsDataset: sequences made by concatenating sequences of another dataset (RETURNN's
semantics): line i of ``seq_list_file`` is ``tag1;tag2;...`` (``seq_tag_delim``), and sequence i is
those sub-sequences of ``dataset`` joined along time, with the same tag. ``seq_len_file`` (a dict
literal tag -> length, parsed with ``ast.literal_eval``, never run) gives the lengths used for
length-based ``seq_ordering``, as in RETURNN.

Between sub-sequences, ``remove_in_between_postfix`` (key -> label) drops that last label,
``repeat_in_between_last_frame_up_to_multiple_of`` (key -> k) repeats the last frame up to a multiple
of k, ``pad_narrow_data_to_multiple_of_target_len`` (key -> (target key, k)) pads or cuts to k
times the target length.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.integrity import tag_positions, unique_tag_positions
from returnn.datasets.text_files import load_seq_list, parse_literal, read_text
from returnn.errors import DataError, known_list


@register_dataset
class ConcatSeqsDataset(Dataset):
    """See the module doc."""

    global_options = ("cache_size",)

    def __init__(self, dataset: Any, seq_list_file: str, seq_len_file: Optional[str] = None,
                 seq_tag_delim: str = ";", remove_in_between_postfix: Optional[Dict[str, int]] = None,
                 repeat_in_between_last_frame_up_to_multiple_of: Optional[Dict[str, int]] = None,
                 pad_narrow_data_to_multiple_of_target_len: Optional[Dict[str, Tuple[str, int]]] = None,
                 use_cache_manager: bool = False, cache_size: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        from returnn.datasets import init_dataset
        owner = self.describe()
        self.dataset = init_dataset(dataset, defaults={"cache_size": cache_size}, name="%s_subdataset" % self.name)
        keys = self.dataset.get_data_keys()
        self.remove_postfix = dict(remove_in_between_postfix or {})
        self.repeat_multiple = dict(repeat_in_between_last_frame_up_to_multiple_of or {})
        self.pad_narrow = dict(pad_narrow_data_to_multiple_of_target_len or {})
        for opt, mapping in (("remove_in_between_postfix", self.remove_postfix),
                             ("repeat_in_between_last_frame_up_to_multiple_of", self.repeat_multiple),
                             ("pad_narrow_data_to_multiple_of_target_len", self.pad_narrow)):
            bad = [k for k in mapping if k not in keys]
            if bad:
                raise DataError("%s: %s names key(s) %s the dataset does not have (has: %s)"
                                % (owner, opt, known_list(bad), known_list(keys)))
        self.watch_file(seq_list_file)
        tags = load_seq_list(seq_list_file, owner)
        if not isinstance(tags, list):
            raise DataError("%s: seq_list_file %s must hold one line per sequence" % (owner, seq_list_file))
        # the lines are this dataset's tags: the same line twice would be one tag for two sequences
        unique_tag_positions(tags, "%s: seq_list_file %s" % (owner, seq_list_file), lambda i: "entry %i" % (i + 1))
        self._tags = tags
        position = tag_positions(self.dataset)  # sub-sequences are found by tag: tags must be unique
        self._parts: List[np.ndarray] = []
        for tag in tags:
            subs = tag.split(seq_tag_delim)
            missing = [s for s in subs if s not in position]
            if missing:
                raise DataError("%s: sub-sequence %r of %r is not in the dataset" % (owner, missing[0], tag))
            self._parts.append(np.array([position[s] for s in subs], dtype=np.int64))
        self._order_lengths: Optional[np.ndarray] = None
        if seq_len_file:
            self.watch_file(seq_len_file)
            lens = parse_literal(read_text(seq_len_file, owner), seq_len_file, "%s: seq_len_file" % owner,
                                 keys="sequence tag")
            if not isinstance(lens, dict) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                     for n in lens.values()):
                raise DataError("%s: seq_len_file %s must be a dict literal tag -> length (int >= 0)"
                                % (owner, seq_len_file))
            try:
                self._order_lengths = np.array([sum(int(lens[s]) for s in tag.split(seq_tag_delim)) for tag in tags],
                                               dtype=np.int64)
            except KeyError as exc:
                raise DataError("%s: seq_len_file %s has no length for %r" % (owner, seq_len_file, exc.args[0]))
        self._lengths = self._compute_lengths()

    def _compute_lengths(self) -> np.ndarray:
        keys = self.get_data_keys()
        sub = np.asarray(self.dataset._corpus_seq_lengths()).reshape(self.dataset.num_corpus_seqs, -1)
        out = np.zeros((len(self._parts), len(keys)), dtype=np.int64)
        for i, parts in enumerate(self._parts):
            for j, key in enumerate(keys):
                lens = sub[parts, j].copy()
                inner = slice(0, len(parts) - 1)
                if key in self.remove_postfix:
                    lens[inner] -= 1
                if key in self.repeat_multiple:
                    k = int(self.repeat_multiple[key])
                    lens[inner] = -(-lens[inner] // k) * k
                if key in self.pad_narrow:
                    target, k = self.pad_narrow[key]
                    lens[inner] = sub[parts[inner], keys.index(target)] * int(k)
                out[i, j] = int(lens.sum())
        return out

    def _join(self, key: str, pieces: List[Dict[str, np.ndarray]]) -> np.ndarray:
        arrays = []
        for n, piece in enumerate(pieces):
            data = piece[key]
            if n < len(pieces) - 1:
                if key in self.remove_postfix:
                    if data.ndim != 1 or not len(data) or data[-1] != self.remove_postfix[key]:
                        raise DataError("%s: key %r: sub-sequence does not end with the postfix %r"
                                        % (self.describe(), key, self.remove_postfix[key]))
                    data = data[:-1]
                if key in self.repeat_multiple and len(data) % int(self.repeat_multiple[key]):
                    k = int(self.repeat_multiple[key])
                    data = np.concatenate([data] + [data[-1:]] * (k - len(data) % k), axis=0)
                if key in self.pad_narrow:
                    target, k = self.pad_narrow[key]
                    want = len(piece[target]) * int(k)
                    data = data[:want] if len(data) >= want else np.concatenate(
                        [data] + [data[-1:]] * (want - len(data)), axis=0)
            arrays.append(data)
        return np.concatenate(arrays, axis=0)

    # ---- corpus level
    def data_infos(self) -> Dict[str, DataInfo]:
        return self.dataset.data_infos()

    def _corpus_num_seqs(self) -> int:
        return len(self._tags)

    def _corpus_seq_lengths(self) -> np.ndarray:
        return self._lengths

    def _ordering_lengths(self) -> np.ndarray:
        return self._order_lengths if self._order_lengths is not None else super()._ordering_lengths()

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        out = []
        for i in corpus_indices:
            pieces = self.dataset._corpus_load(self._parts[int(i)].tolist())
            out.append({key: self._join(key, pieces) for key in self.get_data_keys()})
        return out

    def _corpus_tag(self, corpus_index: int) -> str:
        return self._tags[corpus_index]

    def _prepare_epoch(self, full_epoch: int) -> None:
        self.dataset._prepare_epoch(full_epoch)

    def sub_datasets(self) -> List[Dataset]:
        return [self.dataset] if hasattr(self, "dataset") else []

    def seq_origin(self, corpus_index: int, key: Optional[str] = None) -> str:
        parts = self._parts[int(corpus_index)].tolist()
        origins = [self.dataset.seq_origin(i, key) for i in parts[:3]]
        return ("%s, parts %s%s" % (self.dataset.describe(), "; ".join(o for o in origins if o) or parts[:3],
                                    ", ..." if len(parts) > 3 else ""))

    def close(self) -> None:
        self.dataset.close()
