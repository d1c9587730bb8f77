"""Text datasets with RETURNN's semantics: :class:`LmDataset` (one text line = one sequence of
symbol indices) and :class:`TranslationDataset` (source/target line pairs).

The whole corpus is converted to indices when the dataset is built (the engine batches by exact
lengths); the indices are kept as one flat array per key plus offsets. Vocabularies are text or
Python-literal files, never pickles (see :mod:`returnn.datasets.text_files`). Data is int32.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from returnn.datasets.base import DataInfo, Dataset, register_dataset
from returnn.datasets.lexicon import Lexicon  # noqa: F401  (RETURNN configs import it from here)
from returnn.datasets.text_files import (is_bliss, labels_of_map, load_seq_list, load_symbol_list, read_corpus_lines,
                                         load_symbol_map, read_bliss_orths, read_lines, read_text)
from returnn.errors import ConfigError, DataError


class TokenStore:
    """Index sequences of several keys: one flat int32 array and offsets per key."""

    def __init__(self, keys: Sequence[str]):
        self.keys = list(keys)
        self._parts: Dict[str, List[np.ndarray]] = {k: [] for k in self.keys}
        self.flat: Dict[str, np.ndarray] = {}
        self.offsets: Dict[str, np.ndarray] = {}

    def add(self, seq: Dict[str, Sequence[int]]) -> None:
        for key in self.keys:
            self._parts[key].append(np.asarray(seq[key], dtype=np.int32))

    def finish(self) -> None:
        for key in self.keys:
            parts = self._parts.pop(key)
            lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
            self.offsets[key] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
            self.flat[key] = np.concatenate(parts) if parts else np.zeros((0,), np.int32)

    @property
    def num_seqs(self) -> int:
        return len(self.offsets[self.keys[0]]) - 1

    def lengths(self) -> np.ndarray:
        return np.stack([np.diff(self.offsets[k]) for k in self.keys], axis=1)

    def get(self, i: int) -> Dict[str, np.ndarray]:
        return {k: self.flat[k][self.offsets[k][i]:self.offsets[k][i + 1]].copy() for k in self.keys}


def orthography_symbols(orth: str, word_based: bool = False, upper_case_special: bool = True,
                        square_brackets_for_specials: bool = True) -> List[str]:
    """RETURNN's ``parse_orthography_into_symbols``: characters (or words), with ``[...]`` one
    special symbol (upper-cased). ``"hi [NOISE] x"`` -> ``h, i, ' ', [NOISE], ' ', x``."""
    out: List[str] = []
    depth = 0
    for c in orth:
        if depth:
            depth += (c == "[") - (c == "]")
            out[-1] += c.upper() if upper_case_special and c not in "[]" else c
        elif square_brackets_for_specials and c == "[":
            depth = 1
            if out and not out[-1]:
                out[-1] += c
            else:
                out.append("[")
        elif word_based:
            if c.isspace():
                out.append("")
            else:
                if not out:
                    out.append("")
                out[-1] += c
        else:
            out.append(c)
    return out


def parse_orthography(orth: str, prefix: Sequence[str] = (), postfix: Sequence[str] = ("[END]",),
                      remove_chars: str = "(){}", collapse_spaces: bool = True, final_strip: bool = True,
                      **kwargs: Any) -> List[str]:
    """RETURNN's ``parse_orthography``: clean up, split into symbols, add prefix and postfix."""
    for c in remove_chars:
        orth = orth.replace(c, "")
    if collapse_spaces:
        orth = " ".join(orth.split())
    if final_strip:
        orth = orth.strip()
    return list(prefix) + orthography_symbols(orth, **kwargs) + list(postfix)


_PARSE_OPTS = ("prefix", "postfix", "remove_chars", "collapse_spaces", "final_strip", "word_based",
               "upper_case_special", "square_brackets_for_specials")


