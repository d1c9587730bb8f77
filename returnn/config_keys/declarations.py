"""Every config key the engine reads, declared once: name, type, default, one line of doc.

Add a key here, in its section, before reading it anywhere (tests/test_config_keys.py fails
otherwise). Read it without a default (``config.int("num_epochs")``): the getters take the default
from here. RETURNN keys this engine does not read are listed in :mod:`returnn.config_keys.returnn_keys`.
"""
from __future__ import annotations

from functools import partial

from returnn.config_keys.registry import declare

# ---- task
_task = partial(declare, group="task")
_task("task", "str", "train", "What to run: train, eval (scores of dev/eval sets), forward (network output to HDF) "
      "or search (beam search through rec sub-networks).")
_task("search_data", "dict|str", None, "task = search: the dataset to decode (a dataset dict or string; \"train\", "
      "\"dev\" or \"eval\": that dataset of the config, as in RETURNN); default: eval (RETURNN's).")
_task("search_output_layer", "str|list", None, "task = search: the layer whose labels are written (default: the "
      "output layer); a list of layers writes {tag: {layer: hypothesis}} (search_output_file_format 'py', as RETURNN).")
_task("search_output_file", "str", None, "task = search: file for each sequence's hypothesis (of a layer still with the "
      "beam: its hypotheses with their scores, as RETURNN).")
_task("search_output_file_format", "str", "txt", "task = search: 'txt' (one hypothesis a line, corpus order, no tag) "
      "or 'py' (a Python dict literal {tag: hypothesis}), as RETURNN.", choices=("txt", "py"))
_task("output_file", "str", None, "task = forward: the HDF file to write (default dump-fwd-epoch-N.hdf, as RETURNN).")
_task("eval_output_file", "str", None, "task = eval: file for the scores of every evaluated dataset (RETURNN's "
      "{dataset: {'score': {'cost:<layer>': v}, 'error': {...}}} text).")
_task("forward_output_layer", "str", None, "task = forward: the layer whose frames are written (default: the output "
      "layer).")
_task("forward_override_hdf_output", "bool", False, "task = forward: replace an existing output_file (else the task "
      "stops on it, as RETURNN).")
_task("load", "str", None, "Checkpoint to start from (a model prefix <model>.NNN, written here or by RETURNN); eval/forward/search: default the newest of 'model'; train without own checkpoints: its parameters, continuing with its epoch + 1 (RETURNN's); with a start_epoch, before own checkpoints, a new training from epoch 1 (RETURNN's).")
_task("load_epoch", "int", None, "Epoch of 'model' to load for eval/forward; default: the newest.")
_task("import_model_train_epoch1", "str", None, "task = train without own checkpoints: the parameters of this "
      "checkpoint (written here or by RETURNN) start epoch 1 (RETURNN's; the optimizer starts fresh).")
_task("allow_random_model_init", "bool", False, "eval/forward without any checkpoint: use randomly initialised parameters.")

# ---- data
_data = partial(declare, group="data")
_data("train", "dict|str", None, "Training dataset (a dict with 'class', as RETURNN).")
_data("dev", "dict|str", None, "Development dataset, scored after each epoch; drives newbob.")
_data("eval", "dict|str", None, "Evaluation dataset, scored after each epoch.")
_data("eval_datasets", "dict", None, "More datasets to score after each epoch: {name: dataset dict}.")
_data("extern_data", "dict", None, "Data description: {key: {'dim': D, 'sparse': bool, 'shape': ...}}.")
_data("num_inputs", "int", None, "Feature dimension of 'data' (old style; extern_data replaces it).", minimum=1)
_data("num_outputs", "int|dict|list", None, "Target dimensions (old style): int or [dim, ndim] (for the key 'target'), "
      "or {key: dim | [dim, ndim] | data options} (an int is sparse, dense for 'data', as RETURNN).")
_data("sparse_input", "bool", False, "With num_inputs: 'data' holds class indices (old style).")
_data("cache_size", "int|str|list", None, "Default cache_size of HDF datasets: 0 reads on demand, -1 loads all, else "
      "bytes ('512M', '1G'); RETURNN's list form gives train, dev, eval their own ('1G,1G,0').")
