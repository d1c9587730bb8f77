"""Valid data that must not crash (issue 28): sequences of length 0 in a batch. Every registered layer
class is built (a small default config per class, :data:`CASES`) on a batch with sequence lengths
[5, 0, 3] and on one whose sequences are all empty, in evaluation and in training: no exception,
finite values in the real frames, real frames that do not depend on what the padded frames hold
(run twice with different padding), and in training finite losses and gradients. Each run is a
compiled step (``tf.function``), as the engine runs them.

Layer classes are being added all the time: ``test_every_layer_class_has_a_case`` lists the classes
without an entry here; give each a small config in :data:`CASES` (or, for a class that cannot run on
its own, a reason in :data:`NOT_RUNNABLE`)."""
from __future__ import annotations

import copy
from typing import Any, Dict

import numpy as np
import pytest
import tensorflow as tf

from returnn.config import Config, get_global_config, set_global_config
from returnn.errors import ReturnnError
from returnn.extern_data import extern_data_from_config
from returnn.tf import layers as _all_layers  # noqa: F401  (fills the registry)
from returnn.tf.layers import RunContext
from returnn.tf.layers.base import LAYER_CLASSES
from returnn.tensor import FeatureDim, SpatialDim, batch_dim
from returnn.tf.network import TFNetwork

LENS = [5, 0, 3]
EMPTY = [0, 0, 0]
X = {"data": {"dim": 5}, "classes": {"dim": 6, "sparse": True}}
X6 = {"data": {"dim": 6}, "classes": {"dim": 6, "sparse": True}}
X1 = {"data": {"dim": 1}}
LABELS = {"data": {"dim": 5}, "labels": {"dim": 4, "sparse": True}}
SHORT = {"labels": [2, 0, 1]}  # label sequences shorter than their inputs


def _lin(n=4, src="data", act="tanh", **kw):
    return dict({"class": "linear", "activation": act, "n_out": n, "from": src}, **kw)


def _search_net(unit_extra: Dict[str, Any], end: Dict[str, Any]) -> Dict[str, Any]:
    """A searched decoder (beam 2) over an encoder of the input: for the layers that run in search."""
    unit = {"emb": _lin(3, src="prev:output", act=None),  # (labels are not concatenated: RETURNN)
            "prob": {"class": "softmax", "from": ["emb", "base:enc"], "n_out": 6},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2},
            "end": end}
    unit.update(unit_extra)
    return {"enc": {"class": "reduce", "mode": "sum", "axes": "T", "from": "data"},
            "output": {"class": "rec", "from": [], "target": "classes", "max_seq_len": 4, "unit": unit}}


END = {"class": "compare", "from": "output", "value": 0}


def _ocd_net(out: str) -> Dict[str, Any]:
    """A decoder fed its target (OCD's layers): the edit distance rows of its labels against the
    target, the optimal completions of the previous rows; the rec layer's output is ``out``'s."""
    ref = "layer:base:data:classes"
    unit = {"ch": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 2, "initial_output": 0},
            "prob": {"class": "softmax", "from": "prev:ch", "n_out": 6},
            "table": {"class": "edit_distance_table", "from": "ch", "target": ref},
            "oc": {"class": "optimal_completions", "from": "prev:table", "target": ref},
            "output": {"class": "copy", "from": out}}
    return {"output": {"class": "rec", "from": [], "target": "classes", "unit": unit}}

