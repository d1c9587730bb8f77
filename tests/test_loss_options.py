"""Loss options (``loss_opts``) with their RETURNN effect or refused in one line (the rule of
tests/test_option_audit.py), against numpy references."""
from __future__ import annotations

import numpy as np
import pytest

from data_utils import lo
from returnn.errors import NetworkError
from returnn.tf.losses import CrossEntropyLoss, CtcLoss, EditDistanceLoss, SamplingLoss


def _extreme():
    """Logits where the label's probability is far below 1e-20 in the first frame; the log-softmax."""
    logits = np.zeros((1, 2, 3), "float32")
    logits[0, 0] = [0.0, 0.0, 60.0]  # label 0: p = e^-60 / (2 + e^-60) ~ 1e-26
    out = lo(logits, [2])
    out.logits = out.tensor
    x = logits.astype("float64")
    top = x.max(-1, keepdims=True)
    log_p = x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))
    return out, lo(np.array([[0, 1]], "int32"), [2], dim=3, sparse=True), log_p


def test_ce_use_fused_false_and_safe_log_opts():
    """RETURNN: fused softmax cross entropy on the logits by default; use_fused False computes
    -safe_log(p_label) = -log(max(p, eps)), eps from safe_log_opts (default 1e-20)."""
    out, target, log_p = _extreme()
    fused = float(CrossEntropyLoss("o", {}, "classes").compute_btf(out, target).loss_sum)
    assert fused == pytest.approx(-log_p[0, 0, 0] - log_p[0, 1, 1], rel=1e-5)
    unfused = float(CrossEntropyLoss("o", {"use_fused": False}, "classes").compute_btf(out, target).loss_sum)
    assert unfused == pytest.approx(-np.log(1e-20) - log_p[0, 1, 1], rel=1e-5)
    eps = float(CrossEntropyLoss("o", {"use_fused": False, "safe_log_opts": {"eps": 1e-3}}, "classes")
                .compute_btf(out, target).loss_sum)
    assert eps == pytest.approx(-np.log(1e-3) - log_p[0, 1, 1], rel=1e-5)
    with pytest.raises(NetworkError, match="'o'.*safe_log_opts.*'nope'"):
        CrossEntropyLoss("o", {"safe_log_opts": {"nope": 1}}, "classes")


def test_sampling_loss_with_the_full_softmax():
    """RETURNN's sampling_loss with use_full_softmax: the cross entropy (sampling: tests/test_sampling_loss.py)."""
    out, target, _ = _extreme()
    with pytest.raises(NetworkError, match="'o'.*sampler_args must be a dict"):
        SamplingLoss("o", {"num_sampled": 3, "sampler_args": 1}, "classes")
    full = SamplingLoss("o", {"use_full_softmax": True, "num_sampled": 3}, "classes")
    assert float(full.compute_btf(out, target).loss_sum) == pytest.approx(
        float(CrossEntropyLoss("o", {}, "classes").compute_btf(out, target).loss_sum))


def test_refused_loss_option_values_are_one_line():
    with pytest.raises(NetworkError) as exc:
        CtcLoss("c", {"focal_loss_factor": 1.0}, "classes")
    assert "\n" not in str(exc.value) and "'c'" in str(exc.value) and "focal_loss_factor" in str(exc.value)
    CtcLoss("c", {"ctc_opts": {"ctc_merge_repeated": False}}, "classes")  # implemented (tests/test_losses.py)
    with pytest.raises(NetworkError, match="'c'.*ctc_opts.*merge_repeated"):
        CtcLoss("c", {"ctc_opts": {"merge_repeated": False}}, "classes")
    with pytest.raises(NetworkError, match="'c'.*logits_normalize need use_native"):  # RETURNN: TypeError
        CtcLoss("c", {"ctc_opts": {"logits_normalize": False}}, "classes")
    CtcLoss("c", {"use_native": True, "beam_width": 1, "ctc_opts": {"logits_normalize": False}}, "classes")
    with pytest.raises(NetworkError, match="'e'.*label_map"):
        EditDistanceLoss("e", {"label_map": {1: 2}}, "classes")
    EditDistanceLoss("e", {"ctc_decode": True}, "classes")  # implemented (tests/test_losses.py)


def test_layer_loss_scale_is_the_loss_scale_and_conflicts_are_refused():
    """RETURNN moves a layer's loss_scale into loss_opts scale (asserting equality when both are given):
    one factor in the objective, not two."""
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3},
                                                             "classes": {"dim": 4, "sparse": True}}}))
    net = {"output": {"class": "softmax", "loss": "ce", "n_out": 4, "loss_scale": 3.0, "loss_opts": {"scale": 3.0}}}
    info = TFNetwork(net, extern).losses[0]
    import tensorflow as tf
    from returnn.tf.losses import LossValues
    assert info.scale * float(info.loss.objective(LossValues(tf.constant(2.0), tf.constant(1.0)))) == 6.0
    net["output"]["loss_opts"] = {"scale": 2.0}
    with pytest.raises(NetworkError, match="'output': loss_scale and loss_opts scale differ"):
        TFNetwork(net, extern)