_data("target", "str", "classes", "Data key loss layers compare to unless they set 'target' (RETURNN's default target).")
_data("window", "int", 1, "Append each input frame's neighbours: 'data' gets window * dim features (RETURNN's).", minimum=1)
_data("batching", "str", None, "Default seq_ordering of the train dataset (RETURNN's global key).")

# ---- batching
_batch = partial(declare, group="batching")
_batch("batch_size", "int|dict", 1000, "Frames per batch (padded max length x sequences); RETURNN's {data key: frames} "
       "(or NumbersDict) limits those keys; > 0, as RETURNN requires.", minimum=1)
_batch("max_seqs", "int", -1, "Sequences per batch at most; -1: no limit (0 is refused, as RETURNN asserts).")
_batch("forward_batch_size", "int|dict", 0, "Frames per batch in task forward, which refuses 0 (unset) as RETURNN's "
       "('forward_batch_size not set'); hdf_dump layers in task eval: 0 means batch_size.", minimum=0)
_batch("chunking", "str|int|dict|list|callable", None, "Cut sequences into chunks: 'size:step', size, (size, step), "
       "per-key ({key: size}, {key: step}) (keys at other frame rates), or a chunking function (RETURNN's forms).")
_batch("min_chunk_size", "int|dict", 0, "Chunking: a chunk starts only where more than this many frames are left "
       "(RETURNN's; 0: at every step inside the sequence).")
_batch("chunking_variance", "float", 0.0, "Chunking: each sequence's chunk size and step scaled by 1 - r * x, "
       "r uniform in [0, 1) from the dataset's epoch seed (RETURNN's); 0: off.", minimum=0)
_batch("context_window", "int|dict|list", None, "Extra frames around each batch entry (sequence or chunk), zeros beyond "
       "the sequence: n adds n - 1 frames to 'data' ((n-1)//2 before), {key: n} per key, ({key: left}, {key: right}) "
       "directly (RETURNN's); frame-wise targets keep their length. A dataset's own option wins.")
_batch("chunk_eval", "bool", False, "Chunk dev/eval datasets with 'chunking' too (RETURNN's; they are not by default).")
_batch("on_size_limit", "str", "ignore", "RETURNN's: 'chunk' cuts dev/eval sequences into chunks of batch_size frames.")
_batch("max_seq_length", "int|float|dict", 0, "Training and the 'dev' set (RETURNN's): skip sequences (chunks, when "
       "chunking) longer than this: int for every key, negative for 'classes', or {key: length}; 0: no limit. Other "
       "scored sets, forward and search keep every sequence.")
_batch("inc_seq_length", "int|float", 0, "Training: an int max_seq_length grows by this int before each train epoch "
       "(epoch e: max_seq_length + e * this; the dev set keeps the limit its batches were first cut with while its "
       "order stays); a float, or a float or dict max_seq_length, changes nothing (RETURNN's).")
_batch("min_seq_length", "int|float|dict", 0, "Training: skip sequences (chunks, when chunking) shorter than this in "
       "some key: int for every key, or {key: length}; 0: no limit (RETURNN's).")
_batch("max_pad_size", "int|dict", None, "Training: a batch ends before an entry that would make its padded frames "
       "(longest x entries - real frames) exceed this, per key (RETURNN's); None: no limit.")
_batch("seq_drop", "float", 0.0, "Training, networks with a recurrent layer: leave out each sequence (chunk, when "
       "chunking) that passed the length limits with this probability, drawn from the dataset's epoch generator "
       "(RETURNN's); a kept HDFDataset batch list keeps its drops until an epoch divisible by seq_drop_freq; 0: off.")
_batch("seq_drop_freq", "float", 10.0, "With seq_drop: every epoch divisible by this the train batches are cut anew "
       "(new drops) even when the order stays the same (RETURNN's); 0 is refused (RETURNN divides by it).")