# class -> {"net": net dict with an "output" layer of the class (or using it), "extern": data
# description (default X), "lens": per data key lengths other than LENS, "search": run in search}
CASES: Dict[str, Dict[str, Any]] = {
    "_masked_pack": {"net": {"mask": {"class": "compare", "from": "r", "kind": "greater", "value": 0.0},
                             "r": {"class": "reduce", "mode": "sum", "axes": "F", "from": "data"},
                             "output": {"class": "masked_computation", "from": "data", "mask": "mask",
                                        "unit": {"class": "linear", "activation": "tanh", "n_out": 3}}}},
    "accumulate_mean": {"net": {"sm": {"class": "softmax", "from": "data", "n_out": 4},
                                "output": {"class": "accumulate_mean", "from": "sm", "exp_average": 0.1,
                                           "is_prob_distribution": True}}},
    "activation": {"net": {"output": {"class": "activation", "activation": "relu", "from": "data"}}},
    "alternating_real_to_complex": {"net": {"output": {"class": "alternating_real_to_complex", "from": "data"}},
                                    "extern": X6},
    "apply_length_distribution": {"net": {
        "seg": {"class": "segment_input", "from": "data", "window": 3},
        "p": {"class": "activation", "activation": "sigmoid", "from": "seg"},
        "len": {"class": "classes_to_length_distribution", "from": "data:classes", "window": 3},
        "output": {"class": "apply_length_distribution", "from": ["p", "len"], "length_model_scale": 2.0}}},
    "batch_median_pooling": {"net": {"output": {"class": "batch_median_pooling", "from": "data", "pool_size": 2}},
                             "extern": X6},
    "batch_norm": {"net": {"output": {"class": "batch_norm", "from": "data"}}},
    "batch_softmax": {"net": {"output": {"class": "batch_softmax", "from": "data"}}},
    "boolean_mask": {"net": {"r": {"class": "reduce", "mode": "sum", "axes": "F", "from": "data"},
                             "m": {"class": "compare", "from": "r", "kind": "greater", "value": 0.0},
                             "output": {"class": "boolean_mask", "from": "data", "mask": "m", "dims": ["B", "T"]}},
                     "reads_padding": True},  # as RETURNN: padded frames taken where the mask is True there
    "cast": {"net": {"output": {"class": "cast", "from": "data", "dtype": "float64"}}},
    "choice": {"net": _search_net({}, END), "search": True},
    "choice_get_beam_scores": {"net": _search_net({"bs": {"class": "choice_get_beam_scores", "from": "output",
                                                          "is_output_layer": True}}, END), "search": True},
    "choice_get_src_beams": {"net": _search_net({"sb": {"class": "choice_get_src_beams", "from": "output",
                                                        "is_output_layer": True}}, END), "search": True},
    "classes_to_length_distribution": {"net": {"output": {"class": "classes_to_length_distribution",
                                                          "from": "data:classes", "window": 3}}},
    "classes_to_length_distribution_global": {"net": {"output": {
        "class": "classes_to_length_distribution_global", "from": "data:classes", "window": 3}}},
    "classes_to_segments": {"net": {"output": {"class": "classes_to_segments", "from": "data:classes",
                                               "num_classes": 6, "window": 3}}},
    "combine": {"net": {"a": _lin(5), "output": {"class": "combine", "kind": "add", "from": ["data", "a"]}}},
    "combine_dims": {"net": {"split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
                             "output": {"class": "combine_dims", "axes": ["dim:3", "dim:2"], "from": "split"}},
                     "extern": X6},
    "compare": {"net": {"output": {"class": "compare", "from": "data", "kind": "greater", "value": 0.0}}},
    "complex_linear_projection": {"net": {"output": {"class": "complex_linear_projection", "from": "data",
                                                     "nr_of_filters": 4}}, "extern": X6},
    "complex_to_alternating_real": {"net": {"c": {"class": "alternating_real_to_complex", "from": "data"},
                                            "output": {"class": "complex_to_alternating_real", "from": "c"}},
                                    "extern": X6},
    "concat": {"net": {"a": _lin(3), "output": {"class": "concat", "from": [("data", "F"), ("a", "F")]}}},
    "concat_attention": {"net": {"q": _lin(5),
                                 "output": {"class": "concat_attention", "from": "q", "base": "data",
                                            "base_ctx": "data"}}},
    "cond": {"net": {"c": {"class": "eval", "from": [], "eval": "tf.constant(True)",
                           "out_type": {"dtype": "bool", "shape": (), "batch_dim_axis": None, "time_dim_axis": None}},
                     "output": {"class": "cond", "from": [], "condition": "c",
                                "true_layer": {"class": "copy", "from": "data"},
                                "false_layer": {"class": "pool", "mode": "max", "pool_size": [2], "padding": "same",
                                                "from": "data"}}}},
    "constant": {"net": {"c": {"class": "constant", "value": 2.0},
                         "output": {"class": "combine", "kind": "mul", "from": ["data", "c"]}}},
    "conv": {"net": {"output": {"class": "conv", "filter_size": [3], "from": "data", "n_out": 4, "padding": "same"}},
             "reads_padding": True},  # as RETURNN: padded frames convolved as they are
    "conv_time_mask": {"net": {"output": {"class": "conv", "filter_size": [3], "from": "data", "n_out": 4,
                                          "padding": "same", "use_time_mask": True}}},
    "copy": {"net": {"output": {"class": "copy", "from": "data"}}},
    "ctc_loss": {"net": {"lin": _lin(5, act=None),
                         "output": {"class": "ctc_loss", "logits": "lin", "targets": "data:labels"}},
                 "extern": LABELS, "lens": SHORT},
    "cum_concat": {"net": {"output": {"class": "rec", "from": "data", "unit": {
        "k": _lin(3, src="data:source"),
        "kk": {"class": "cum_concat", "from": "k"},
        "output": {"class": "reduce", "mode": "sum", "axes": "stag:kk", "from": "kk"}}}}},
    "cumsum": {"net": {"output": {"class": "cumsum", "axis": "T", "from": "data"}}},
    "edit_distance_table": {"net": _ocd_net("table")},
    "optimal_completions": {"net": _ocd_net("oc")},
    "dct": {"net": {"output": {"class": "dct", "from": "data"}}, "extern": X6},
    "decide": {"net": {"dec": _search_net({}, END)["output"], "enc": _search_net({}, END)["enc"],
                       "output": {"class": "decide", "from": "dec"}}, "search": True},
    "decide_keep_beam": {"net": _search_net({"bs": {"class": "choice_get_beam_scores", "from": "output"},
                                             "kept": {"class": "decide_keep_beam", "from": "bs",
                                                      "is_output_layer": True}}, END), "search": True},
    "dot": {"net": {"a": _lin(3, act=None),
                    "output": {"class": "dot", "from": ["data", "a"], "red1": "T", "red2": "T", "var1": "F",
                               "var2": "F"}}},
    "dot_attention": {"net": {"q": _lin(5),
                              "output": {"class": "dot_attention", "from": "q", "base": "data", "base_ctx": "data"}}},
    "dropout": {"net": {"output": {"class": "dropout", "dropout": 0.5, "from": "data"}}},
    "edit_distance": {"net": {"output": {"class": "edit_distance", "a": "data:labels", "b": "data:labels2"}},
                      "extern": {"labels": {"dim": 4, "sparse": True}, "labels2": {"dim": 4, "sparse": True}},
                      "lens": {"labels2": [3, 0, 2]}},
    "elemwise_prod": {"net": {"output": {"class": "elemwise_prod", "axes": "F", "from": "data"}}},
    "eval": {"net": {"output": {"class": "eval", "eval": "tf.tanh(source(0)) * 2.0", "from": "data"}}},
    "expand_dims": {"net": {"output": {"class": "expand_dims", "axis": "spatial", "from": "data"}}},
    "fill_unused": {"net": {"output": {"class": "fill_unused", "from": "data", "fill_value": -2.0}}},
    "first_t_frames_noise_estimator": {"net": {"output": {"class": "first_t_frames_noise_estimator",
                                                          "from": "data", "nr_of_frames": 2}}, "extern": X6},
    "flatten_batch": {"net": {"output": {"class": "flatten_batch", "from": "data"}}},
    "flatten_time": {"net": {"output": {"class": "flatten_time", "from": "data"}}},
    "fold": {"net": {"win": {"class": "window", "from": "data", "window_size": 3},
                     "output": {"class": "fold", "from": "win", "mode": "mean", "in_spatial_dim": "T",
                                "window_dim": "stag:win"}}},
    "forced_align": {"net": {"sm": {"class": "softmax", "from": "data", "n_out": 5},
                             "output": {"class": "forced_align", "from": "sm", "align_target": "data:labels",
                                        "topology": "ctc", "input_type": "prob"}},
                     "extern": LABELS, "lens": SHORT},
    "forward": {"net": {"output": {"class": "forward", "activation": "tanh", "n_out": 4, "from": "data"}}},
    "framewise_statistics": {"net": {"sm": {"class": "softmax", "from": "data", "n_out": 6},
                                     "output": {"class": "framewise_statistics", "from": "sm", "target": "classes",
                                                "sil_label_idx": 0}}},
    "gather": {"net": {"output": {"class": "gather", "axis": "F", "from": "data", "position": 2}}},
    "gather_nd": {"net": {"output": {"class": "gather_nd", "from": "data", "position": "data:pos"}},
                  "extern": {"data": {"dim": 5}, "pos": {"dim": 5, "sparse": True}},
                  "values": {"pos": lambda lens: [[(n - 1 - t) % max(n, 1) for t in range(max(lens))] for n in lens]}},
    "gating": {"net": {"output": {"class": "gating", "activation": "tanh", "from": "data"}}, "extern": X6},
    "gauss_window_attention": {"net": {"output": {"class": "rec", "from": "data", "unit": {
        "t": {"class": "reduce", "mode": "sum", "axes": "F", "from": "data:source"},
        "att": {"class": "gauss_window_attention", "from": "t", "base": "base:data", "window_size": 2, "std": 1.0},
        "output": {"class": "copy", "from": "att"}}}}},
    "generic_attention": {"net": {"e": _lin(1, act=None),
                                  "w": {"class": "softmax_over_spatial", "from": "e"},
                                  "output": {"class": "generic_attention", "base": "data", "weights": "w"}}},
    "get_last_hidden_state": {"net": {"a": {"class": "rec", "from": "data", "n_out": 3, "unit": "nativelstm2"},
                                      "output": {"class": "get_last_hidden_state", "from": "a", "n_out": 6}}},
    "get_rec_accumulated": {"net": {"rec": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "from": ["data:source", "prev:h"], "n_out": 3,
              "is_output_layer": True},
        "output": {"class": "copy", "from": "h"}}},
        "output": {"class": "get_rec_accumulated", "from": "rec", "sub_layer": "h"}}},
    "global_train_step": {"net": {"s": {"class": "global_train_step"},
                                  "output": {"class": "combine", "kind": "add", "from": ["data", "sf"]},
                                  "sf": {"class": "cast", "from": "s", "dtype": "float32"}}},
    "gradient": {"net": {"sq": {"class": "eval", "from": "data", "eval": "source(0) * source(0)"},
                         "s": {"class": "reduce", "mode": "sum", "axes": ["T", "F"], "from": "sq"},
                         "tot": {"class": "reduce", "mode": "sum", "axes": "B", "from": "s"},
                         "output": {"class": "gradient", "y": "tot", "x": "data"}}},
    "hdf_dump": {"net": {"output": {"class": "hdf_dump", "from": "data", "filename": "/nonexistent/never-written.hdf"}}},
    "hidden": {"net": {"output": {"class": "hidden", "activation": "tanh", "n_out": 4, "from": "data"}}},
    "identity": {"net": {"output": {"class": "identity", "from": "data"}}},
    "image_summary": {"net": {"output": {"class": "image_summary", "from": "data", "max_outputs": 2}}},
    "istft": {"net": {"stft": {"class": "stft", "frame_shift": 2, "frame_size": 4, "from": "data",
                               "use_time_mask": True},  # RETURNN's padding: zeros (istft overlaps padded frames)
                      "output": {"class": "istft", "frame_shift": 2, "frame_size": 4, "from": "stft"}}, "extern": X1},
    "layer_norm": {"net": {"output": {"class": "layer_norm", "from": "data"}}},
    "length": {"net": {"output": {"class": "length", "from": "data"}}},
    "linear": {"net": {"output": _lin(4)}},
    "loss": {"net": {"sm": {"class": "softmax", "from": "data", "n_out": 6},
                     "output": {"class": "loss", "from": "sm", "loss_": "ce", "target_": "classes"}}},
    "math_norm": {"net": {"output": {"class": "math_norm", "axes": "F", "from": "data", "p": 2}}},
    "mel_filterbank": {"net": {"output": {"class": "mel_filterbank", "fft_size": 16, "from": "data", "n_out": 4,
                                          "nr_of_filters": 4, "sampling_rate": 8000}}, "extern": {"data": {"dim": 9}}},
    "merge_dims": {"net": {"split": {"class": "split_dims", "axis": "F", "dims": [2, 3], "from": "data"},
                           "output": {"class": "merge_dims", "axes": "static", "from": "split"}}, "extern": X6},
    "multichannel_multiresolution_stft_layer": {"net": {"output": {
        "class": "multichannel_multiresolution_stft_layer", "fft_sizes": [4, 8], "frame_shift": 2,
        "frame_sizes": [4, 6], "from": "data", "nr_of_channels": 1}}, "extern": X1},
    "multichannel_stft_layer": {"net": {"output": {"class": "multichannel_stft_layer", "fft_size": 4,
                                                   "frame_shift": 2, "frame_size": 4, "from": "data",
                                                   "nr_of_channels": 1}}, "extern": X1},
    "norm": {"net": {"output": {"class": "norm", "axes": "F", "from": "data"}}},
    "normalize_length_scores": {"net": {"seg": {"class": "segment_input", "from": "data", "window": 3},
                                        "p": {"class": "activation", "activation": "sigmoid", "from": "seg"},
                                        "output": {"class": "normalize_length_scores", "from": "p"}}},
    "pad": {"net": {"output": {"class": "pad", "axes": "T", "from": "data", "padding": [1, 2],
                                "handle_dynamic_dims": True}}},
    "pool": {"net": {"output": {"class": "pool", "from": "data", "mode": "avg", "padding": "same", "pool_size": [2]}},
             "reads_padding": True},
    "pool_time_mask": {"net": {"output": {"class": "pool", "from": "data", "mode": "max", "padding": "same",
                                          "pool_size": [2], "use_time_mask": True}}},
    "positional_encoding": {"net": {"output": {"class": "positional_encoding", "from": "data", "n_out": 5}}},
    "postfix_in_time": {"net": {"output": {"class": "postfix_in_time", "from": "data", "postfix": -1.0}}},
    "prefix_in_time": {"net": {"output": {"class": "prefix_in_time", "from": "data", "prefix": 0.5}}},
    "print": {"net": {"output": {"class": "print", "from": "data", "summarize": 1}}},
    "rand_int": {"net": lambda ext: {
        "r": {"class": "rand_int", "shape": [batch_dim, ext["data"].time_dim, 3], "from": "data", "minval": 0,
              "maxval": 4},
        "output": {"class": "cast", "from": "r", "dtype": "float32"}}},
    "random": {"net": lambda ext: {"output": {"class": "random", "shape": [batch_dim, ext["data"].time_dim, 3],
                                              "from": "data", "distribution": "normal", "mean": 0.0, "stddev": 1.0}}},
    "random_state_init": {"net": lambda ext: {
        "s": {"class": "random_state_init", "seed": 5},
        "output": {"class": "random", "shape": [batch_dim, ext["data"].time_dim, 3], "from": "data",
                   "distribution": "uniform", "minval": 0.0, "maxval": 1.0, "explicit_state": "s",
                   "auto_update_state": False}}},
    "range": {"net": {"r": {"class": "range", "limit": 5},
                      "output": {"class": "cast", "from": "r", "dtype": "float32"}}},
    "range_from_length": {"net": {"len": {"class": "length", "from": "data"},
                                  "output": {"class": "range_from_length", "from": "len"}}},
    "range_in_axis": {"net": {"output": {"class": "range_in_axis", "from": "data", "axis": "T"}}},
    "rec": {"net": {"output": {"class": "rec", "from": "data", "n_out": 4, "unit": "lstm"}}},
    "rec_last_output": {"net": {"rec": {"class": "rec", "from": "data", "unit": {
        "h": {"class": "linear", "activation": "tanh", "from": ["data:source", "prev:h"], "n_out": 3,
              "need_last": True},
        "output": {"class": "copy", "from": "h"}}},
        "output": {"class": "rec_last_output", "rec_layer": "rec", "sub_layer_name": "h"}}},
    "rec_unstack": {"net": {"output": {"class": "rec", "from": "data", "unit": {
        "x": {"class": "rec_unstack", "from": "base:data"},
        "output": _lin(3, src=["x", "prev:output"])}}}},
    "reduce": {"net": {"output": {"class": "reduce", "axes": "T", "from": "data", "mode": "mean"}}},
    "reduce_out": {"net": {"output": {"class": "reduce_out", "from": "data", "mode": "max", "num_pieces": 2}},
                   "extern": X6},
    "reinterpret_data": {"net": {"output": {"class": "reinterpret_data", "from": "data", "enforce_batch_major": True}}},
    "relative_positional_encoding": {"net": {"output": {"class": "relative_positional_encoding", "from": "data",
                                                        "n_out": 4, "clipping": 3}}},
    "remove": {"net": {"output": {"class": "remove", "from": "data:classes", "symbol": 0}}},
    "repeat": {"net": {"output": {"axis": "T", "class": "repeat", "from": "data", "repetitions": 2}}},
    "reshape": {"net": {"output": {"class": "reshape", "from": "data", "in_dims": ["F"],
                                   "out_dims": [FeatureDim("r2", 2), FeatureDim("r3", 3)]}}, "extern": X6},
    "resize": {"net": {"output": {"axis": "T", "class": "resize", "factor": 2, "from": "data", "kind": "nn"}}},
    "reverse_sequence": {"net": {"output": {"class": "reverse_sequence", "from": "data"}}},
    "rnn_cell": {"net": {"output": {"class": "rnn_cell", "from": "data", "n_out": 3, "unit": "LSTMBlock"}}},
    "scaled_grad": {"net": {"output": {"class": "scaled_grad", "from": "data", "scale": -0.5}}},
    "scatter_nd": {"net": {"pos": {"class": "range_in_axis", "from": "data", "axis": "T"},
                           "output": {"class": "scatter_nd", "from": "data", "position": "pos", "position_axis": "T",
                                      "output_dim_via_time_from": "data", "filter_invalid_indices": True}}},
    "search_sorted": {"net": {"abs": {"class": "activation", "activation": "abs", "from": "data"},
                              "srt": {"class": "cumsum", "axis": "F", "from": "abs"},
                              "vals": {"class": "reduce", "mode": "sum", "axes": "F", "from": "abs",
                                       "keep_dims": True},
                              "output": {"class": "search_sorted", "axis": "F", "sorted_sequence": "srt",
                                         "values": "vals"}}},
    "segment_alignment": {"net": {"output": {"class": "segment_alignment", "from": "data:pairs", "num_classes": 4,
                                             "window": 3}},
                          "extern": {"pairs": {"dim": 4, "sparse": True}}, "lens": {"pairs": [10, 0, 6]}},
    "segment_input": {"net": {"output": {"class": "segment_input", "from": "data", "window": 3}}},
    "self_attention": {"net": {"output": {"class": "self_attention", "from": "data", "n_out": 6, "num_heads": 2,
                                          "total_key_dim": 4, "attention_left_only": True}}},
    "seq_len_mask": {"net": {"output": {"class": "seq_len_mask", "from": "data", "mask_value": -3.0}}},
    "shift_axis": {"net": {"output": {"amount": 1, "axis": "T", "class": "shift_axis", "from": "data"}}},
    "signal_masking": {"net": {"mask": _lin(6, act="sigmoid"),
                               "output": {"class": "signal_masking", "from": [], "mask": "mask", "signal": "data",
                                          "n_out": 6}}, "extern": X6},
    "slice": {"net": {"output": {"axis": "T", "class": "slice", "from": "data", "slice_start": 1}}},
    "slice_nd": {"net": {"start": {"class": "range_in_axis", "from": "data", "axis": "B"},
                         "output": {"class": "slice_nd", "from": "data", "size": 2, "start": "start"}}},
    "softmax": {"net": {"output": {"class": "softmax", "from": "data", "n_out": 6, "loss": "ce",
                                   "target": "classes"}}},
    "softmax_over_spatial": {"net": {"e": _lin(1, act=None), "output": {"class": "softmax_over_spatial", "from": "e"}}},
    "source": {"net": {"output": {"class": "source", "data_key": "data"}}},
    "sparse_softmax_cross_entropy_with_logits": {"net": {  # (targets on the logits' time axis: RETURNN's check)
        "lin": _lin(6, act=None), "lin2": _lin(6, act=None),
        "am": {"class": "reduce", "mode": "argmax", "axis": "F", "from": "lin2"},
        "output": {"class": "sparse_softmax_cross_entropy_with_logits", "logits": "lin", "targets": "am"}}},
    "split": {"net": {"s": {"class": "split", "from": "data", "size_splits": [2, 3]},
                      "output": {"class": "copy", "from": "s/1"}}},
    "split_batch_beam": {"net": {"output": {"class": "split_batch_beam", "from": "data",  # beams of one hypothesis
                                            "beam_dim": SpatialDim("beam", 1)}}},
    "split_batch_time": {"net": {"m": {"axes": ["B", "T"], "class": "merge_dims", "from": "data"},
                                 "lin": _lin(4, src="m"),
                                 "output": {"base": "data", "class": "split_batch_time", "from": "lin"}}},
    "split_concatenated_multichannel": {"net": {"output": {"class": "split_concatenated_multichannel",
                                                           "from": "data", "nr_of_channels": 2}}, "extern": X6},
    "split_dims": {"net": {"output": {"axis": "F", "class": "split_dims", "dims": [3, 2], "from": "data"}},
                   "extern": X6},
    "squeeze": {"net": {"e": {"axis": "spatial", "class": "expand_dims", "from": "data"},
                        "output": {"axis": "spatial:-1", "class": "squeeze", "from": "e"}}},
    "stack": {"net": {"a": _lin(5), "output": {"class": "stack", "from": ["data", "a"]}}},
    "stft": {"net": {"output": {"class": "stft", "fft_size": 8, "frame_shift": 2, "frame_size": 4, "from": "data"}},
             "extern": X1},
    "swap_axes": {"net": {"output": {"axis1": "T", "axis2": "F", "class": "swap_axes", "from": "data"}}},
    "swap_time_feature": {"net": {"output": {"class": "swap_time_feature", "from": "data"}}},
    "switch": {"net": {"a": _lin(5, act=None), "cmp": {"class": "compare", "from": ["data", "a"], "kind": "greater"},
                       "output": {"class": "switch", "condition": "cmp", "true_from": "data", "false_from": "a"}}},
    "tile": {"net": {"output": {"class": "tile", "from": "data", "multiples": {"F": 2}}}},
    "tile_features": {"net": {"output": {"class": "tile_features", "from": "data", "repetitions": 2}}},
    "time_chunking": {"net": {"ch": {"chunk_size": 3, "chunk_step": 2, "class": "time_chunking", "from": "data"},
                              "output": _lin(3, src="ch")}},
    "time_unchunking": {"net": {"ch": {"chunk_size": 3, "chunk_step": 3, "class": "time_chunking", "from": "data"},
                                "a": {"class": "rec", "from": "ch", "n_out": 3, "unit": "nativelstm2"},
                                "output": {"chunking_layer": "ch", "class": "time_unchunking", "from": "a"}}},
    "top_k": {"net": {"output": {"axis": "F", "class": "top_k", "from": "data", "k": 2}}},
    "train_flag": {"net": {"f": {"class": "train_flag"},
                           "output": {"class": "switch", "condition": "f", "true_from": "data",
                                      "false_from": "data"}}},
    "transpose": {"net": {"output": {"class": "transpose", "from": "data", "perm": {"F": "T", "T": "F"}}}},
    "transposed_conv": {"net": {"output": {"class": "transposed_conv", "filter_size": [3], "from": "data",
                                           "n_out": 4, "strides": [2]}}},
    "twod_lstm": {"net": {"output": {"class": "twod_lstm", "from": ["data", "data:other"], "n_out": 3,
                                     "pooling": "last"}},
                  "extern": {"data": {"dim": 5}, "other": {"dim": 3}}, "lens": {"other": [2, 4, 0]}},
    "unflatten_batch": {"net": {"flat": {"class": "flatten_batch", "from": "data"}, "lin": _lin(4, src="flat"),
                                "output": {"class": "unflatten_batch", "from": "lin"}}},
    "unflatten_nd": {"net": {"output": {"class": "unflatten_nd", "from": "data", "sizes": "data:sizes",
                                        "num_axes": 2}},
                     "extern": {"data": {"dim": 3}, "sizes": {"shape": (2,), "dtype": "int32"}},
                     "values": {"sizes": lambda lens: [[[1, n]] for n in lens]}},
    "unmask": {"net": {"r": {"class": "reduce", "mode": "sum", "axes": "F", "from": "data"},
                       "mask": {"class": "compare", "from": "r", "kind": "greater", "value": 0.0},
                       "packed": {"class": "masked_computation", "from": "data", "mask": "mask",
                                  "unit": {"class": "copy"}},
                       "packed_c": {"class": "copy", "from": "packed"},  # (RETURNN: not from the masked_computation)
                       "output": {"class": "unmask", "from": "packed_c", "mask": "mask"}}},
    "unsegment_input": {"net": {"seg": {"class": "segment_input", "from": "data", "window": 3},
                                "output": {"class": "unsegment_input", "from": "seg"}}},
    "variable": {"net": {"v": {"class": "variable", "shape": [5]},
                         "output": {"class": "combine", "kind": "add", "from": ["data", "v"]}}},
    "variable_assign": {"net": {"v": {"class": "variable", "shape": [5], "trainable": False},
                                "r": {"class": "reduce", "mode": "mean", "axes": ["B", "T"], "from": "data"},
                                "a": {"class": "variable_assign", "var": "v", "value": "r", "is_output_layer": True},
                                "output": {"class": "variable_read", "var": "v", "control_dependencies": "a"}},
                        "uses": ["variable_read"]},
    "variable_read": {"net": {"v": {"class": "variable", "shape": [5]},
                              "rd": {"class": "variable_read", "var": "v"},
                              "output": {"class": "combine", "kind": "add", "from": ["data", "rd"]}}},
    "weighted_sum": {"net": {"output": {"axes": "F", "class": "weighted_sum", "from": "data"}}},
    "window": {"net": {"output": {"class": "window", "from": "data", "window_size": 3}},
               "reads_padding": True},  # as RETURNN: windows over the padded frames as they are
}

