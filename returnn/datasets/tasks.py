"""The synthetic tasks of RETURNN's demos (``demos/demo-tf-*.config``): episodic copy, XML
modelling, number base conversion and copy, as RETURNN generates them: the same draws in the same
order from a generator seeded per sequence with (the epoch's seed, the sequence index), as RETURNN's
``GeneratingDataset.get_corpus_seq``, so the sequences are RETURNN's
(``tests/test_returnn_generated_datasets.py``).

Episodic copy and XML modelling give dense one-hot ``data`` (RETURNN's ``class_idx_seq_to_1_of_k``)
and sparse ``classes``; the other two give sparse ``data`` and ``classes``.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from returnn.datasets.base import DataInfo, register_dataset
from returnn.datasets.generating import GeneratingDataset
from returnn.datasets.options import int_option
from returnn.errors import DataError


def one_hot(indices: List[int], dim: int) -> np.ndarray:
    """(T,) class indices -> (T, dim) float32 one-hot rows."""
    out = np.zeros((len(indices), dim), dtype=np.float32)
    out[np.arange(len(indices)), indices] = 1.0
    return out


class _OneHotTask(GeneratingDataset):
    """Symbols of ``CLASSES``; input one-hot, target sparse over the same symbols."""

    CLASSES = ""

    def data_infos(self) -> Dict[str, DataInfo]:
        dim = len(self.CLASSES)
        return {"data": DataInfo(dim, False, "float32", labels=list(self.CLASSES)),
                "classes": DataInfo(dim, True, "int32", labels=list(self.CLASSES))}

    def input_symbols(self, rng: np.random.RandomState) -> str:
        raise NotImplementedError

    @classmethod
    def targets(cls, text: str) -> str:
        raise NotImplementedError

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        text = self.input_symbols(rng)
        index = self.CLASSES.index
        return {"data": one_hot([index(c) for c in text], len(self.CLASSES)),
                "classes": np.array([index(c) for c in self.targets(text)], dtype=np.int32)}


@register_dataset
class TaskEpisodicCopyDataset(_OneHotTask):
    """Remember 1-9 random digits over 1-99 blanks, then recall them after the delimiter ``.``."""

    CLASSES = " .01234567"

    def input_symbols(self, rng: np.random.RandomState) -> str:
        n = rng.randint(1, 10)
        chars = "".join(rng.choice(list(self.CLASSES[2:])) for _ in range(n))
        return chars + " " * rng.randint(1, 100) + "." + "." * (n + 1)

    @classmethod
    def targets(cls, text: str) -> str:
        out, memory, recall = [], "", False
        for c in text:
            if not recall:
                out.append(" ")
                if c == ".":
                    recall = True
                elif c != " ":
                    memory += c
            else:
                out.append(memory[:1] or ".")
                memory = memory[1:]
        return "".join(out)


@register_dataset
class TaskXmlModelingDataset(_OneHotTask):
    """Predict the next character of random nested XML tags (stack depth ``limit_stack_depth``):
    closing tags are predictable, everything else is blank."""

    CLASSES = " <>/abcdefgh"

    def __init__(self, limit_stack_depth: int = 4, **kwargs: Any):
        super().__init__(**kwargs)
        self.limit_stack_depth = int_option(self.describe(), "limit_stack_depth", limit_stack_depth, minimum=1)

    def input_symbols(self, rng: np.random.RandomState) -> str:
        text, stack = " ", []
        while True:
            if not stack or (len(stack) < self.limit_stack_depth and rng.rand() > 0.6):
                tag = "".join(rng.choice(list(self.CLASSES[4:])) for _ in range(rng.randint(1, 10)))
                text += "<%s>" % tag
                stack.append(tag)
            else:
                text += "</%s>" % stack.pop()
            if not stack and rng.rand() > 0.2:
                return text

    @classmethod
    def targets(cls, text: str) -> str:
        out, stack, state = [], [], 0  # 0: between tags, 1: "<" next, 2: first char, 3: open tag, 4: close tag
        for c in text:
            if c in " >":
                out.append("<")
                state = 1
            elif state == 1:
                out.append(" ")
                state = 2
            elif state == 2 and c == "/":
                out.append(stack[-1][0])
                stack[-1] = stack[-1][1:]
                state = 4
            elif state == 2:
                out.append(" ")
                stack.append(c)
                state = 3
            elif state == 3:
                out.append(" ")
                stack[-1] += c
            else:  # state 4: closing tag, the rest of the name then ">"
                if stack[-1]:
                    out.append(stack[-1][0])
                    stack[-1] = stack[-1][1:]
                else:
                    out.append(">")
                    stack.pop()
                    state = 0
        return "".join(out)


@register_dataset
class TaskNumberBaseConvertDataset(GeneratingDataset):
    """A number in ``input_base`` digits (``data``) -> the same number in ``output_base`` digits."""

    CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"

    def __init__(self, input_base: int = 8, output_base: int = 2, min_input_seq_len: int = 1,
                 max_input_seq_len: int = 8, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        self.input_base = int_option(owner, "input_base", input_base, minimum=2)
        self.output_base = int_option(owner, "output_base", output_base, minimum=2)
        self.min_len = int_option(owner, "min_input_seq_len", min_input_seq_len, minimum=1)
        self.max_len = int_option(owner, "max_input_seq_len", max_input_seq_len, minimum=self.min_len)
        if max(self.input_base, self.output_base) > len(self.CHARS):
            raise DataError("%s: bases must be <= %i" % (owner, len(self.CHARS)))

    def data_infos(self) -> Dict[str, DataInfo]:
        return {"data": DataInfo(self.input_base, True, "int32", labels=list(self.CHARS[:self.input_base])),
                "classes": DataInfo(self.output_base, True, "int32", labels=list(self.CHARS[:self.output_base]))}

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        digits = [rng.randint(0, self.input_base) for _ in range(rng.randint(self.min_len, self.max_len + 1))]
        number = 0
        for d in digits:
            number = number * self.input_base + d
        out: List[int] = []
        while number:
            out.insert(0, number % self.output_base)
            number //= self.output_base
        return {"data": np.array(digits, dtype=np.int32), "classes": np.array(out or [0], dtype=np.int32)}


@register_dataset
class CopyTaskDataset(GeneratingDataset):
    """``classes`` = ``data``: random symbols of ``nsymbols``; the length range is ``minlen`` ..
    ``maxlen`` plus ``*_epoch_factor`` times the epoch (so sequences grow with the epoch)."""

    def __init__(self, nsymbols: int, minlen: float = 0, maxlen: float = 0, minlen_epoch_factor: float = 0,
                 maxlen_epoch_factor: float = 0, **kwargs: Any):
        super().__init__(**kwargs)
        owner = self.describe()
        self.nsymbols = int_option(owner, "nsymbols", nsymbols, minimum=1)
        try:
            self.lens = [float(v) for v in (minlen, maxlen, minlen_epoch_factor, maxlen_epoch_factor)]
        except (TypeError, ValueError):
            raise DataError("%s: minlen/maxlen and their epoch factors must be numbers" % owner)
        self._len_range(1)

    def _len_range(self, epoch: int) -> "tuple[int, int]":
        low = int(self.lens[0] + self.lens[2] * epoch)
        high = int(self.lens[1] + self.lens[3] * epoch)
        if not 0 < low <= high:
            raise DataError("%s: epoch %i has sequence lengths %i..%i; need 0 < minlen <= maxlen"
                            % (self.describe(), epoch, low, high))
        return low, high

    def generation_key(self, full_epoch: int) -> Any:
        return self.random_seed_for_epoch(full_epoch), self._len_range(full_epoch)

    def data_infos(self) -> Dict[str, DataInfo]:
        return {"data": DataInfo(self.nsymbols, True, "int32"), "classes": DataInfo(self.nsymbols, True, "int32")}

    def generate_seq(self, rng: np.random.RandomState, seq_idx: int) -> Dict[str, np.ndarray]:
        low, high = self._len_range(self.generating_epoch)
        seq = rng.randint(0, self.nsymbols, size=rng.randint(low, high + 1)).astype(np.int32)
        return {"data": seq, "classes": seq.copy()}
