"""RETURNN's config keys, as data: every key RETURNN's source reads, and what this engine does with
the ones it does not read itself.

- :data:`RETURNN_SOURCE_KEYS`: every key RETURNN reads (its ``config.value/int/bool/float/typed_value/
  list/has/...`` calls and ``config.typed_dict`` look-ups, found by ``tools/returnn-config-keys.py
  RETURNN_PACKAGE_DIR``; ``--check`` compares), and :data:`RETURNN_OLD_KEYS`, keys of RETURNN's
  Theano-era configs that its demos still set but no RETURNN reads any more. Each one is declared
  (:mod:`returnn.config_keys.declarations`: the engine reads it) or in one of the groups below
  (tests/test_first_hour2.py checks), so no RETURNN key is taken for a config's own variable or a typo.
- :data:`IGNORED`: keys without effect here (other backends, debugging aids, tasks this engine
  refuses, RETURNN internals), accepted silently; each group says why the result is the same.
- :data:`REFUSED`: keys that change what RETURNN does but are not implemented here, with RETURNN's
  default: that value (or None) is accepted, any other is refused at start-up in one line naming the
  key (:func:`returnn.config_keys.values.check_values`).

A key declared in :mod:`returnn.config_keys.declarations` is read by the engine and never listed
in a group (the registry drops it from them).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

from returnn.config_keys.registry import ignore, refuse

RETURNN_SOURCE_KEYS = frozenset("""
    EnableAutoNumpySharedMemPickling PYTORCH_CUDA_ALLOC_CONF SprintInterfacePythonFeatureScorer
    __debug_dummy_distributed_rank_and_size accum_grad_multiple_step adadelta adagrad adam
    allow_random_model_init allow_skipping_seqs_in_forward analyze_dataset
    apply_cleanup_old_models_to_optim_states backend batch_size batch_size_dev batch_size_train batching
    behavior_version cache_size calculate_exp_loss check_learning_rates check_unsupported_device chunk_eval
    chunking chunking_variance cleanup_old_models combine_labels context_window conv_pad_seq_len_to_power
    ctc_prior_file data_key dataset_pipeline debug_add_check_numerics_on_output debug_add_check_numerics_ops
    debug_grad_summaries debug_objective_loss_summaries debug_print_layer_output
    debug_print_layer_output_shape debug_print_layer_output_template debug_rec_layer
    debug_runtime_sanity_checks debug_save_updater_vars debug_shell_before_train_loop debug_shell_in_runner
    debug_shell_in_runner_step debug_unnormalized_loss_summaries decouple_constraints
    decouple_constraints_factor default_float_dtype default_input deterministic_train dev device
    distributed_tf dry_run dummy_dataset_num_seqs dynamic_learning_rate enforce_min_len1 epoch epoch_end
    epoch_start eval eval_batch_size eval_datasets eval_learning_rate eval_output_file
    eval_output_file_per_seq eval_use_train_flag exclude extern_data extra_updates extract file_cache_opts
    flat_net_construction forward_auto_split_batch_on_oom forward_batch_size forward_callback forward_data
    forward_output_layer forward_override_hdf_output forward_step forward_use_search get_model get_network
    global_norm_tag grad_clip grad_norm_to_clip_to_zero grad_scaler gradient_clip gradient_clip_avg_norm
    gradient_clip_global_norm gradient_clip_global_norm_tag gradient_clip_norm gradient_nan_inf_filter
    gradient_noise horovod_avg_grad horovod_dataset_distribution horovod_param_sync_step
    horovod_param_sync_time_diff horovod_reduce_type horovod_scale_lr hyper_param_tuning
    import_model_train_epoch1 inc_seq_length inf_value init_new_network_callback init_train_epoch_posthook
    ipython jax_amp jax_compilation_cache_dir jax_data_prefetch jax_default_matmul_precision jax_jit
    jax_static_shapes jax_time_buckets learning_rate learning_rate_control learning_rate_control_error_measure
    learning_rate_control_min_num_epochs_per_new_lr learning_rate_control_relative_error_relative_lr
    learning_rate_decay learning_rate_file learning_rate_growth learning_rates
    lm_dataset_debug_limit_line_count load load_epoch load_ignore_missing_vars load_model_post_hooks log
    log_batch_size log_format log_grad_norm log_verbosity loss loss_name max_pad_size max_seq_length max_seqs
    max_total_num_seqs maximize_grad_norm min_chunk_size min_learning_rate min_seq_length model model_outputs
    momentum nadam need_data network newbob_error_threshold newbob_learning_rate_decay
    newbob_learning_rate_growth newbob_multi_num_epochs newbob_multi_update_interval
    newbob_relative_error_div_by_old newbob_relative_error_grow_threshold newbob_relative_error_threshold
    num_allowed_consec_invalid_gradient_steps num_epochs num_inputs num_outputs on_size_limit
    online_shuffle_batches onnx_export optimize_move_layers_out optimizer optimizer_epsilon
    optimizer_use_locking output_file output_per_seq_file_format output_per_seq_format packed_batch_size
    packed_fallback_allowed packed_tensors param_dropout param_dropout_min_ndim param_variational_noise
    patch_atfork preload_from_files pretrain pretrain_construction_algo pretrain_copy_output_layer
    pretrain_greedy pretrain_learning_rate pretrain_repetitions random_seed reinit_network_each_epoch
    reset_dev_memory_caches reset_updater_vars_mod_step restart_after_num_net_reinit rf_att_dropout_broadcast
    rf_batch_norm_distributed rf_conformer_conv_norm_use_mask rf_dropout_broadcast rf_module_output_keep_dtype
    rf_native_opt rf_packed_att_fast_paths rf_packed_warn_regap rf_scatter_use_fixed_masking
    rf_specaugment_num_masks_per_seq rf_use_consistent_same_padding rmsprop save_epoch1_initial_model
    save_interval search_data search_do_eval search_output_file search_output_file_format search_output_layer
    search_train_network_layers seq_drop seq_drop_freq share_batches shuffle_batches shuffle_frames_of_nseqs
    sil_label_idx sort_dataset sparse_input sprint_interface_custom_dataset sprint_interface_dataset_opts
    sprint_trainer_exec_path start_batch start_epoch startup_callback statistics statistics_dtype
    statistics_save_prefix stop_for_resubmission_safety_factor stop_for_resubmission_when_low_time_left
    stop_on_nonfinite_train_score store_metadata_mod_step store_tf_profile target task tensorboard_opts tf_amp
    tf_data_provider_capacity tf_jit tf_log_dir tf_log_memory_usage tf_native_ctc_zero_infinity tf_run_options
    tf_session_opts tf_static_shapes torch_amp torch_batching torch_cuda_graph torch_dataloader_opts
    torch_distributed torch_log_memory_usage torch_profile train train_dummy_dataset_num_seqs train_in_eval
    train_step update_batch_size use_dummy_datasets use_horovod use_hot_reloading use_last_best_model
    use_learning_rate_control_always use_lovely_tensors use_tensorboard use_tensorflow use_train_proc_manager
    watch_memory web_server_port window wrap_tf_session