NOT_RUNNABLE: Dict[str, str] = {
    "synthetic_gradient": "refused by this engine at construction (one line; RETURNN's needs its own graph hooks)",
    "tikhonov_regularization": "refused by this engine at construction (one line)",
    "_unmask_in_unit": "no config class: what 'unmask' becomes in a rec unit whose masked_computation has "
                       "masked_from (tests/test_layer_refs.py); registered once rec units are imported",
    "_unmask_outside_loop": "no config class: what 'unmask' of a masked_computation outside rec loops becomes; "
                            "refused when built (tests/test_masked_computation.py)",
}


def test_every_layer_class_has_a_case():
    """New layer classes need an entry: a small config in CASES (or a reason in NOT_RUNNABLE)."""
    from returnn.tf.layers.config_layer import ConfigLayer  # classes of configs other tests registered
    engine_classes = {name for name, cls in LAYER_CLASSES.items() if not issubclass(cls, ConfigLayer)}
    missing = sorted(engine_classes - set(CASES) - set(NOT_RUNNABLE))
    assert not missing, ("layer classes without a zero-length case in tests/test_zero_length.py (add a small "
                         "config to CASES): %s" % ", ".join(missing))


def _extern(spec: Dict[str, Any]):
    return extern_data_from_config(Config({"extern_data": copy.deepcopy(spec)}))