_batch("shuffle_batches", "bool", False, "Training on an HDFDataset whose order stays the same as the epoch before: "
       "the kept batch list in a shuffled order (RETURNN's: not in the list's first epoch); no effect otherwise.")
_batch("prefetch_batches", "int", 8, "Batches prepared ahead by the background thread.", minimum=1)

# ---- network
_net = partial(declare, group="network")
_net("network", "dict", None, "The layer dict: {name: {'class': ..., 'from': ..., ...}}.")
_net("hidden_size", "int|list|str", None, "Old network description (no 'network'): sizes of a chain of hidden layers.")
_net("hidden_type", "str|list", None, "Old network description: layer class per hidden layer (default 'forward').")
_net("hidden_name", "str|list", None, "Old network description: names of the hidden layers (default hidden_<i>).")
_net("activation", "str|list", None, "Old network description: activation per hidden layer (last repeated).")
_net("dropout", "float|list|str", None, "Old network description: dropout per hidden layer and the output.")
_net("L2_reg", "float", 0.0, "Old network description: L2 of every layer.")
_net("loss", "str", "ce", "Old network description: loss of the output layer.")
_net("bidirectional", "bool", False, "Old network description: forward and backward chains (only non-recurrent here).")
_net("forward_weights_init", "str|float", None, "Old network description: forward_weights_init of every layer.")
_net("bias_init", "str|float", None, "Old network description: bias_init of every layer.")
_net("behavior_version", "int", 0, "RETURNN's behavior version: layer defaults RETURNN changed with it (batch_norm from 12).")
_net("tf_native_ctc_zero_infinity", "bool", None, "RETURNN's native CTC (the ctc_loss layer, the ctc loss with "
     "use_native): a sequence without an alignment costs 0 with no gradient (default: behavior_version >= 30; "
     "else 0 with the error signal softmax(logits), the best path inf).")
_net("conv_pad_seq_len_to_power", "float", None, "RETURNN pads conv inputs' dynamic axes to a power of this (graph "
     "caching): the same results, except with strides and padding 'same' there (refused: the windows follow the "
     "padded length).")
_net("debug_print_layer_output", "bool|dict", False, "Every layer (without its own option of that name) prints its "
     "name and output values whenever computed: True or {'summarize': n} (RETURNN; default summarize 10).")
_net("debug_print_layer_output_shape", "bool", False, "Every layer prints its name, template and output shape "
     "whenever computed (RETURNN).")
_net("param_variational_noise", "float", 0.0, "RETURNN's weight noise for every layer without its own option: in "
     "training each layer reads its parameters plus N(0, this) noise, one draw per step (returnn/tf/layers/"
     "param_noise.py).", minimum=0)
_net("param_dropout", "float", 0.0, "RETURNN's weight dropout for every layer without its own option: in training "
     "each layer reads its parameters with inverted dropout of this rate, one mask per step.", minimum=0)
_net("param_dropout_min_ndim", "int", 0, "param_dropout only on parameters of at least this many dims (RETURNN's "
     "layout; 2: not on biases), for every layer without its own option.")
_net("pretrain", "bool|str|dict", None, "Layer-wise pretraining: 'default', True or an options dict (RETURNN's).")
_net("pretrain_repetitions", "int|list|dict", None, "Old style: pretrain 'repetitions' (the pretrain dict wins).")
_net("pretrain_construction_algo", "str", None, "Old style: pretrain 'construction_algo' (read as a string, as RETURNN reads it; a function goes into the pretrain dict).")
_net("pretrain_copy_output_layer", "bool|str", None, "Old style: pretrain 'copy_output_layer'.")
_net("pretrain_greedy", "bool", None, "Old style: pretrain 'greedy' (not supported: an error when true).")
_net("get_network", "callable", None, "get_network(epoch, **kwargs) -> net dict, called every epoch (instead of 'network').")
_net("random_seed", "int", 42, "Seed for parameter initialisation, dropout and dataset shuffling.")

