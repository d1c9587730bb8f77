"""RETURNN's TF layer classes and rec units, and the status of each here (from the registry).

The names are RETURNN's (its layer class dictionary and the unit names its ``rec`` layer takes on
TensorFlow 2, as of RETURNN 1.2026); the status comes from this engine's registries, so the
tables in docs/compat.md (``tools/gen-docs.py``) cannot go stale.
"""
from __future__ import annotations

from typing import Any, List, Tuple

# RETURNN's layer classes (TF backend), aliases included.
RETURNN_LAYER_CLASSES = tuple("""
accumulate_mean activation alternating_real_to_complex apply_length_distribution batch_median_pooling batch_norm
batch_softmax boolean_mask cast choice choice_get_beam_scores choice_get_src_beams classes_to_length_distribution
classes_to_length_distribution_global classes_to_segments combine combine_dims compare complex_linear_projection
complex_to_alternating_real concat concat_attention cond constant conv copy ctc_loss cum_concat cumsum dct decide
decide_keep_beam dot dot_attention dropout edit_distance edit_distance_table elemwise_prod eval expand_dims fast_bw
fill_unused first_t_frames_noise_estimator flatten_batch flatten_time fold forced_align forward
framewise_statistics gather gather_nd gating gauss_window_attention generic_attention get_last_hidden_state
get_rec_accumulated global_train_step gradient hdf_dump hidden identity image_summary istft kenlm layer_norm length
linear loss mask_based_gevbeamforming mask_based_mvdrbeamforming masked_computation math_norm mel_filterbank
merge_dims multichannel_multiresolution_stft_layer multichannel_stft_layer norm normalize_length_scores
optimal_completions pad parametric_wiener_filter pool positional_encoding postfix_in_time prefix_in_time print
rand_int random random_state_init range range_from_length range_in_axis rec rec_last_output rec_unstack reduce
reduce_out reinterpret_data relative_positional_encoding remove repeat reshape resize rnn_cell scaled_grad
scatter_nd search_sorted segment_alignment segment_input self_attention seq_len_mask shift_axis signal_masking slice
slice_nd softmax softmax_over_spatial source sparse_softmax_cross_entropy_with_logits split split_batch_beam
split_batch_time split_concatenated_multichannel split_dims squeeze stack stft subnetwork swap_axes
swap_time_feature switch synthetic_gradient tikhonov_regularization tile tile_features time_chunking
time_unchunking top_k train_flag transpose transposed_conv twod_lstm unflatten_batch unflatten_nd unmask
unsegment_input variable variable_assign variable_read weighted_sum window
""".split())

# The unit names RETURNN's rec layer takes on TF 2 (its cells dictionary plus the names it maps).
RETURNN_REC_UNITS = tuple("""
lstm nativelstm nativelstm2 nativelstmlowmem lstmp cudnnlstm lstmblock lstmblockfused standardlstm basiclstm
vanillalstm zoneoutlstm layernormvariantslstm gru cudnngru grublock basicrnn rnn rhn twodnativelstm
blocksparselstm blocksparsemultiplicativemultisteplstm
""".split())

# Layer classes that are no registered class here but flattened into plain layers before building.
EXPANDED = {"subnetwork": "flattened into NAME/x layers (returnn/tf/subnetwork.py)",
            "masked_computation": "flattened into NAME/x layers (returnn/tf/subnetwork.py)"}


def layer_status(name: str) -> Tuple[str, str]:
    """('yes' | 'no' | 'missing', detail) of RETURNN's layer class ``name`` here."""
    from returnn.tf import layers as _all  # noqa: F401  (fills the registry)
    from returnn.tf.layers.base import LAYER_CLASSES, NOT_HERE
    if name in LAYER_CLASSES:
        cls = LAYER_CLASSES[name]
        alias = "" if cls.layer_class == name else "alias of `%s`, " % cls.layer_class
        return "yes", "%s%s" % (alias, cls.__module__.replace("returnn.tf.layers.", ""))
    if name in EXPANDED:
        return "yes", EXPANDED[name]
    if name in NOT_HERE:
        return "no", NOT_HERE[name]
    return "missing", ""