def _batch(extern, case: Dict[str, Any], lens, garbage: float, seed: int = 3) -> Dict[str, tf.Tensor]:
    """A batch of every data key; padded frames (beyond each sequence's length) hold ``garbage``."""
    rng = np.random.RandomState(seed)
    batch = {}
    for key, data in extern.items():
        key_lens = np.array(case.get("lens", {}).get(key, lens) if lens is LENS else lens, np.int32)
        if key in case.get("values", {}):
            value = np.array(case["values"][key](lens), data.dtype)
            key_lens = np.ones(len(lens), np.int32) if data.time_dim_axis is None else key_lens
        elif data.time_dim_axis is None:
            value = rng.randn(len(lens), 1, *data.batch_shape[1:]).astype(data.dtype)
            key_lens = np.ones(len(lens), np.int32)
        else:
            shape = [len(key_lens), int(key_lens.max(initial=0))] + [d for d in data.batch_shape[2:]]
            if data.sparse:
                value = rng.randint(0, data.dim, size=shape).astype(data.dtype)
                pad = data.dim - 1 if garbage else 0
            else:
                value = rng.randn(*shape).astype(data.dtype)
                pad = garbage
            for b, n in enumerate(key_lens):
                value[b, n:] = pad
        batch[key], batch[key + ":seq_len"] = tf.constant(value), tf.constant(key_lens)
    return batch


