"""``task = "search"``: beam search over a dataset, the best hypotheses written to
``search_output_file``, and the edit distance to the reference printed when the data has it.
``search_output_layer`` may list several layers (RETURNN's): one search, ``{tag: {layer: hypothesis}}``.

Output formats (``search_output_file_format``), as RETURNN writes them, sequences in corpus order:
``txt``, one hypothesis a line (no tag); ``py``, a Python dict literal ``{tag: hypothesis, ...}``
(read it with ``ast.literal_eval``, never ``eval``). A hypothesis is the label names joined by
spaces: the dataset's ``labels`` of the layer's target key (its ``target``, else the default
target); without them RETURNN cannot write the file, nor can this engine (one line). A layer that
still has the search beam (no ``decide`` after the searched rec layer) gives, as RETURNN's, all its
``beam_size`` hypotheses with their scores ``[(score, text), ...]`` (its rec layer then keeps its
beams, :data:`returnn.tf.layers.rec_net.layer.RecSubnetLayer.keep_beams`). A dense output (a regression decoder's frames) is
its real frames as numpy prints the array, as RETURNN writes it (no edit distance then). A file name
ending in ``.gz`` is written gzip-compressed (RETURNN's).
"""
from __future__ import annotations

import gzip
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from returnn.datasets.base import Dataset
from returnn.datasets.batching import BatchOptions
from returnn.datasets.integrity import unique_tag_positions
from returnn.datasets.prefetch import BatchPrefetcher
from returnn.errors import ConfigError, output_write_error
from returnn.interrupts import raise_if_stop_pending
from returnn.tf.eval_output import returnn_better_repr
from returnn.tf.losses import reporting_misalignment
from returnn.tf.steps import StepFunctions
from returnn.util.output_guard import remove_stale_temp_files
from returnn.util.safe_files import UnsafePathError, atomic_write_bytes


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    """Levenshtein distance of two label sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def hypothesis_text(labels: Any, names: Optional[List[str]]) -> Any:
    """Label names (or indices) joined by spaces; dense frames (a float array: a regression decoder's
    output) as the array itself, which RETURNN writes as numpy prints it (``str`` in ``txt``, ``repr``
    in ``py``)."""
    if isinstance(labels, BeamList):  # RETURNN: [(score, text), ...]
        return BeamList((score, hypothesis_text(hyp, names)) for score, hyp in labels)
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "fc":
        return labels
    if names:
        if any(not 0 <= i < len(names) for i in labels):  # RETURNN's vocabulary fails on it (IndexError)
            raise ConfigError("search_output_file: a hypothesis has label %i, beyond the %i labels of its target"
                              % (max(labels), len(names)))
        return " ".join(names[i] for i in labels)
    return " ".join(str(int(i)) for i in labels)


def write_hypotheses(path: str, hyps: List[Tuple[str, Any]], fmt: str) -> None:
    """Writes atomically (a temporary file renamed at the end), as RETURNN's search: ``txt`` one
    hypothesis a line (no tag), ``py`` ``{tag: hypothesis}``, in the order of ``hyps`` (the corpus
    order). A hypothesis is a text, or ``{layer: text}`` with a list of search output layers (``py``
    format only, as RETURNN). A ``path`` ending in ``.gz`` is written gzip-compressed, as RETURNN
    does. Dense hypotheses are numpy's text of the array: ``str`` (numpy's default print options) in
    ``txt``, ``repr`` with every element in ``py`` (RETURNN's ``printoptions(threshold=maxsize)``)."""
    if fmt not in ("txt", "py"):
        raise ConfigError("config key 'search_output_file_format': 'txt' or 'py', got %r" % fmt)
    if fmt == "txt" and any(isinstance(text, dict) for _, text in hyps):
        raise ConfigError("config key 'search_output_file_format': 'txt' does not hold several search output "
                          "layers (search_output_layer is a list): use 'py', as RETURNN")
    lines = []
    if fmt == "py":
        lines.append("{\n")
        with np.printoptions(threshold=sys.maxsize):
            lines += ["%r: %s,\n" % (tag, returnn_better_repr(text)) for tag, text in hyps]
        lines.append("}\n")
    else:
        lines += ["%s\n" % (text,) for _, text in hyps]
    # surrogateescape: a tag whose bytes were not UTF-8 in its data file is written as those bytes
    data = "".join(lines).encode("utf-8", "surrogateescape")
    if path.endswith(".gz"):  # RETURNN opens such a search_output_file with gzip
        data = gzip.compress(data, mtime=0)
    remove_stale_temp_files(path)  # <path>.tmp-<pid> of a killed search
    raise_if_stop_pending()  # a stop signal that C code cleared on the way: nothing is written
    try:
        atomic_write_bytes(path, data)  # via a new temporary file, never through a link
    except OSError as exc:  # a full disk: one line; the temporary file is removed
        if isinstance(exc, UnsafePathError):
            raise
        raise output_write_error(path, exc, "search output file") from None


def run_search(steps: StepFunctions, dataset: Dataset, batching: BatchOptions, epoch: int,
               target: Optional[str], layers: Optional[Sequence[str]] = None, keyed_output: Optional[str] = None,
               keyed_layers: bool = False, before_decoding: Optional[Callable[[], None]] = None,
               beams: bool = False) -> Tuple[List[Tuple[str, List[int]]], Dict[str, float]]:
    """Decodes ``dataset``; returns ``[(tag, labels)]`` in dataset order and the edit-distance
    statistics against ``target`` (empty when the data has no such key). With several ``layers``
    (RETURNN's list ``search_output_layer``), the labels are ``{layer: labels}`` from one search,
    and the statistics are those of the first layer. ``keyed_output``: the file of a dict by tag
    (the 'py' format): a tag twice would drop a hypothesis, so it is refused before decoding.
    ``keyed_layers`` (search_output_layer given as a list, RETURNN's): ``{layer: labels}`` also for one layer.
    ``beams``: a layer that still has its beam gives a :class:`BeamList` of ``(score, labels)``, best first."""
    slices = batching.epoch_slices(dataset, epoch, "forward")
    if keyed_output:
        check_unique_tags(dataset, keyed_output)
    if before_decoding is not None:  # the checks of the output file's layers
        before_decoding()
    results: List[Tuple[str, Any]] = []
    order: List[int] = []
    errors = ref_len = 0
    have_ref = target is not None and target in dataset.data_infos()
    if beams:
        step, keys = steps.search_layers_step(list(layers or [steps.network.output_layer_name]))
    elif layers and len(layers) > 1:
        step, keys = steps.layers_step(layers)
    else:
        step, keys = (lambda batch: [steps.forward_step(batch)]), steps.forward_keys
    for sl, batch in zip(slices, BatchPrefetcher(dataset, slices, keys, batching.prefetch,
                                                 transform=steps.to_tensors)):
        with reporting_misalignment(dataset, sl):  # a data check failing in the step: one line
            outputs = [tuple(x.numpy() for x in out) for out in step(batch)]
        for row, seq_idx in enumerate(sl.seq_idxs):
            per_layer = [_beam_hypotheses(out, row) for out in outputs]
            labels = per_layer[0]
            best = max(labels, key=lambda h: h[0])[1] if isinstance(labels, BeamList) else labels
            tag = dataset.get_tag(int(seq_idx))
            order.append(_corpus_index(dataset, int(seq_idx)))
            results.append((tag, dict(zip(layers, per_layer)) if layers and (keyed_layers or len(layers) > 1)
                            else labels))
            if isinstance(best, np.ndarray):  # dense frames: no labels to compare with a reference
                have_ref = False
            if have_ref:  # (of the best hypothesis of a beam)
                ref = [int(x) for x in np.asarray(dataset.get_data(int(seq_idx), target)).reshape(-1)]
                errors += edit_distance(best, ref)
                ref_len += len(ref)
    dataset.check_files_unchanged()  # no hypotheses of a changed data file are written
    results = [r for _, r in sorted(zip(order, results), key=lambda x: x[0])]  # RETURNN writes the corpus order
    stats = {"edit_distance": float(errors), "ref_len": float(ref_len),
             "error_rate": errors / ref_len if ref_len else 0.0} if have_ref else {}
    return results, stats


class Score(float):
    """A beam score written as RETURNN's numpy float32 prints (``-1.07689``)."""

    def __repr__(self) -> str:
        return str(np.float32(self))


class BeamList(list):
    """A layer's hypotheses of one sequence with its beam: ``[(score, labels)]`` in beam order (RETURNN's
    search output of a layer with a beam)."""


def _beam_hypotheses(out: Tuple[np.ndarray, ...], row: int) -> Any:
    """Sequence ``row``'s hypothesis of one layer's step output ``(values, seq_len[, scores])``: its
    labels, or with beam scores ``(B, K)`` its K hypotheses (rows ``row * K + k``) with their scores."""
    values, seq_len = out[0], out[1]
    scores = out[2] if len(out) > 2 else None
    if scores is None or scores.shape[1] == 0:
        return _hypothesis(values, seq_len, row)
    k = scores.shape[1]
    return BeamList((Score(scores[row, i]), _hypothesis(values, seq_len, row * k + i)) for i in range(k))


def _hypothesis(values: np.ndarray, seq_len: np.ndarray, row: int) -> Any:
    """One sequence of a search output: its labels (a list of ints), or its dense frames as they are
    (a float array of the real frames: a regression decoder's output, e.g. Tacotron's)."""
    frames = np.asarray(values[row, :seq_len[row]])
    if frames.dtype.kind in "fc":
        return frames
    return [int(x) for x in frames.reshape(-1)]


def check_unique_tags(dataset: Dataset, keyed_output: str) -> None:
    """The 'py' search output is a dict by tag: a tag twice would drop a hypothesis (one line)."""
    unique_tag_positions([dataset.get_tag(i) for i in range(dataset.num_seqs)],
                         "%s: search_output_file %s is a dict by sequence tag" % (dataset.describe(), keyed_output),
                         lambda i: "sequence #%i%s" % (i, _origin(dataset, i)))


def _corpus_index(dataset: Dataset, seq_idx: int) -> int:
    try:
        return int(dataset.corpus_index(seq_idx))
    except Exception:  # noqa: BLE001 - a dataset without corpus indices: its order
        return seq_idx


def _origin(dataset: Dataset, seq_idx: int) -> str:
    try:
        origin = dataset.seq_origin(dataset.corpus_index(seq_idx))
    except Exception:  # noqa: BLE001 - only for the message
        origin = ""
    return " (%s)" % origin if origin else ""


def search_output_layers(config) -> List[str]:
    """``search_output_layer``: one layer name, or RETURNN's list of them (none: the output layer)."""
    value = config.typed_value("search_output_layer")
    if not value:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def beam_of_layer(network, name: str) -> Optional[str]:
    """The searched rec layer whose beam the layer ``name`` still carries in RETURNN (its
    ``Data.beam``: a searched rec layer, or a layer reading one without a ``decide`` in between),
    else None."""
    from returnn.tf.network import base_layer_name, parse_source
    seen, todo = set(), [base_layer_name(name, network.layers)]
    while todo:
        cur = todo.pop()
        if cur in seen or cur not in network.layers:
            continue
        seen.add(cur)
        layer = network.layers[cur]
        if type(layer).layer_class == "decide":
            continue
        if type(layer).layer_class == "rec" and getattr(layer, "search", False):
            return cur
        todo.extend(base_layer_name(ref, network.layers)
                    for kind, ref in map(parse_source, network.sources.get(cur, ())) if kind == "layer")
    return None


def label_names(network, dataset: Dataset, name: str, default_target: str) -> Optional[List[str]]:
    """RETURNN's vocabulary of a sparse search output: the dataset's labels of the layer's target key
    (its ``target``; else the default target); None for a dense output. A sparse output without such
    labels is refused (RETURNN: 'Unable to serialize sparse output of layer')."""
    layer = network.layers[name]
    if not layer.output.sparse:
        return None
    target = layer.opts.get("target") or default_target
    info = dataset.data_infos().get(target) if isinstance(target, str) else None
    names = getattr(info, "labels", None) if info is not None else None
    if not names:
        raise ConfigError("search_output_file: no labels for the sparse output of layer %r (target %r): RETURNN "
                          "cannot write it either ('Unable to serialize sparse output')" % (name, target))
    return list(names)