def test_remaining_returnn_losses_refuse_in_one_line():
    """deep_clustering: RETURNN's own fails on this TensorFlow; triplet_loss needs its margin; generic_ce
    with use_flatten_frames False (RETURNN indexes flattened frames by padded targets); the ctc loss's
    ctc_opts of the other CTC op (RETURNN: a TypeError)."""
    from returnn.tf.losses import get_loss_class
    with pytest.raises(NetworkError, match="'o'.*deep_clustering.*TensorFlow 2") as exc:
        get_loss_class("deep_clustering", "o")
    assert "\n" not in str(exc.value)
    with pytest.raises(NetworkError, match="'o'.*triplet_loss.*margin"):
        get_loss_class("triplet_loss", "o")("o", {}, "classes")
    get_loss_class("triplet_loss", "o")("o", {"margin": 0.5, "multi_view_training": True}, "classes")
    with pytest.raises(NetworkError, match="'o'.*generic_ce.*use_flatten_frames"):
        get_loss_class("generic_ce", "o")("o", {"use_flatten_frames": False}, "classes")
    with pytest.raises(NetworkError, match="'c'.*ignore_longer_outputs_than_inputs need use_native False"):
        CtcLoss("c", {"use_native": True, "beam_width": 1, "ctc_opts": {"ignore_longer_outputs_than_inputs": True}},
                "classes")
    with pytest.raises(NetworkError, match="'c'.*zero_infinity need use_native"):
        CtcLoss("c", {"ctc_opts": {"zero_infinity": True}}, "classes")
    with pytest.raises(NetworkError, match="'c'.*label_loop or ctc_merge_repeated"):
        CtcLoss("c", {"use_native": True, "beam_width": 1, "ctc_opts": {"label_loop": False,
                                                                         "ctc_merge_repeated": False}}, "classes")


def test_generic_ce_needs_an_elementwise_activation():
    """RETURNN's generic_ce reads the layer's activation input: a softmax is refused (not element-wise),
    a sigmoid linear layer trains (tests/test_returnn_losses.py: its values and gradient)."""
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}}))
    with pytest.raises(NetworkError, match="'output'.*generic_ce.*element-wise activation.*softmax"):
        TFNetwork({"output": {"class": "softmax", "from": "data", "n_out": 4, "loss": "generic_ce"}}, extern)
    TFNetwork({"output": {"class": "linear", "activation": "sigmoid", "from": "data", "n_out": 4,
                          "loss": "generic_ce"}}, extern)


def test_ce_label_smoothing_unfused_on_a_softmax_is_refused_as_returnn_fails():
    """RETURNN's unfused label smoothing reads the softmax's probabilities, which it does not keep for a
    softmax output (AssertionError in safe_log): refused in one line; on probabilities without logits it
    is computed."""
    out, target, log_p = _extreme()
    opts = {"label_smoothing": 0.1, "use_fused": False}
    with pytest.raises(NetworkError, match="'o'.*label_smoothing and use_fused False on a softmax fails in RETURNN"):
        CrossEntropyLoss("o", opts, "classes").compute_btf(out, target)
    probs = lo(np.exp(log_p).astype("float32"), [2])
    assert np.isfinite(float(CrossEntropyLoss("o", opts, "classes").compute_btf(probs, target).loss_sum))


@pytest.mark.parametrize("opts, given", [({"loss_scale": 0.01}, "loss_scale"), ({"loss": None, "loss_opts": {}}, "loss_opts"),
                                         ({"loss_scale": 1.0, "loss_opts": {"scale": 1.0}}, "loss_scale and loss_opts")])
def test_loss_scale_or_loss_opts_without_loss_refused(opts, given):
    """RETURNN's LayerBase.transform_config_dict asserts "loss not defined, do not set loss_scale" (or
    loss_opts) for a built layer without a loss (None values pass), since October 2018; before, they did
    nothing. With a behavior_version set (RETURNN of 2021 on) refused; without one (configs of the 2018 era:
    the published wmt2017 attention config's rec output with loss_scale 0.01) they still do nothing."""
    from returnn.config import Config
    from returnn.extern_data import extern_data_from_config
    from returnn.tf.network import TFNetwork
    from returnn.util.basic import BehaviorVersion
    extern = extern_data_from_config(Config({"extern_data": {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}}))
    previous = BehaviorVersion._forced
    try:
        BehaviorVersion.set(1)
        with pytest.raises(NetworkError, match="^layer 'output': %s without a loss" % given):
            TFNetwork({"output": {"class": "softmax", "n_out": 4, "from": "data", **opts}}, extern)
        TFNetwork({"output": {"class": "softmax", "n_out": 4, "from": "data", "loss_scale": None, "loss_opts": None}}, extern)
        BehaviorVersion.set(0)
        net = TFNetwork({"output": {"class": "softmax", "n_out": 4, "from": "data", **opts}}, extern)
    finally:
        BehaviorVersion.set(previous)
    assert not net.losses