def _real(out) -> tf.Tensor:
    """The output with its padded positions zeroed (outputs without batch axis: as they are)."""
    if not out.sizes:
        return out.tensor
    try:
        return out.masked(0)
    except (ValueError, ReturnnError):  # dynamic axes without batch axis (range_in_axis over T): nothing per
        return out.tensor  # sequence (LayerOutput.broadcast_mask refuses such a mask)


def _float(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc"


def _run_both(case: Dict[str, Any], extern, lens, train: bool, names):
    """{garbage: {layer: real values}} of the batch with padded frames 0 and with 1e4, each run in a
    compiled step (as the engine runs it) from the same initial state (layers with state, e.g.
    accumulate_mean, are reset in between); in training the objective (losses plus the output's real
    values) and its gradients must be finite."""
    net_dict = case["net"](extern) if callable(case["net"]) else copy.deepcopy(case["net"])
    net = TFNetwork(net_dict, extern, search=case.get("search", False))
    ctx = RunContext(train, tf.constant([7, 8], tf.int64))
    variables = list(net.trainable_variables) if train else []
    # traced as the engine traces its steps (TFNetwork.batch_spec: batch and time dims unknown), so
    # the branches a layer takes for an empty batch are decided when it runs, not when it is traced
    keys = sorted(extern)
    signature = [{k: net.batch_spec(k) for k in keys} | {k + ":seq_len": tf.TensorSpec([None], tf.int32) for k in keys}]

    @tf.function(input_signature=signature)
    def step(batch):
        with tf.GradientTape() as tape:
            outputs = net.forward(batch, ctx)
            objective = tf.constant(0.0)
            if train:
                for values in net.compute_losses(outputs, batch, train=True).values():
                    objective += tf.cast(values.loss_sum, tf.float32)
                out = outputs["output"]
                if out.tensor.dtype.is_floating:
                    objective += tf.reduce_sum(tf.cast(_real(out), tf.float32))
        grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros([0]) for g in
                 (tape.gradient(objective, variables) if variables else [])]
        return {n: _real(o) for n, o in outputs.items() if n in names}, objective, grads

    initial = [(v, v.numpy()) for v in net.variables]
    result = {}
    for garbage in (0.0, 1e4):
        for var, value in initial:
            var.assign(value)
        values, objective, grads = step(_batch(extern, case, lens, garbage))
        assert np.isfinite(objective.numpy()), "training objective %s" % objective.numpy()
        for var, grad in zip(variables, grads):
            assert np.all(np.isfinite(grad.numpy())), "gradient of %s" % var.name
        result[garbage] = {n: np.asarray(v.numpy()) for n, v in values.items()}
    return result


