"""RETURNN's vocabulary classes (``from returnn.datasets.generating import Vocabulary``; RETURNN keeps
them in ``returnn/datasets/util/vocabulary.py``), for code that configs import: labels and ids of a
vocabulary file, words to ids (:meth:`Vocabulary.get_seq`) and back.

- :class:`Vocabulary`: ``vocab_file`` (a dict literal ``{label: id}`` or lines, read as the engine's
  datasets read symbol maps: never unpickled) or ``labels``; ``unknown_label`` (default ``"UNK"`` as
  RETURNN: None or a label the vocabulary lacks means no unknown label), ``bos_label``,
  ``eos_label``, ``pad_label``, ``num_labels`` (checked), ``seq_postfix`` (ids appended by get_seq).
- :class:`BytePairEncoding` (``bpe_file``): the same vocabulary; get_seq splits words into BPE units
  with the merge codes (:mod:`returnn.datasets.bpe`).
- :class:`CharacterTargets`: one label per character.
- :meth:`Vocabulary.create_vocab`: the class by ``class`` or ``bpe_file``, as RETURNN.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

from returnn.errors import ConfigError
from returnn.datasets.text_files import labels_of_map, load_symbol_map

_DEFAULT = object()


class Vocabulary:
    """A set of labels and their ids (see the module doc)."""

    @classmethod
    def create_vocab(cls, **opts: Any) -> "Vocabulary":
        """RETURNN's factory: ``class`` names the class, ``bpe_file`` means BytePairEncoding."""
        opts = dict(opts)
        klass = cls
        if "class" in opts:
            name = opts.pop("class")
            klass = VOCAB_CLASSES.get(name)
            if klass is None:
                raise ConfigError("vocabulary class %r is not available here (known: %s)"
                                  % (name, ", ".join(sorted(VOCAB_CLASSES))))
        elif "bpe_file" in opts:
            klass = BytePairEncoding
        return klass(**opts)

    def __init__(self, vocab_file: Optional[str], *, unknown_label: Any = _DEFAULT, bos_label: Any = None,
                 eos_label: Any = None, pad_label: Any = None, num_labels: Optional[int] = None,
                 seq_postfix: Optional[Sequence[int]] = None, labels: Optional[Sequence[str]] = None):
        self.vocab_file = None if vocab_file is None else str(vocab_file)
        if labels is not None:
            labels = list(labels() if callable(labels) else labels)
            self._vocab = {label: i for i, label in enumerate(labels)}
            self._labels = labels
        elif self.vocab_file is not None:
            self._vocab = load_symbol_map(self.vocab_file, "vocabulary")
            self._labels = labels_of_map(self._vocab)
        else:
            raise ConfigError("Vocabulary needs vocab_file or labels")
        self.num_labels = len(self._labels)
        if num_labels is not None and num_labels != self.num_labels:
            raise ConfigError("vocabulary %s has %i labels, num_labels says %i"
                              % (self.vocab_file, self.num_labels, num_labels))
        self.unknown_label_id = self.to_id("UNK" if unknown_label is _DEFAULT else unknown_label, allow_none=True)
        self.unknown_label = None if self.unknown_label_id is None else self._labels[self.unknown_label_id]
        self.bos_label_id = self.to_id(bos_label, allow_none=True)
        self.eos_label_id = self.to_id(eos_label, allow_none=True)
        self.pad_label_id = self.to_id(pad_label, allow_none=True)
        self.seq_postfix = list(seq_postfix or [])

    def __repr__(self) -> str:
        return "%s(%r, num_labels=%i, unknown_label=%r)" % (type(self).__name__, self.vocab_file, self.num_labels,
                                                          self.unknown_label)

    @property
    def vocab(self) -> Dict[str, int]:
        """label -> id"""
        return self._vocab

    @property
    def labels(self) -> List[str]:
        """id -> label"""
        return self._labels

    def to_id(self, label: Union[str, int, None], allow_none: bool = False) -> Optional[int]:
        """The id of ``label`` (a label or an id); None for None, or for an unknown label with ``allow_none``."""
        if label is None:
            return None
        if isinstance(label, int) and not isinstance(label, bool):
            if not 0 <= label < self.num_labels:
                raise ConfigError("vocabulary %s: id %i out of range (%i labels)" % (self.vocab_file, label,
                                                                                    self.num_labels))
            return label
        if label in self._vocab:
            return self._vocab[label]
        if allow_none:
            return None
        raise KeyError("vocabulary %s has no label %r" % (self.vocab_file, label))

    def label_to_id(self, label: str, default: Any = _DEFAULT) -> Optional[int]:
        """The id of ``label``: else ``default`` if given, else the unknown label's id (KeyError without one)."""
        if label in self._vocab:
            return self._vocab[label]
        if default is not _DEFAULT:
            return default
        if self.unknown_label_id is None:
            raise KeyError("vocabulary %s has no label %r and no unknown label" % (self.vocab_file, label))
        return self.unknown_label_id

    def id_to_label(self, idx: int, default: Any = _DEFAULT) -> Optional[str]:
        if 0 <= idx < self.num_labels:
            return self._labels[idx]
        if default is not _DEFAULT:
            return default
        raise KeyError("vocabulary %s has no id %r" % (self.vocab_file, idx))

    def get_seq(self, sentence: str) -> List[int]:
        """The ids of the space-separated words of ``sentence`` (unknown ones: the unknown label), then
        ``seq_postfix``."""
        return [self.label_to_id(w) for w in sentence.split()] + self.seq_postfix

    def get_seq_labels(self, seq: Sequence[int]) -> str:
        """The labels of ``seq``, space-separated."""
        return " ".join(self._labels[int(i)] for i in seq)


class BytePairEncoding(Vocabulary):
    """RETURNN's BPE vocabulary: ``vocab_file`` and ``bpe_file`` (the merge codes); :meth:`get_seq` splits
    the words into BPE units on the fly (:mod:`returnn.datasets.bpe`)."""

    def __init__(self, vocab_file: str, bpe_file: str, *, seq_postfix: Optional[Sequence[int]] = None,
                 unknown_label: Any = _DEFAULT, **kwargs: Any):
        super().__init__(vocab_file, seq_postfix=seq_postfix, unknown_label=unknown_label, **kwargs)
        self.bpe_file = str(bpe_file)
        from returnn.datasets.bpe import BpeCodes, BpeEncoder
        try:
            self.bpe = BpeEncoder(BpeCodes(self.bpe_file, "vocabulary bpe_file"), self._labels)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def get_seq(self, sentence: str) -> List[int]:
        """The ids of the BPE units of ``sentence`` (unknown ones: the unknown label), then ``seq_postfix``."""
        return [self.label_to_id(piece) for piece in self.bpe.segment_sentence(sentence)] + self.seq_postfix


class CharacterTargets(Vocabulary):
    """One label per character of the sentence (RETURNN's CharacterTargets)."""

    def get_seq(self, sentence: str) -> List[int]:
        return [self.label_to_id(c) for c in sentence] + self.seq_postfix

    def get_seq_labels(self, seq: Sequence[int]) -> str:
        return "".join(self._labels[int(i)] for i in seq)


VOCAB_CLASSES = {c.__name__: c for c in (Vocabulary, BytePairEncoding, CharacterTargets)}