@register_dataset
class LmDataset(Dataset):
    """One line of ``corpus_file`` (text, ``.gz``, or a Bliss XML corpus: one segment's orth; a list
    of files is concatenated) = one sequence.

    Vocabulary: ``orth_symbols_file`` (one symbol per line), ``orth_symbols_map_file`` (``<symbol>
    <index>`` lines or a dict literal) or ``orth_vocab`` (``{"vocab_file": ..., "unknown_label":
    ...}``, words split at white space). Symbols are characters, or words with ``word_based``;
    ``seq_end_symbol`` is appended; unknown symbols are an error naming file and line unless
    ``auto_replace_unknown_symbol`` (then ``unknown_symbol``) or ``error_on_invalid_seq = False``
    (then the line is skipped). Keys: ``"data"``, and ``"delayed"`` (start symbol + data[:-1]) with
    ``add_delayed_seq_data``. Tags: ``line-<n>`` (``tag_prefix``), or ``seq_list_file``.
    """

    def __init__(self, corpus_file: Any, orth_symbols_file: Any = None, orth_symbols_map_file: Any = None,
                 orth_vocab: Optional[Dict[str, Any]] = None, orth_replace_map_file: Optional[str] = None,
                 word_based: bool = False, word_end_symbol: Optional[str] = None,
                 seq_end_symbol: Optional[str] = "[END]", unknown_symbol: Optional[str] = "[UNKNOWN]",
                 parse_orth_opts: Optional[Dict[str, Any]] = None, auto_replace_unknown_symbol: bool = False,
                 error_on_invalid_seq: bool = True, add_delayed_seq_data: bool = False,
                 delayed_seq_data_start_symbol: str = "[START]", tag_prefix: Optional[str] = None,
                 skip_empty_lines: bool = True, seq_list_file: Any = None, phone_info: Any = None,
                 add_random_phone_seqs: int = 0, orth_post_process: Any = None, dtype: Optional[str] = None,
                 log_auto_replace_unknown_symbols: Any = 10, log_skipped_seqs: Any = 10,
                 use_cache_manager: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        if phone_info is not None or add_random_phone_seqs:
            raise DataError("%s: 'phone_info' / 'add_random_phone_seqs' (lexicon-based phone sequences) are not "
                            "supported; dump the dataset to HDF in RETURNN (tools/hdf_dump.py)" % owner)
        if orth_post_process:
            raise DataError("%s: 'orth_post_process' is not supported; preprocess the text file instead" % owner)
        self.word_based = bool(word_based)
        self.unknown_symbol = unknown_symbol
        self.auto_replace = bool(auto_replace_unknown_symbol)
        self.error_on_invalid_seq = bool(error_on_invalid_seq)
        self._word_vocab: Optional[Dict[str, Any]] = None
        given = {"orth_symbols_file": orth_symbols_file, "orth_symbols_map_file": orth_symbols_map_file,
                 "orth_vocab": orth_vocab}
        sources = [name for name, value in given.items() if value is not None]
        if len(sources) != 1:
            raise DataError("%s: give exactly one of orth_symbols_file, orth_symbols_map_file, orth_vocab (got %s)"
                            % (owner, ", ".join(sources) or "none"))
        if callable(orth_symbols_file):
            orth_symbols_file = orth_symbols_file()
        if callable(orth_symbols_map_file):
            orth_symbols_map_file = orth_symbols_map_file()
        if orth_symbols_file is not None:
            self.watch_file(str(orth_symbols_file))
            symbols = load_symbol_list(str(orth_symbols_file), owner)
            self.symbol_map = {s: i for i, s in enumerate(symbols)}
            labels = symbols
        elif orth_symbols_map_file is not None:
            self.watch_file(str(orth_symbols_map_file))
            self.symbol_map = load_symbol_map(str(orth_symbols_map_file), owner)
            labels = labels_of_map(self.symbol_map)
        else:
            if isinstance(orth_vocab, dict) and isinstance(orth_vocab.get("vocab_file"), str):
                self.watch_file(orth_vocab["vocab_file"])
            if self.auto_replace:  # RETURNN asserts it: the vocabulary's unknown_label replaces unknown words
                raise DataError("%s: auto_replace_unknown_symbol is controlled by orth_vocab's unknown_label (RETURNN "
                                "fails on both)" % owner)
            self._word_vocab = self._load_orth_vocab(orth_vocab, owner)
            self.symbol_map = self._word_vocab["map"]
            labels = labels_of_map(self.symbol_map)
        self.parse_opts = dict(parse_orth_opts or {})
        bad = [k for k in self.parse_opts if k not in _PARSE_OPTS]
        if bad:
            raise DataError("%s: unknown parse_orth_opts %s" % (owner, ", ".join(sorted(bad))))
        self.parse_opts.setdefault("word_based", self.word_based)
        end = [seq_end_symbol] if seq_end_symbol is not None else []
        self.parse_opts.setdefault("postfix", ([word_end_symbol] if word_end_symbol and not word_based else []) + end)
        self.replace_map: Dict[str, List[str]] = {}
        if orth_replace_map_file:
            self.watch_file(orth_replace_map_file)
            try:
                raw = json.loads(read_text(orth_replace_map_file, owner))
            except ValueError as exc:
                raise DataError("%s: %s is not JSON: %s" % (owner, orth_replace_map_file, exc))
            if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
                raise DataError("%s: %s must be a JSON object of strings (symbol -> replacement text)"
                                % (owner, orth_replace_map_file))
            self.replace_map = {k: orthography_symbols(v, word_based=self.word_based) for k, v in raw.items()}
        self.space = word_end_symbol if word_end_symbol and not word_based else " "
        if word_end_symbol and not word_based:
            self.replace_map[" "] = [word_end_symbol]
        keys = ["data"] + (["delayed"] if add_delayed_seq_data else [])
        self._infos = {k: DataInfo(len(labels), True, "int32", labels=labels) for k in keys}
        start_id = None
        if add_delayed_seq_data:
            if delayed_seq_data_start_symbol not in self.symbol_map:
                raise DataError("%s: delayed_seq_data_start_symbol %r is not in the vocabulary"
                                % (owner, delayed_seq_data_start_symbol))
            start_id = self.symbol_map[delayed_seq_data_start_symbol]
        files = corpus_file() if callable(corpus_file) else corpus_file
        files = [files] if isinstance(files, str) else list(files)
        self._store = TokenStore(keys)
        self._tag_numbers: List[int] = []
        self._line_sizes: List[int] = []  # what RETURNN's orderings sort by: the line's size in the file
        line_no = 0
        for path in files:
            self.watch_file(str(path))
            bliss = is_bliss(str(path), owner)
            lines = ((o, len(o.encode("utf8"))) for o in read_bliss_orths(str(path), owner)) if bliss else \
                read_corpus_lines(str(path), owner, skip_empty_lines)
            for text, size in lines:
                ids = self._encode(text, str(path), line_no)
                if ids is not None:
                    seq = {"data": ids}
                    if start_id is not None:
                        seq["delayed"] = [start_id] + ids[:-1]
                    self._store.add(seq)
                    self._tag_numbers.append(line_no)
                    self._line_sizes.append(size)
                line_no += 1
        self._store.finish()
        self._lengths = self._store.lengths()
        self.tag_prefix = tag_prefix or "line-"
        self._seq_list: Optional[List[str]] = None
        if seq_list_file is not None:
            self.watch_file(seq_list_file)
            tags = load_seq_list(seq_list_file, owner)
            if not isinstance(tags, list) or len(tags) != line_no:
                raise DataError("%s: seq_list_file has %s tags for %i lines" % (owner, len(tags), line_no))
            self._seq_list = tags

    @staticmethod
    def _load_orth_vocab(opts: Any, owner: str) -> Dict[str, Any]:
        """``orth_vocab``: the options of a RETURNN vocabulary (:class:`Vocabulary`, ``BytePairEncoding`` with a
        ``bpe_file``, ``CharacterTargets``; ``unknown_label`` default "UNK", ``seq_postfix``), or
        ``{"class": "Utf8ByteTargets"}`` (the UTF-8 bytes, dim 256)."""
        if isinstance(opts, dict) and opts.get("class") == "Utf8ByteTargets":
            return {"bytes": True, "map": {("%c" % i if 32 <= i < 127 else "<0x%02X>" % i): i for i in range(256)}}
        if not isinstance(opts, dict) or ("vocab_file" not in opts and "labels" not in opts):
            raise DataError("%s: orth_vocab must be the options of a vocabulary ({'vocab_file': ...}, with 'bpe_file' "
                            "for BPE) or {'class': 'Utf8ByteTargets'}; got %r" % (owner, opts))
        from returnn.datasets.vocabulary import Vocabulary
        try:
            vocab = Vocabulary.create_vocab(**opts)
        except (ConfigError, TypeError, ValueError) as exc:
            raise DataError("%s: orth_vocab %r: %s" % (owner, opts, exc)) from None
        return {"vocab": vocab, "map": dict(vocab.vocab)}

    def _encode(self, text: str, path: str, line_no: int) -> Optional[List[int]]:
        """Indices of one line; None when it is skipped (unknown symbol, error_on_invalid_seq off)."""
        if self._word_vocab is not None and self._word_vocab.get("bytes"):
            return list(text.encode("utf8"))
        if self._word_vocab is not None:  # RETURNN: the vocabulary's get_seq; a label it lacks is an error
            try:
                return list(self._word_vocab["vocab"].get_seq(text))
            except KeyError as exc:
                raise DataError("%s: %s: sequence line-%i: %s (orth_vocab has no unknown_label)"
                                % (self.describe(), path, line_no, exc.args[0] if exc.args else exc)) from None
        syms = parse_orthography(text, **self.parse_opts)
        if self.replace_map:
            syms = [r for s in syms for r in self.replace_map.get(s, [s])]
        i = 0
        while i < len(syms) - 1:  # collapse doubled spaces (after replacements)
            if syms[i] == self.space and syms[i + 1] == self.space:
                del syms[i]
            else:
                i += 1
        table = self.symbol_map
        if self.auto_replace:
            unk = [self.unknown_symbol] if self.unknown_symbol is not None else []
            syms = [r for s in syms for r in ([s] if s in table else unk)]
        missing = next((s for s in syms if s not in table), None)
        if missing is not None:
            return self._invalid(path, line_no, missing)
        return [table[s] for s in syms]

    def _invalid(self, path: str, line_no: int, symbol: str) -> None:
        if self.error_on_invalid_seq:
            raise DataError("%s: %s: sequence line-%i: symbol %r is not in the vocabulary (set "
                            "auto_replace_unknown_symbol or error_on_invalid_seq=False)"
                            % (self.describe(), path, line_no, symbol))
        return None

    # ---- corpus level
    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return self._store.num_seqs

    def _corpus_seq_lengths(self) -> np.ndarray:
        return self._lengths

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return [self._store.get(int(i)) for i in corpus_indices]

    def _ordering_lengths(self) -> np.ndarray:
        """RETURNN's LmDataset sorts by the lines' sizes in bytes, not by their symbols."""
        return np.asarray(self._line_sizes, dtype=np.int64)

    def _corpus_tag(self, corpus_index: int) -> str:
        number = self._tag_numbers[corpus_index]
        return self._seq_list[number] if self._seq_list is not None else "%s%i" % (self.tag_prefix, number)


@register_dataset
class TranslationDataset(Dataset):
    """``<path>/source.<file_postfix>`` and ``<path>/target.<file_postfix>`` (or ``.gz``): line i of
    both is sequence ``line-i``; words (split at white space, after appending ``source_postfix`` /
    ``target_postfix``) are mapped by the vocabularies ``<path>/source.vocab.*`` and
    ``<path>/target.vocab.*`` to keys ``"data"`` and ``"classes"``.

    Vocabulary files are looked up as ``.vocab.txt``, ``.vocab``, then ``.vocab.pkl``; each must be
    text: a dict literal ``{"word": index, ...}`` or ``<word> <index>`` lines. RETURNN writes pickles
    there: those are refused with the one command that converts them (no data file is unpickled).
    """

    def __init__(self, path: str, file_postfix: str, source_postfix: str = "", target_postfix: str = "",
                 source_only: bool = False, search_without_reference: bool = False, unknown_label: Any = None,
                 seq_list_file: Optional[str] = None, use_cache_manager: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        if not isinstance(path, str) or not os.path.isdir(path):
            raise DataError("%s: option 'path': %r is not a directory" % (owner, path))
        prefixes = {"source": "data"} if source_only or search_without_reference else {"source": "data",
                                                                                         "target": "classes"}
        postfix = {"source": source_postfix or "", "target": target_postfix or ""}
        if not isinstance(unknown_label, dict):
            unknown_label = {key: unknown_label for key in prefixes.values()}
        self._infos: Dict[str, DataInfo] = {}
        columns: Dict[str, List[List[int]]] = {}
        for prefix, key in prefixes.items():
            self.watch_file(self._vocab_file(path, prefix))
            vocab = load_symbol_map(self._vocab_file(path, prefix), owner)
            self._infos[key] = DataInfo(max(vocab.values()) + 1, True, "int32", labels=labels_of_map(vocab))
            filename = self._data_file(path, prefix, file_postfix)
            self.watch_file(filename)
            unk = unknown_label.get(key)
            if unk is not None and unk not in vocab:
                raise DataError("%s: unknown_label %r is not in the %s vocabulary" % (owner, unk, prefix))
            columns[key] = [self._words(line + postfix[prefix], vocab, unk, filename, i)
                            for i, line in enumerate(read_lines(filename, owner))]
        counts = {k: len(v) for k, v in columns.items()}
        if len(set(counts.values())) > 1:
            raise DataError("%s: source and target have different line counts %s" % (owner, counts))
        num_lines = counts["data"]
        self._line_numbers = list(range(num_lines))
        if seq_list_file:
            self.watch_file(seq_list_file)
            numbers = load_seq_list(seq_list_file, owner)
            try:
                self._line_numbers = [int(n) for n in numbers]
            except (TypeError, ValueError):
                raise DataError("%s: seq_list_file %s must hold line numbers" % (owner, seq_list_file))
            if self._line_numbers and not 0 <= min(self._line_numbers) <= max(self._line_numbers) < num_lines:
                raise DataError("%s: seq_list_file %s has line numbers outside [0, %i)" % (owner, seq_list_file,
                                                                                           num_lines))
        self._store = TokenStore(list(columns))
        for i in range(num_lines):
            self._store.add({k: columns[k][i] for k in columns})
        self._store.finish()
        self._lengths = self._store.lengths()[np.asarray(self._line_numbers, dtype=np.int64)].reshape(
            len(self._line_numbers), len(columns))

    @staticmethod
    def _vocab_file(path: str, prefix: str) -> str:
        for ext in (".vocab.txt", ".vocab", ".vocab.pkl"):
            candidate = os.path.join(path, prefix + ext)
            if os.path.exists(candidate):
                return candidate
        raise DataError("TranslationDataset: no vocabulary %s/%s.vocab.txt (or .vocab, .vocab.pkl)" % (path, prefix))

    @staticmethod
    def _data_file(path: str, prefix: str, postfix: str) -> str:
        name = os.path.join(path, "%s.%s" % (prefix, postfix))
        if os.path.exists(name):
            return name
        if os.path.exists(name + ".gz"):
            return name + ".gz"
        raise DataError("TranslationDataset: data file not found: %s (or .gz)" % name)

    def _words(self, line: str, vocab: Dict[str, int], unknown: Optional[str], filename: str, i: int) -> List[int]:
        if unknown is None:
            missing = next((w for w in line.split() if w not in vocab), None)
            if missing is not None:
                raise DataError("%s: %s line %i: word %r is not in the vocabulary (set unknown_label)"
                                % (self.describe(), filename, i + 1, missing))
            return [vocab[w] for w in line.split()]
        unk = vocab[unknown]
        return [vocab.get(w, unk) for w in line.split()]

    # ---- corpus level
    def data_infos(self) -> Dict[str, DataInfo]:
        return self._infos

    def _corpus_num_seqs(self) -> int:
        return len(self._line_numbers)

    def _corpus_seq_lengths(self) -> np.ndarray:
        return self._lengths

    def _corpus_load(self, corpus_indices: Sequence[int]) -> List[Dict[str, np.ndarray]]:
        return [self._store.get(self._line_numbers[int(i)]) for i in corpus_indices]

    def _corpus_tag(self, corpus_index: int) -> str:
        return "line-%i" % self._line_numbers[corpus_index]