# ---- training
_train = partial(declare, group="training")
_train("num_epochs", "int", 5, "Epochs to train.", minimum=0)
_train("stop_on_nonfinite_train_score", "bool", True, "Stop when the training score is inf/nan (keeps the last good checkpoint).")
_train("gradient_clip", "float", 0.0, "Clip each gradient element to [-x, x]; 0: off.", minimum=0)
_train("gradient_clip_norm", "float", 0.0, "Clip each gradient tensor to this L2 norm; 0: off.", minimum=0)
_train("gradient_clip_global_norm", "float", 0.0, "Clip all gradients together to this global L2 norm; 0: off.", minimum=0)
_train("search_train_network_layers", "list|str", None, "Layers also built for beam search in the training network "
       "(RETURNN's extra net 'extra.search', parameters shared, with all they read), run in each training and "
       "evaluation step; their losses count.")
_train("accum_grad_multiple_step", "int", 0, "Sum gradients over N steps and apply them every N-th step (RETURNN's).", minimum=0)
_train("reinit_network_each_epoch", "bool", False, "Build network and optimizer anew at the start of each epoch, the "
       "parameters carried over (RETURNN's init_new_network): the optimizer's state (slots, accumulated gradients) "
       "starts fresh every epoch.")
_train("calculate_exp_loss", "bool", False, "Also report exp(score) (perplexity) as score:exp.")
_train("gradient_noise", "float", 0.0, "Stddev of the truncated normal noise added to each gradient (values beyond 2 "
       "stddev redrawn, RETURNN's tf.truncated_normal); 0: off.", minimum=0)
_train("gradient_clip_avg_norm", "float", 0.0, "Scale each gradient tensor to an average L2 norm (norm / number of "
       "entries) of at most this (RETURNN's clip_by_average_norm); 0: off.", minimum=0)
_train("gradient_nan_inf_filter", "bool", False, "Set NaN and +-inf gradient entries to 0 before the update (RETURNN's; "
       "in an embedding's sparse gradient RETURNN makes +-inf +-1e30, here too).")
_train("grad_norm_to_clip_to_zero", "float", 0.0, "Skip the step's gradients (all set to 0) when their global norm is "
       "above this or not finite (RETURNN's); 0: off.", minimum=0)
_train("maximize_grad_norm", "float", 0.0, "Add f * the gradient of -(global gradient norm) to the gradients (RETURNN's: "
       "a second-order term); 0: off.")
_train("decouple_constraints", "bool", False, "L2 of a layer as decoupled weight decay: each step p -= 2 * L2 * p before "
       "the optimizer's update, instead of the L2 term in the loss (RETURNN's, AdamW-like).")
_train("use_last_best_model", "bool|dict", None, "At an epoch start, continue from the best recent epoch's model if the "
       "last one is worse (the optimizer starts fresh): True or {'modulo', 'filter_score', 'only_last_n', "
       "'min_score_dist', 'only_last_epochs', 'first_epoch'} (RETURNN's).")
_train("reset_updater_vars_mod_step", "int", 0, "Reset the optimizer's state (slots, update count, accumulated "
       "gradients) before every N-th step of an epoch, counted from its first (RETURNN's); 0: off.", minimum=0)

# ---- optimizer
_opt = partial(declare, group="optimizer")
_opt("optimizer", "dict|str", None, "{'class': 'adam' | 'nadam' | 'sgd' | 'momentum' | 'rmsprop' | 'adadelta' | "
     "'adagrad' | 'ftrl' | 'proximaladagrad' | 'proximalgradientdescent' | 'customadam' | ... (README's list), "
     "...options, 'learning_rate_multiplier': x}.")
_opt("adam", "bool", False, "Old style: use Adam (when 'optimizer' is not set).")
_opt("nadam", "bool", False, "Old style: use Nadam.")
_opt("rmsprop", "bool|float", False, "Old style: use RMSProp (a number is its decay).")
_opt("adadelta", "bool", False, "Old style: use Adadelta.")
_opt("adagrad", "bool", False, "Old style: use Adagrad.")
_opt("momentum", "bool|float", False, "Old style: SGD with momentum (a number is the momentum); also the momentum "
     "of RMSProp.")