def unit_status(name: str) -> Tuple[str, str]:
    """('yes' | 'no' | 'missing', detail) of RETURNN's rec unit ``name`` in this engine's ``rec`` layer."""
    from returnn.tf.layers.rec import LSTM_UNITS, UNITS_NOT_HERE
    from returnn.tf.layers.rnn_cell import CELL_UNITS
    from returnn.tf.layers.rec_params import REC_LAYOUT
    if name in LSTM_UNITS or name in CELL_UNITS:
        layout = REC_LAYOUT.get(name, "")
        return "yes", ("parameters as RETURNN's %s" % layout.replace("_", " ")) if layout else ""
    if name in UNITS_NOT_HERE:
        return "no", UNITS_NOT_HERE[name]
    return "missing", ""


def layers_table() -> List[str]:
    """Markdown rows: every RETURNN layer class and its status here."""
    rows = ["| RETURNN layer class | here | notes |", "|---|---|---|"]
    for name in sorted(RETURNN_LAYER_CLASSES):
        status, detail = layer_status(name)
        rows.append("| `%s` | %s | %s |" % (name, status, detail.replace("|", "/")))
    return rows


def units_table() -> List[str]:
    """Markdown rows: every RETURNN rec unit name and its status here."""
    rows = ["| RETURNN rec unit | here | notes |", "|---|---|---|"]
    for name in RETURNN_REC_UNITS:
        status, detail = unit_status(name)
        rows.append("| `%s` | %s | %s |" % (name, status, detail))
    return rows


def summary() -> str:
    """One line: how many of RETURNN's layer classes and units exist here."""
    from returnn.tf.layers.base import NOT_YET
    layers = [layer_status(n)[0] for n in RETURNN_LAYER_CLASSES]
    units = [unit_status(n)[0] for n in RETURNN_REC_UNITS]
    not_yet = [n for n in RETURNN_LAYER_CLASSES if n in NOT_YET and layer_status(n)[0] == "no"]
    later = ("; %i not yet: %s, RETURNN native ops not reimplemented with TensorFlow ops"
             % (len(not_yet), ", ".join("`%s`" % n for n in not_yet))) if not_yet else ""
    return ("%i of RETURNN's %i layer class names work here (%i cannot: they need software outside TensorFlow%s), "
            "%i of its %i rec unit names."
            % (layers.count("yes"), len(layers), layers.count("no") - len(not_yet), later,
               units.count("yes"), len(units)))


def extra_classes_line() -> str:
    """One line: the layer classes here that RETURNN's release does not have (classes of RETURNN forks that
    published configs use), or "" if none."""
    from returnn.tf import layers as _all  # noqa: F401  (fills the registry)
    from returnn.tf.layers.base import LAYER_CLASSES
    extra = sorted(n for n in LAYER_CLASSES if n not in RETURNN_LAYER_CLASSES and not n.startswith("_"))
    return ("Also here, not in RETURNN's release (classes of RETURNN forks that published configs use): %s."
            % ", ".join("`%s`" % n for n in extra)) if extra else ""


def returnn_class_name(layer_class: str) -> str:
    """RETURNN's Python class name of a layer class name: ``softmax_over_spatial`` -> ``SoftmaxOverSpatialLayer``."""
    return "".join(part[:1].upper() + part[1:] for part in layer_class.split("_")) + "Layer"


def layer_class_by_returnn_name(name: str) -> Any:
    """The engine's layer class standing for RETURNN's Python class ``name`` (``EvalLayer``, ``RecLayer``:
    what ``from returnn.tf.layers.basic import EvalLayer`` gives a config, for annotations and
    ``isinstance``), found by its layer class names or its own class name; None if there is none."""
    from returnn.tf import layers as _all  # noqa: F401  (fills the registry)
    from returnn.tf.layers.base import LAYER_CLASSES
    for layer_class, cls in sorted(LAYER_CLASSES.items()):
        if not layer_class.startswith("_") and name in (returnn_class_name(layer_class), cls.__name__):
            return cls
    return None