def _run_case(name: str, lens, train: bool):
    case = CASES[name]
    extern = _extern(case.get("extern", X))
    net_dict = case["net"](extern) if callable(case["net"]) else case["net"]
    names = ["output"] + [n for n, o in net_dict.items() if isinstance(o, dict) and o.get("is_output_layer")]
    old = get_global_config(raise_exception=False)
    set_global_config(Config({}))
    try:
        runs = _run_both(case, extern, lens, train, names)
        zero, big = runs[0.0], runs[1e4]
    finally:
        set_global_config(old)
    for layer in zero:
        a, b = zero[layer], big[layer]
        if _float(a):
            assert np.all(np.isfinite(a)), "%s: layer %r has non-finite real frames: %s" % (name, layer, a)
            if case.get("reads_padding"):  # RETURNN's semantics read the padded frames: only finite here
                continue
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4,
                                       err_msg="%s: layer %r depends on padded frames" % (name, layer))
        elif not case.get("search"):
            np.testing.assert_array_equal(a, b, err_msg="%s: layer %r depends on padded frames" % (name, layer))


def _modes(name):
    case = CASES[name]
    if case.get("search"):
        return [False]
    if case.get("eval_only"):
        return [False]
    return [False, True]


PARAMS = [pytest.param(name, lens, train, id="%s-%s-%s" % (name, "empty" if lens == EMPTY else "5,0,3",
                                                        "train" if train else "eval"))
          for name in sorted(CASES) for lens in (LENS, EMPTY) for train in _modes(name)]


