"""The options every layer takes (RETURNN's ``LayerBase`` arguments), declared once for :class:`returnn.tf.layers.base.Layer`
(which adds :data:`returnn.tf.layers.output_hooks.OPTIONS`)."""
from __future__ import annotations

from returnn.tf.layers.options import Option

BASE_OPTIONS = (
    Option("class", None, "layer class name"),
    Option("from", "data", "input layer name(s); 'data:KEY' for a data key"),
    Option("sources", None, "old name of 'from'"),
    Option("n_out", None, "output feature dim (checked or inferred from the target)"),
    Option("out_dim", None, "Dim of the output feature axis (instead of n_out)"),
    Option("dropout", 0.0, "dropout rate on the input, training only (inverted: scaled by 1/keep)"),
    Option("dropout_noise_shape", None, "{axis: None or 1}: 1 shares one dropout mask value along that axis; "
           "default: shared along every axis but the feature axis (RETURNN)"),
    Option("dropout_axis", None, "axis or axes (descriptions or Dims, no ints) along which the dropout mask "
                                 "varies; shared along all others (RETURNN; not with dropout_noise_shape)"),
    Option("dropout_on_forward", False, "True: the dropout applies also in evaluation, forward and search "
                                        "(RETURNN; a new mask each call there)"),
    Option("L2", 0.0, "adds L2 * sum(p ** 2) over all the layer's trainable parameters to the loss"),
    Option("updater_opts", None, "RETURNN's per-layer optimizer options for the layer's parameters: optimizer "
                                 "(dict, learning_rate_multiplier), accum_grad_multiple_step, gradient_noise, "
                                 "gradient_clip(_norm, _global_norm); see returnn/tf/updater_opts.py"),
    Option("trainable", True, "False: variables are not trained"),
    Option("target", None, "data key the loss compares to (default 'classes')"),
    Option("loss", None, "loss name: ce, mse, ctc"),
    Option("loss_opts", None, "options of the loss"),
    Option("loss_scale", 1.0, "factor of this loss in the total"),
    Option("is_output_layer", False, "output of the network (forward task)"),
    Option("initial_output", None, "a rec unit's layer: its value before the first step (the rec layer reads it)",
           noop="outside a rec unit nothing reads it (RETURNN stores it for rec loops only)"),
    Option("need_last", False, "a rec unit's layer: its last frame stays readable after the loop (the rec layer "
                               "reads it)", noop="outside a rec unit nothing reads it (RETURNN stores it for rec "
                                                 "loops only)"),
    Option("only_on_eval", False, "the layer is not built in the forward task, and its loss is computed in "
                                  "evaluation (dev/eval scores) but not in training steps"),
    Option("only_on_search", False, "the layer exists only in networks built for search (e.g. a decision "
                                    "with an edit_distance loss); training leaves it out"),
    Option("loss_only_on_non_search", False, "no loss where the layer is built for search (a search in "
                                             "training: search_train_network_layers, extra.search:)"),
    Option("size_target", None, "data key whose dims fill the output dims the layer leaves undefined (an "
                                "eval out_type shape), before the sources' (tasks but forward; "
                                "returnn/tf/layers/undefined_dims.py); the rec layer's loop length"),
    Option("register_as_extern_data", None, "data key under which the layer's output is readable as data "
                                            "('data:KEY') and as a loss target"),
    Option("name_scope", None, "RETURNN's variable scope of the layer's parameters: None (the layer's name), "
                               "'' (its network's), 'x' (x in its network), '/x' (absolute)"),
    Option("reuse_params", None, "parameters of other layers (a layer name, or a dict with 'reuse_layer', "
                                 "'map', 'custom', 'auto_create_missing'): see returnn/tf/layers/reuse.py"),
    Option("collocate_with", None, "RETURNN: place the layer's ops on the device of these layers",
           noop="device placement only; the computed values are the same"),
    Option("in_dim", None, "RETURNN (every layer): the input's feature dim, a Dim; here it must be the feature "
                           "(or sparse) dim of the input (classes with an own in_dim: see theirs)"),
    Option("param_device", None, "RETURNN (every layer): the device ('CPU', 'GPU') that holds the parameters",
           noop="a device placement only: the parameters and every value computed are the same"),
    Option("spatial_smoothing", 0.0, "adds s * (smoothing energy of the output over its real frames) to the "
                                     "training objective (returnn/tf/constraints.py)"),
    Option("darc1", 0.0, "adds d * max over features of the summed |pre-activation values| over real frames "
                         "to the training objective (DARC1; returnn/tf/constraints.py)"),
    Option("out_shape", None, "the output's dims (a set of Dims, batch included), checked as RETURNN does; it also "
                              "allows every source to be broadcast"),
    Option("out_type", None, "dict of the output's dim, shape, sparse, dtype: checked against what the layer "
                             "computes (a mismatch is an error); axis positions are layout only here"),
    Option("batch_norm", False, "True or a dict of batch_norm layer options: RETURNN's batch normalisation of "
                                "the layer's output (parameters under <layer>/batch_norm/)"),
    Option("param_variational_noise", None, "training only: the layer reads its parameters plus N(0, s) noise, "
                                            "one draw per step (None: the config key; param_noise.py)"),
    Option("param_dropout", None, "training only: inverted dropout on the layer's parameters, one mask per "
                                  "step (None: the config key; returnn/tf/layers/param_noise.py)"),
    Option("param_dropout_min_ndim", None, "param_dropout only on parameters of at least this many dims "
                                           "(None: the config key, default 0)"),
)