_opt("optimizer_epsilon", "float", 1e-16, "Epsilon of Adam-like optimizers (RETURNN's default).")

# ---- learning rate
_lr = partial(declare, group="learning rate")
_lr("learning_rate", "float", 1.0, "Initial learning rate.", minimum=0)
_lr("learning_rates", "list|dict", None, "Rates for the first epochs: [lr1, lr2, ...] or {epoch: lr}.")
_lr("learning_rate_control", "str", "constant", "constant, newbob, newbob_abs or newbob_multi_epoch.",
    choices=("constant", "newbob", "newbob_rel", "newbob_relative", "newbob_abs", "newbob_multi_epoch"))
_lr("learning_rate_file", "str", None, "File of per-epoch rates and scores (RETURNN's format); read on resume.")
_lr("min_learning_rate", "float", 0.0, "The rate never goes below this.", minimum=0)
_lr("learning_rate_control_error_measure", "str|list", None, "Score newbob watches (a list: the first one an epoch "
    "has); default: the first dev score.")
_lr("learning_rate_control_relative_error_relative_lr", "bool", False, "Scale the relative error by the rate ratio.")
_lr("newbob_learning_rate_decay", "float|callable", 0.5, "Factor applied to the rate when newbob decays it (or a "
    "function lr -> new lr).", minimum=0)
_lr("learning_rate_decay", "float|callable", None, "RETURNN's newer name of newbob_learning_rate_decay (wins when set).",
    minimum=0)
_lr("newbob_relative_error_threshold", "float", -0.01, "newbob: decay when the relative improvement is above this.")
_lr("newbob_error_threshold", "float", -0.01, "newbob_abs: decay when the absolute improvement is above this.")
_lr("newbob_relative_error_div_by_old", "bool", False, "Relative error divided by the old score instead of the new.")
_lr("newbob_multi_num_epochs", "int", 5, "newbob_multi_epoch: sub-epochs averaged per decision.", minimum=1)
_lr("learning_rate_control_min_num_epochs_per_new_lr", "int", 0, "Keep a new rate at least this many epochs.", minimum=0)
_lr("pretrain_learning_rate", "float", None, "Rate of pretrain epochs; default: learning_rate.", minimum=0)
_lr("use_learning_rate_control_always", "bool", False, "Let the control choose the rate in pretrain epochs too.")
_lr("dynamic_learning_rate", "callable|dict", None, "The rate of each step: a function (network, global_train_step, "
    "learning_rate, **kwargs) -> rate of TF ops, global_train_step the step's number from 0 and learning_rate the "
    "epoch's (e.g. Noam warm-up), or {'interval': N, 'decay': d}: rate * d ** (step mod N) (RETURNN's).")
_lr("learning_rate_growth", "float|callable", None, "Newbob: factor (or function lr -> new lr) applied to the rate when "
    "it is not decayed (RETURNN's; newbob_multi_epoch: when the mean relative error is below "
    "newbob_relative_error_grow_threshold); default: newbob_learning_rate_growth.", minimum=0)
_lr("newbob_learning_rate_growth", "float|callable", 1.0, "RETURNN's older name of learning_rate_growth.", minimum=0)
_lr("newbob_relative_error_grow_threshold", "float", None, "newbob_multi_epoch: grow the rate when the mean relative "
    "error is below this; default: newbob_relative_error_threshold.")
_lr("newbob_multi_update_interval", "int", None, "newbob_multi_epoch: epochs between decisions; default: newbob_multi_num_epochs.", minimum=1)

# ---- checkpoints
_ckpt = partial(declare, group="checkpoints")
_ckpt("model", "str", None, "Checkpoint prefix: <model>.NNN per epoch; re-running resumes from the newest.")
_ckpt("start_epoch", "int|str", "auto", "auto: resume from the newest checkpoint; N: continue after <model>.N-1 (1: from "
      "scratch); with 'load', whatever N: a new training from epoch 1 with its parameters (RETURNN's).")
