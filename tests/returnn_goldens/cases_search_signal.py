"""Golden cases of issue 27's search, loss, signal and misc layers (loaded by make_goldens.py): cond,
stft/istft and the multichannel STFTs, mel_filterbank, dct, complex conversions and projection,
noise estimation, signal masking, loss layers, edit distance, segmental and old attention layers,
twod_lstm.

Left out because RETURNN itself fails on them: ``alternating_real_to_complex`` and
``complex_to_alternating_real`` (its output placeholder has no static shape: "Mismatching shape"),
the ``blackman`` window (RETURNN imports scipy), ``batch_median_pooling`` (see
cases_misc_layers.py; split_concatenated_multichannel is there),
``gauss_window_attention`` with ``inner_size`` (RETURNN: "setting the shape is not allowed")."""
from make_goldens import case

SAMPLES = {"data": {"dim": 1}}
SAMPLES2 = {"data": {"dim": 2}}
LONG = {"data": [20, 13, 9]}
X6 = {"data": {"dim": 6}}
X9 = {"data": {"dim": 9}}


for threshold, which in ((5, "true"), (10, "false")):
    case("cond_%s_branch" % which, "cond", {
        "src": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
        "len": {"class": "length", "from": "data"},
        "max_len": {"class": "reduce", "mode": "max", "axes": "B", "from": "len"},
        "c": {"class": "compare", "from": "max_len", "kind": "greater", "value": threshold},
        "cond": {"class": "cond", "from": [], "condition": "c",
                 "true_layer": {"class": "subnetwork", "from": "src", "subnetwork": {
                     "lin": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
                     "output": {"class": "combine", "kind": "add", "from": ["data", "lin"]}}},
                 "false_layer": {"class": "linear", "activation": "relu", "n_out": 4, "from": "src"}},
        "output": {"class": "copy", "from": "cond"}},
        notes="the longest sequence has 7 frames: threshold 5 takes true_layer, 10 false_layer")

# --- STFTs and spectral maps
case("stft_fft16", "stft", {"output": {"class": "stft", "from": "data", "frame_shift": 4, "frame_size": 8,
                                       "fft_size": 16}}, extern=SAMPLES, lens=LONG)
case("istft_of_stft", "stft", {
    "stft": {"class": "stft", "from": "data", "frame_shift": 4, "frame_size": 8},
    "output": {"class": "istft", "from": "stft", "frame_shift": 4, "frame_size": 8}}, extern=SAMPLES, lens=LONG)
case("multichannel_stft", "stft", {
    "output": {"class": "multichannel_stft_layer", "from": "data", "frame_shift": 4, "frame_size": 8, "fft_size": 8,
               "nr_of_channels": 2}}, extern=SAMPLES2, lens=LONG)
case("multichannel_stft_ones_pad", "stft", {
    "output": {"class": "multichannel_stft_layer", "from": "data", "frame_shift": 3, "frame_size": 6, "fft_size": 8,
               "nr_of_channels": 2, "window": "ones", "pad_last_frame": True}}, extern=SAMPLES2, lens=LONG)
case("multichannel_multiresolution_stft", "stft", {
    "output": {"class": "multichannel_multiresolution_stft_layer", "from": "data", "frame_shift": 4,
               "frame_sizes": [8, 12], "fft_sizes": [8, 16], "nr_of_channels": 1}}, extern=SAMPLES, lens=LONG)
case("mel_filterbank", "spectral", {
    "output": {"class": "mel_filterbank", "from": "data", "fft_size": 16, "nr_of_filters": 4, "sampling_rate": 8000, "n_out": 4}},
    extern=X9)
case("mel_filterbank_fmin_fmax", "spectral", {
    "output": {"class": "mel_filterbank", "from": "data", "fft_size": 16, "nr_of_filters": 3, "sampling_rate": 16000,
               "f_min": 300, "f_max": 6000, "n_out": 3}}, extern=X9)
case("dct_type2", "spectral", {"output": {"class": "dct", "from": "data"}}, extern=X6)
case("dct_type3_ortho", "spectral", {"output": {"class": "dct", "from": "data", "type": 3, "norm": "ortho"}}, extern=X6)

# --- complex and channel layers
case("complex_linear_projection", "complex", {
    "output": {"class": "complex_linear_projection", "from": "data", "nr_of_filters": 4}}, extern=X6)
case("first_t_frames_noise_estimator", "complex", {
    "output": {"class": "first_t_frames_noise_estimator", "from": "data", "nr_of_frames": 2, "n_out": 6}}, extern=X6)
case("signal_masking", "complex", {
    "mask": {"class": "linear", "activation": "sigmoid", "n_out": 6, "from": "data"},
    "output": {"class": "signal_masking", "signal": "data", "mask": "mask", "from": [], "n_out": 6}}, extern=X6)

