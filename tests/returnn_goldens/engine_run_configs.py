"""The configs of the whole-run comparisons with RETURNN (``engine_run_cases.py`` runs them): per
case a config body, Python text appended to ``engine_run_cases.COMMON`` (which reads the HDF data;
a body may define its own ``train``/``dev``/``extern_data``), and extra options of the train dataset.
Tiny dimensions, 2-4 epochs, no dropout (random)."""
from __future__ import annotations

from typing import Dict, Tuple

FF = """
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden", "target": "classes"},
}
"""
LSTM = """
network = {
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm", "target": "classes"},
}
"""
CTC = """
network = {
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "data"},
    "output": {"class": "softmax", "loss": "ctc", "from": "lstm", "target": "classes"},
}
"""

# a net grown by pretraining (hidden2 added in epoch 2), Adam: pretrain_grow and pretrain_listed_rates
PRETRAIN_GROW = """
network = {
    "hidden1": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["data"]},
    "hidden2": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["hidden1"],
                "forward_weights_init": 0.05},
    "output": {"class": "softmax", "loss": "ce", "from": ["hidden2"], "target": "classes"},
}
pretrain = "default"
pretrain_learning_rate = 0.005
num_epochs = 3
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rate = 0.01
"""

# name -> (data prefix ('' or 'ctc_'), extra options of the train dataset, config body)
CASES: Dict[str, Tuple[str, str, str]] = {
    # adam, newbob_multi_epoch with a dev set; batch_size/max_seqs split the epoch unevenly
    "ff_newbob": ("", "", FF + """
num_epochs = 3
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 1
newbob_relative_error_threshold = -0.99  # every improvement is too small: the rate decays each epoch
newbob_learning_rate_decay = 0.5
"""),
    # RETURNN's native LSTM both ways, trained on chunks (per key, min_chunk_size), long sequences dropped
    "lstm_chunking": ("", "", """
network = {
    "fw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data", "direction": 1},
    "bw": {"class": "rec", "unit": "nativelstm2", "n_out": 4, "from": "data", "direction": -1},
    "output": {"class": "softmax", "loss": "ce", "from": ["fw", "bw"], "target": "classes"},
}
num_epochs = 2
chunking = ({"data": 5, "classes": 5}, {"data": 4, "classes": 4})
min_chunk_size = 2
batch_size = 12
max_seqs = 3
max_seq_length = 11
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob"
"""),
    # gradients of 2 steps summed before each update, clipped (by the norm of the step's gradients).
    # behavior_version 15: before, RETURNN reads its step counter as a TF1 ref variable, whose read
    # races with the step's increment: which steps apply the sum varies from run to run there
    "accum_clip": ("", "", FF + """
behavior_version = 15
num_epochs = 3
batch_size = 50
max_seqs = 6
accum_grad_multiple_step = 2
gradient_clip_global_norm = 0.5
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 1
"""),
    # two sub-epochs per pass over the data, laplace ordering, per-value gradient clipping, SGD;
    # newbob over 2 sub-epochs each sub-epoch, on the dev error, relative to the old error and rate
    "partition_laplace": ("", ', "partition_epoch": 2, "seq_ordering": "laplace:.4"', FF + """
num_epochs = 4
batch_size = 40
max_seqs = 4
gradient_clip = 0.2
optimizer = {"class": "gradientdescent"}
learning_rate = 0.1
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 2
newbob_multi_update_interval = 1
newbob_relative_error_threshold = -0.5
learning_rate_control_relative_error_relative_lr = True
learning_rate_control_error_measure = "dev_error"
newbob_relative_error_div_by_old = True
"""),
    # random sequence order, three sub-epochs
    "partition_random": ("", ', "partition_epoch": 3, "seq_ordering": "random"', FF + """
num_epochs = 3
batch_size = 40
max_seqs = 4
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 3
"""),
    # CTC loss on label sequences (error: label error rate)
    "ctc": ("ctc_", "", CTC + """
num_epochs = 2
batch_size = 60
max_seqs = 4
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_multi_epoch"
newbob_multi_num_epochs = 1
"""),
    # a warmup list of learning rates with a constant control
    "constant_warmup": ("", "", FF + """
num_epochs = 3
batch_size = 80
max_seqs = 8
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rates = [0.002, 0.005]
learning_rate_control = "constant"
"""),
    # two losses (one scaled, one label-smoothed and normalized), L2 (not part of the scores),
    # perplexities, an eval dataset next to dev, newbob on the second loss
    "multi_loss_l2": ("", "", """
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data", "L2": 0.01},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden", "target": "classes",
               "loss_opts": {"label_smoothing": 0.1, "use_normalized_loss": True}},
    "aux": {"class": "softmax", "loss": "ce", "loss_scale": 0.5, "from": "data", "target": "classes"},
}
eval = {"class": "HDFDataset", "files": [train["files"][0]], "partition_epoch": 2}
num_epochs = 3
batch_size = 60
max_seqs = 6
calculate_exp_loss = True
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob"
learning_rate_control_error_measure = "dev_score_aux"
newbob_relative_error_threshold = -0.99
"""),
    # sequences longer than max_seq_length dropped, longest first, batches of a few frames, newbob_abs
    "seq_filter_sorted": ("", ', "seq_ordering": "sorted_reverse"', FF + """
num_epochs = 3
batch_size = 8
max_seqs = 3
max_seq_length = 10
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "newbob_abs"
newbob_error_threshold = 1.0
min_learning_rate = 0.004
"""),
    # the learning rate of each step a function of the global step
    "dyn_lr": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
dynamic_learning_rate = {"interval": 4, "decay": 0.8}
optimizer = {"class": "adam"}
learning_rate = 0.01
learning_rate_control = "constant"
"""),
    # L2 as weight decay before the update, Nadam
    "decouple_nadam": ("", "", """
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data", "L2": 0.05},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden", "target": "classes"},
}
num_epochs = 2
batch_size = 60
max_seqs = 6
decouple_constraints = True
optimizer = {"class": "nadam"}
learning_rate = 0.01
learning_rate_control = "constant"
"""),
    # sort_bin_shuffle ordering (random bins of sorted sequences)
    "sort_bin_shuffle": ("", ', "seq_ordering": "sort_bin_shuffle:.3"', FF + """