@pytest.mark.parametrize("name,lens,train", PARAMS)
def test_zero_length_sequences(name, lens, train):
    _run_case(name, lens, train)


@pytest.mark.parametrize("name", sorted(NOT_RUNNABLE))
def test_refused_layer_classes_are_one_line(name):
    with pytest.raises(ReturnnError) as info:
        TFNetwork({"output": {"class": name, "from": "data"}}, _extern(X))
    assert "\n" not in str(info.value)


E2E_CONFIG = '''#!rnn.py
import numpy as np
_rng = np.random.RandomState(1)
_lens = [0, 0, 3, 4, 0, 5, 2, 0]  # with max_seqs 2: a batch of two empty sequences, and mixed ones
_seqs = [{"data": _rng.randn(n, 3).astype("float32"), "classes": _rng.randint(0, 4, size=(n,)).astype("int32")}
         for n in _lens]
task = "train"
train = {"class": "StaticDataset", "data": _seqs, "output_dim": 4}
dev = {"class": "StaticDataset", "data": _seqs, "output_dim": 4}
num_inputs = 3
num_outputs = 4
batch_size = 100
max_seqs = 2
network = {
    "lstm": {"class": "rec", "unit": "%s", "n_out": 8, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm"},
}
adam = True
learning_rate = 0.01
num_epochs = 2
tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
'''