# --- losses and distances as layers
SPARSE6 = {"dim": 6, "sparse": True, "available_for_inference": True}
X5_C6 = {"data": {"dim": 5}, "classes": SPARSE6}
X5_L6 = {"data": {"dim": 5}, "labels": SPARSE6}
CTC_LENS = {"data": [7, 5, 3], "labels": [3, 2, 0]}
SM6 = {"class": "softmax", "from": "data", "n_out": 6}
case("loss_layer_ce", "loss_layer", {"sm": SM6, "output": {"class": "loss", "from": "sm", "loss_": "ce",
                                                           "target_": "classes"}}, extern=X5_C6)
case("loss_layer_ce_error", "loss_layer", {"sm": SM6, "output": {"class": "loss", "from": "sm", "loss_": "ce",
                                                                 "target_": "classes", "use_error": True}}, extern=X5_C6)
case("loss_layer_ce_label_smoothing", "loss_layer", {"sm": SM6, "output": {
    "class": "loss", "from": "sm", "loss_": "ce", "target_": "classes", "loss_opts_": {"label_smoothing": 0.1}}},
    extern=X5_C6)
case("sparse_softmax_ce_with_logits", "loss_layer", {
    "lin": {"class": "linear", "from": "data", "n_out": 6},
    "lin2": {"class": "linear", "from": "data", "n_out": 6},
    "am": {"class": "reduce", "mode": "argmax", "axes": "F", "from": "lin2"},
    "output": {"class": "sparse_softmax_cross_entropy_with_logits", "logits": "lin", "targets": "am"}})
for variant, extra in (("", {}), ("_max_approx", {"max_approx": True}), ("_rna", {"label_loop": False}),
                       ("_normalized_blank0", {"logits_normalized": True, "blank_index": 0})):
    net = {"lin": {"class": "linear", "from": "data", "n_out": 7},
           "output": dict({"class": "ctc_loss", "logits": "lin", "targets": "data:labels"}, **extra)}
    if extra.get("logits_normalized"):
        net["lin"]["activation"] = "log_softmax"
    case("ctc_loss" + variant, "loss_layer", net, extern=X5_L6, lens=CTC_LENS)
# RETURNN's native CTC: no alignment (2 frames, 3 labels) costs 0 (TensorFlow's: inf), an empty target the blanks
for variant, extra in (("", {}), ("_rna", {"label_loop": False})):
    case("ctc_loss_no_path" + variant, "loss_layer", {
        "lin": {"class": "linear", "from": "data", "n_out": 7},
        "output": dict({"class": "ctc_loss", "logits": "lin", "targets": "data:labels"}, **extra)},
        extern=X5_L6, lens={"data": [7, 5, 2], "labels": [3, 0, 3]})
# targets of as many classes as the logits: a label of the blank's class (the last) is an emission of it
case("ctc_loss_labels_of_blank_class", "loss_layer", {
    "lin": {"class": "linear", "from": "data", "n_out": 6},
    "output": {"class": "ctc_loss", "logits": "lin", "targets": "data:labels"}},
    extern=X5_L6, lens={"data": [7, 5, 4], "labels": [5, 4, 2]})
case("edit_distance_layer", "loss_layer", {
    "output": {"class": "edit_distance", "a": "data:classes", "b": "data:labels"}},
    extern={"classes": SPARSE6, "labels": SPARSE6},
    lens={"classes": [7, 4, 1], "labels": [5, 4, 0]})

# --- RETURNN's older attention layers in a rec loop
ENC = {"enc": {"class": "linear", "activation": "tanh", "n_out": 4, "from": "data"},
       "enc_ctx": {"class": "linear", "activation": None, "n_out": 3, "from": "data"}}
case("concat_attention_in_loop", "old_attention", dict(ENC, output={"class": "rec", "from": "data", "unit": {
    "q": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:att"]},
    "att": {"class": "concat_attention", "from": "q", "base": "base:enc", "base_ctx": "base:enc_ctx"},
    "output": {"class": "copy", "from": "att"}}}), lens={"data": [7, 5, 3]})
case("gauss_window_attention", "old_attention", dict(ENC, output={"class": "rec", "from": "data", "unit": {
    "dt": {"class": "linear", "activation": "2*sigmoid", "n_out": 1, "from": ["data:source", "prev:att"]},
    "t": {"class": "combine", "kind": "add", "n_out": 1, "from": ["prev:t", "dt"], "initial_output": -1},
    "att": {"class": "gauss_window_attention", "window_size": 4, "std": 1.5, "from": "t", "base": "base:enc"},
    "output": {"class": "copy", "from": "att"}}}), lens={"data": [7, 5, 3]})