num_epochs = 2
batch_size = 40
max_seqs = 5
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # RETURNN's 12AX task (its generated data, dense one-hot) with a native LSTM on chunks
    "gen_12ax": ("", "", """
train = {"class": "Task12AXDataset", "num_seqs": 40}
dev = {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 2}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
network = {
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "lstm", "target": "classes"},
}
num_epochs = 2
chunking = "30:20"
batch_size = 200
max_seqs = 5
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # RETURNN's base-conversion task (binary -> octal), CTC, generated data in two sub-epochs
    "gen_baseconv": ("", "", """
train = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 40, "partition_epoch": 2, "input_base": 2,
         "output_base": 8, "min_input_seq_len": 4}
dev = {"class": "TaskNumberBaseConvertDataset", "num_seqs": 10, "fixed_random_seed": 2, "input_base": 2,
       "output_base": 8, "min_input_seq_len": 4}
extern_data = {"data": {"dim": 2, "sparse": True}, "classes": {"dim": 8, "sparse": True}}
network = {
    "emb": {"class": "linear", "activation": None, "n_out": 5, "from": "data"},
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "emb"},
    "output": {"class": "softmax", "loss": "ctc", "from": "lstm", "target": "classes"},
}
num_epochs = 2
batch_size = 100
max_seqs = 5
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # an encoder-decoder: rec sub-network with a choice layer (teacher-forced in training and dev),
    # targets with EOS registered as extern data
    "encdec": ("ctc_", "", """
network = {
    "enc": {"class": "rec", "unit": "nativelstm2", "from": "data", "n_out": 6},
    "enc_last": {"class": "get_last_hidden_state", "from": "enc", "n_out": 12},
    "target_with_eos_": {"class": "reinterpret_data", "from": "data:classes", "increase_sparse_dim": 1},
    "target_with_eos": {"class": "postfix_in_time", "postfix": 3, "from": "target_with_eos_",
                        "register_as_extern_data": "classes0"},
    "output": {"class": "rec", "from": [], "target": "classes0", "unit": {
        "embed": {"class": "linear", "activation": None, "from": "output", "n_out": 4},
        "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:embed", "base:enc_last"], "n_out": 6},
        "prob": {"class": "softmax", "from": "s", "target": "classes0", "loss": "ce"},
        "output": {"class": "choice", "from": "prob", "target": "classes0", "beam_size": 3},
        "end": {"class": "compare", "from": "output", "value": 3}}},
}
num_epochs = 2
batch_size = 60
max_seqs = 4
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # MetaDataset (random order with random_seed_offset, 2 sub-epochs), a second eval dataset, RMSProp
    "meta_rmsprop": ("", "", FF + """
train = {"class": "MetaDataset", "data_map": {"data": ("a", "data"), "classes": ("a", "classes")},
         "datasets": {"a": {"class": "HDFDataset", "files": [train["files"][0]]}},
         "seq_ordering": "random", "partition_epoch": 2, "random_seed_offset": 5}
eval_datasets = {"devtrain": {"class": "HDFDataset", "files": [train["datasets"]["a"]["files"][0]]}}
num_epochs = 3
batch_size = 50
max_seqs = 5
optimizer = {"class": "rmsprop"}
learning_rate = 0.01
"""),
    # CombinedDataset of two files in random_dataset order, Nesterov momentum
    "momentum_combined": ("", "", FF + """
train = {"class": "CombinedDataset", "datasets": {"a": {"class": "HDFDataset", "files": [train["files"][0]]},
                                                  "b": {"class": "HDFDataset", "files": [dev["files"][0]]}},
         "data_map": {("a", "data"): "data", ("a", "classes"): "classes", ("b", "data"): "data",
                      ("b", "classes"): "classes"}, "seq_ordering": "random_dataset"}
num_epochs = 2
batch_size = 50
max_seqs = 5
optimizer = {"class": "momentum", "momentum": 0.9, "use_nesterov": True}
learning_rate = 0.01
"""),
    # CTC data filtered by the label length (max_seq_length per key) and min_seq_length
    "ctc_len_filter": ("ctc_", "", CTC + """
num_epochs = 2
batch_size = 60
max_seqs = 4
max_seq_length = {"classes": 5}
min_seq_length = 4
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # sorted order in 3 sub-epochs; newbob_multi_epoch with its default number of epochs
    "sorted_partition_multi": ("", ', "partition_epoch": 3, "seq_ordering": "sorted"', FF + """
num_epochs = 4
batch_size = 30
max_seqs = 4
optimizer = {"class": "adam"}
learning_rate = 0.05
learning_rate_control = "newbob_multi_epoch"
newbob_relative_error_threshold = 0.0
"""),
    # RETURNN's old top-level 'batching' (the train order) on generated 12AX data, 2 sub-epochs
    "gen_batching_random": ("", "", """
train = {"class": "Task12AXDataset", "num_seqs": 30, "partition_epoch": 2}
dev = {"class": "Task12AXDataset", "num_seqs": 8, "fixed_random_seed": 2}
extern_data = {"data": {"dim": 9}, "classes": {"dim": 2, "sparse": True}}
batching = "random"
network = {
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": ["data"]},
    "output": {"class": "softmax", "loss": "ce", "from": ["hidden"]},
}
num_epochs = 3
batch_size = 400
max_seqs = 8
adam = True
learning_rate = 0.01
"""),
    # a recurrent net on chunks in laplace order over 2 sub-epochs, 3 steps accumulated across epoch
    # ends, clipped by norm, zeroed above a global norm (behavior_version 15: see accum_clip)
    "rec_laplace_accum": ("", ', "partition_epoch": 2, "seq_ordering": "laplace:.3"', LSTM + """
behavior_version = 15
num_epochs = 3
chunking = "7:5"
batch_size = 25
max_seqs = 4
accum_grad_multiple_step = 3
gradient_clip_norm = 0.3
grad_norm_to_clip_to_zero = 50.0
optimizer = {"class": "adam"}
learning_rate = 0.02
learning_rate_control = "newbob_multi_epoch"
"""),
    # batch_size per data key, sort_bin_shuffle with a bin count, normalized CTC
    "ctc_batch_dict": ("ctc_", ', "seq_ordering": "sort_bin_shuffle:2"', """
network = {
    "lstm": {"class": "rec", "unit": "nativelstm2", "n_out": 6, "from": "data"},
    "output": {"class": "softmax", "from": "lstm", "target": "classes", "loss": "ctc",
               "loss_opts": {"use_normalized_loss": True}},
}
num_epochs = 2
batch_size = {"data": 40, "classes": 12}
max_seqs = 5
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # pretrain grows the net: epochs 1-2 are pretrain epochs (checkpoints <model>.pretrain.NNN, the initial
    # model <model>.pretrain.000), epoch 2 adds hidden2 (a constant init: the same in both engines) and
    # carries hidden1 and output over (copy_output_layer "ifpossible"); pretrain_learning_rate, then
    # learning_rate. Adam starts afresh with the new network
    "pretrain_grow": ("", "", PRETRAIN_GROW),
    # seq_drop on HDF data in the default order: RETURNN keeps the batch list (and its drops, drawn with epoch
    # 1's generator) until an epoch divisible by seq_drop_freq cuts anew (epoch 2, reused in epoch 3)
    "lstm_seq_drop": ("", "", LSTM + """
num_epochs = 3
seq_drop = 0.3
seq_drop_freq = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # seq_drop with chunks of varying size (random order: cut anew every epoch): one number of the epoch's
    # generator per sequence (chunk scale), then one per chunk within max_seq_length (the drop test)
    "chunk_seq_drop": ("", ', "seq_ordering": "random"', LSTM + """
num_epochs = 2
chunking = "6:3"
chunking_variance = 0.5
max_seq_length = 5
seq_drop = 0.25
batch_size = 30
max_seqs = 4
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # seq_drop with a frame-wise network: RETURNN's non-recurrent batching (frames packed) drops nothing
    "ff_seq_drop": ("", "", FF + """
num_epochs = 2
seq_drop = 0.5
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # get_network grows hidden from 4 to 8 units in epoch 2 with #copy_param_mode "subset": RETURNN copies the
    # trained leading block of hidden/W, hidden/b and proj/W into the new parameters, whose other entries keep
    # their initialisation (constant here, so the same in both engines; proj's constant rows are the same for
    # each proj unit, not for each class: output/W, copied whole, keeps the gradient into hidden non-zero)
    "getnet_subset": ("", "", """
def get_network(epoch, **kwargs):
    grown = {"forward_weights_init": 0.05, "bias_init": 0.1} if epoch >= 2 else {}
    net = {
        "hidden": dict({"class": "linear", "activation": "tanh", "n_out": 4 if epoch == 1 else 8, "from": "data"},
                       **grown),
        "proj": dict({"class": "linear", "activation": "tanh", "n_out": 4, "from": "hidden"}, **grown),
        "output": {"class": "softmax", "loss": "ce", "from": "proj", "target": "classes"},
    }
    if epoch >= 2:
        net["#copy_param_mode"] = "subset"
    return net
num_epochs = 3
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rate = 0.01
"""),
    # TensorFlow's v1 FtrlOptimizer as RETURNN runs it (class 'ftrl'), with l1/l2 and the V2 kernel's shrinkage
    "ftrl": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "ftrl", "l1_regularization_strength": 0.001, "l2_regularization_strength": 0.01,
             "l2_shrinkage_regularization_strength": 0.01}
learning_rate = 0.05
learning_rate_control = "constant"
"""),
    # the rarer optimizer classes RETURNN runs (returnn/tf/optimizers_extra.py): TF's v1 proximal ones with
    # l1/l2 on, RETURNN's own custom ones (epsilon: optimizer_epsilon where the class takes one)
    "opt_proximaladagrad": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "ProximalAdagradOptimizer", "initial_accumulator_value": 0.2,
             "l1_regularization_strength": 0.001, "l2_regularization_strength": 0.01}
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    "opt_proximalgradientdescent": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "proximalgradientdescent", "l1_regularization_strength": 0.002,
             "l2_regularization_strength": 0.05}
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    "opt_customgradientdescent": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "customgradientdescent"}
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    "opt_normalizedsgd": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "normalizedsgd"}
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    "opt_customadam": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "customadam", "beta1": 0.8}
learning_rate = 0.01
learning_rate_control = "constant"
"""),
    "opt_gradvariancescaled": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "gradvariancescaled", "beta2": 0.99}