""".split())

RETURNN_OLD_KEYS = frozenset("""truncation multiprocessing update_on_device reset_update_params update_multiple_models
    update_multiple_models_average_step""".split())

IGNORED: Tuple[Tuple[str, str], ...] = (
    ("RETURNN process set-up; no effect here",
     """use_tensorflow backend device patch_atfork check_unsupported_device ipython use_hot_reloading web_server_port
     use_lovely_tensors EnableAutoNumpySharedMemPickling PYTORCH_CUDA_ALLOC_CONF
     __debug_dummy_distributed_rank_and_size"""),
    ("RETURNN process management (a restart after so many network rebuilds, a workaround for TF1 memory "
     "leaks); no effect here", "restart_after_num_net_reinit"),
    ("RETURNN debugging/diagnostics option; no effect here",
     """debug_add_check_numerics_ops debug_grad_summaries debug_save_updater_vars debug_shell_before_train_loop
     debug_shell_in_runner debug_shell_in_runner_step log_batch_size log_grad_norm tf_log_memory_usage
     torch_log_memory_usage watch_memory statistics statistics_dtype statistics_save_prefix
     store_metadata_mod_step store_tf_profile tensorboard_opts use_tensorboard analyze_dataset log_format
     debug_add_check_numerics_on_output debug_objective_loss_summaries
     debug_print_layer_output_template debug_rec_layer debug_runtime_sanity_checks
     debug_unnormalized_loss_summaries wrap_tf_session"""),
    ("how RETURNN's TF graph is constructed (flat construction, rec move-out optimisation); the same results",
     "flat_net_construction optimize_move_layers_out"),
    ("option of RETURNN's PyTorch/JAX/returnn-frontend backends; no effect on this TensorFlow engine",
     """torch_amp torch_batching torch_cuda_graph torch_dataloader_opts torch_distributed torch_profile
     jax_amp jax_compilation_cache_dir jax_data_prefetch jax_default_matmul_precision jax_jit jax_static_shapes
     jax_time_buckets rf_att_dropout_broadcast rf_batch_norm_distributed rf_conformer_conv_norm_use_mask
     rf_dropout_broadcast rf_module_output_keep_dtype rf_native_opt rf_packed_att_fast_paths rf_packed_warn_regap
     rf_scatter_use_fixed_masking rf_specaugment_num_masks_per_seq rf_use_consistent_same_padding
     get_model train_step forward_step dataset_pipeline batch_size_train batch_size_dev
     num_allowed_consec_invalid_gradient_steps"""),
    ("RETURNN infrastructure option; no effect here",
     """sprint_interface_custom_dataset sprint_interface_dataset_opts sprint_trainer_exec_path
     SprintInterfacePythonFeatureScorer tf_data_provider_capacity tf_run_options tf_static_shapes
     use_train_proc_manager file_cache_opts reset_dev_memory_caches need_data"""),
    ("read only by RETURNN's frontend engines (PyTorch, JAX, TF returnn-frontend); its TF layer engine, "
     "which this one re-implements, ignores it too",
     """apply_cleanup_old_models_to_optim_states default_float_dtype epoch_end epoch_start
     forward_auto_split_batch_on_oom grad_clip grad_scaler load_model_post_hooks model_outputs online_shuffle_batches
     packed_batch_size packed_fallback_allowed packed_tensors sort_dataset stop_for_resubmission_safety_factor
     stop_for_resubmission_when_low_time_left tf_amp tf_jit max_total_num_seqs eval_batch_size"""),
    ("read only by RETURNN tools and tasks this engine does not run (unknown tasks are refused); "
     "no effect on train, eval, forward or search", "check_learning_rates data_key sil_label_idx extract "
     "hyper_param_tuning"),
    ("RETURNN's TF1 update details (gradient aggregation order, variable locking): the same updates "
     "(this engine: tf_deterministic)", "deterministic_train optimizer_use_locking"),
    ("RETURNN also reports scores while searching; the hypotheses are the same", "search_do_eval"),
    ("computed by RETURNN's Updater for decouple_constraints but not used by its update (var -= 2 * L2 * var); "
     "no effect there either", "decouple_constraints_factor"),
    ("read by RETURNN's TF engine and never used; no effect there either", "update_batch_size"),
    ("used by RETURNN only with use_dummy_datasets, refused unless False",
     "dummy_dataset_num_seqs train_dummy_dataset_num_seqs"),
    ("used by RETURNN only with eval_output_file_per_seq, refused unless None",
     "output_per_seq_file_format output_per_seq_format"),
    ("used by RETURNN only with train_in_eval, refused unless False", "eval_learning_rate"),
    ("key of RETURNN's Theano-era configs (its demos still set it); no RETURNN reads it any more",
     " ".join(sorted(RETURNN_OLD_KEYS))),
)

REFUSED: Tuple[Tuple[str, Dict[str, Any]], ...] = (
    ("RETURNN training option not implemented by this engine",
     {"distributed_tf": None, "extra_updates": None,
      "global_norm_tag": None, "gradient_clip_global_norm_tag": None,
      "init_new_network_callback": None, "init_train_epoch_posthook": None,
      "startup_callback": None, "dry_run": False}),
    ("RETURNN data or batching option not implemented by this engine",
     {"exclude": None,
      "share_batches": False, "shuffle_frames_of_nseqs": 0,
      "lm_dataset_debug_limit_line_count": None, "use_dummy_datasets": False, "start_batch": "auto"}),
    ("RETURNN network option not implemented by this engine",
     {"default_input": "data", "inf_value": float("inf"), "onnx_export": False,
      "ctc_prior_file": None, "enforce_min_len1": False}),
    ("RETURNN eval/forward/search option not implemented by this engine",
     {"allow_skipping_seqs_in_forward": False, "combine_labels": "", "epoch": None,
      "eval_output_file_per_seq": None, "eval_use_train_flag": None, "forward_callback": None, "forward_data": None,
      "forward_use_search": False,
      "loss_name": None, "train_in_eval": False}),
)

for _reason, _names in IGNORED:
    ignore(_names.split(), _reason)
for _reason, _defaults in REFUSED:
    refuse(_defaults, _reason)