@pytest.mark.parametrize("unit", ["lstm", "nativelstm2"])
def test_training_on_batches_with_empty_sequences(tmp_path, unit):
    """rnn.py end to end: the LSTM's compiled train step on a batch whose sequences are all empty
    (before issue 28: a 100-line TensorFlow error about stacking an empty list) and on mixed ones."""
    from helpers import describe, run_rnn, train_args, write_config
    config = write_config(tmp_path / "empty.config", E2E_CONFIG % unit)
    proc = run_rnn(train_args(config, tmp_path), timeout=600)
    assert proc.returncode == 0, describe(proc)
    assert "Finished training in epoch 2." in proc.stdout and "nan" not in proc.stdout, describe(proc)


def test_dev_set_of_only_empty_sequences_says_it_has_no_frames_to_score(tmp_path):
    from helpers import describe, run_rnn, train_args, write_config
    config = E2E_CONFIG % "lstm" + '''
dev = {"class": "StaticDataset", "data": [s for s in _seqs if len(s["data"]) == 0], "output_dim": 4}
num_epochs = 1
'''
    proc = run_rnn(train_args(write_config(tmp_path / "empty_dev.config", config), tmp_path), timeout=600)
    assert proc.returncode == 0, describe(proc)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("epoch 1 score")]
    assert line and line[0].endswith("dev: no frames to score"), describe(proc)