optimizer_epsilon = 1e-8
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    "opt_neuraloptimizer1": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "NeuralOptimizer1", "decrease_factor": 0.2}
learning_rate = 0.1
learning_rate_control = "constant"
"""),
    # learning_rates lists epochs beyond num_epochs: RETURNN's learning-rate file holds every listed epoch
    # (its rate, no scores) from the first save on
    "lr_file_listed_epochs": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
learning_rates = [0.02, 0.01, 0.005, 0.0025]
learning_rate_control = "constant"
"""),
    # ... and with pretraining: RETURNN trains the pretrain epochs at pretrain_learning_rate and the first
    # one after them at learning_rate, while the file keeps the listed rates of those epochs
    "pretrain_listed_rates": ("", "", PRETRAIN_GROW + "learning_rates = [0.02, 0.03, 0.004, 0.001]\n"),
    # use_locking in the optimizer dict (every TF v1 class and RETURNN's custom ones take it): locking only
    "opt_use_locking": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "momentum", "momentum": 0.9, "use_locking": True}
learning_rate = 0.01
learning_rate_control = "constant"
"""),
    # TF's v1 Ftrl with beta (added to the l2 strength as beta / (2 * lr)) and its own slot names
    "ftrl_beta": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "ftrl", "beta": 0.5, "l2_regularization_strength": 0.01, "accum_name": "acc",
             "linear_name": "lin"}
learning_rate = 0.05
learning_rate_control = "constant"
"""),
    # reset_updater_vars_mod_step: RETURNN re-initialises every optimizer variable (slots, Adam's beta powers)
    # before steps 0, 4 of each epoch
    "reset_updater_adam": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "adam"}
reset_updater_vars_mod_step = 4
learning_rate = 0.01
learning_rate_control = "constant"
"""),
    "reset_updater_customadam": ("", "", FF + """
num_epochs = 2
batch_size = 60
max_seqs = 6
optimizer = {"class": "customadam", "beta1": 0.5}
reset_updater_vars_mod_step = 4
learning_rate = 0.01
learning_rate_control = "constant"
"""),
}