_ckpt("load_ignore_missing_vars", "bool", False, "Restoring: parameters the checkpoint lacks keep their initialisation, layers only in the checkpoint are left out (a warning each).")
_ckpt("preload_from_files", "dict", None, "Parameters from other checkpoints: {name: {'filename': ..., 'init_for_train': bool, 'prefix', 'ignore_missing', 'ignore_params', 'ignore_params_prefixes', 'var_name_mapping'}} (RETURNN's).")
_ckpt("cleanup_old_models", "bool|dict|list", None, "Delete old epoch checkpoints: True or {'keep_last_n', 'keep_best_n', "
      "'keep'}; any other true value (e.g. a dict in a tuple by a stray comma) means True, as RETURNN reads it.")
_ckpt("save_interval", "int", 1, "Save a checkpoint every N epochs (and always the last).", minimum=1)
_ckpt("save_epoch1_initial_model", "bool", False, "Before epoch 1, save the initial parameters as <model>.000 (RETURNN's; "
      "<model>.pretrain.000 when epoch 1 is a pretrain epoch; never resumed from nor cleaned up).")

# ---- logging
_log = partial(declare, group="logging")
_log("log", "str|list", None, "Log file(s); rank R of N writes <base>.horovod-R-N<ext>.")
_log("log_verbosity", "int|list", 3, "0-5: how much is printed (docs/running.md lists what each level shows); 6 also "
                                "shows the traceback behind a one-line input error.", minimum=0)
_log("progress_interval", "float", 10.0, "Seconds between progress lines (log_verbosity >= 4, no terminal).", minimum=0)
_log("tf_log_dir", "str", None, "TensorBoard directory; default: tf-log next to 'model'; None disables.")
_log("tf_log_step_interval", "int", 10, "Write training summaries every N steps.", minimum=1)

# ---- tensorflow
_tf = partial(declare, group="tensorflow")
_tf("tf_session_opts", "dict", None, "{'intra_op_parallelism_threads': N, 'inter_op_parallelism_threads': M}.")
_tf("tf_intra_op_threads", "int", 0, "TF intra-op threads (0: TF's choice); tf_session_opts wins.")
_tf("tf_inter_op_threads", "int", 0, "TF inter-op threads (0: TF's choice); tf_session_opts wins.")
_tf("tf_deterministic", "bool", False, "Deterministic TF ops (slower; same results run to run).")

# ---- distributed
_dist = partial(declare, group="distributed")
_dist("use_horovod", "bool", False, "Train on all ranks of the MPI job (data parallel).")
_dist("distributed_backend", "str", None, "horovod or mpi (mpi4py); default: Horovod when installed, else mpi.",
      choices=("horovod", "mpi"))
_dist("horovod_reduce_type", "str", "grad", "grad: sum gradients every step; param: average parameters now and then.",
      choices=("grad", "param"))
_dist("horovod_param_sync_step", "int", 1, "param: average parameters every N steps.", minimum=1)
_dist("horovod_param_sync_time_diff", "float", None, "param: average parameters every N seconds instead.", minimum=0)
_dist("horovod_scale_lr", "bool", False, "Multiply the learning rate by the number of ranks (RETURNN's lr * hvd.size()).")
_dist("horovod_avg_grad", "bool", False, "grad: average the gradients over ranks instead of summing them (RETURNN's).")
_dist("horovod_dataset_distribution", "str", "shard", "shard: batch i to rank i mod N; random_seed_offset: own order per "
      "rank.", choices=("shard", "random_seed_offset"))
_dist("horovod_stall_timeout", "float", 300.0, "Seconds without progress after which a rank gives up.", minimum=0)
_dist("horovod_timeline", "str", None, "Write Horovod's timeline to this file.")
_dist("horovod_cycle_time", "float", None, "Horovod cycle time in ms (default here: 2).")
_dist("horovod_fusion_threshold", "int", None, "Horovod tensor fusion buffer in bytes.")
_dist("horovod_autotune", "bool", None, "Horovod's autotuning of cycle time and fusion.")
