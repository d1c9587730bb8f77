"""RETURNN config keys this engine does not read (names taken from RETURNN's config getters).

Two kinds: keys without effect here (other backends, debugging aids, RETURNN internals) are
accepted silently; keys that change what RETURNN trains but are not implemented here give a
warning when a config sets them. A key declared in :mod:`returnn.config_keys.declarations` is
read by the engine and never listed here.
"""
from __future__ import annotations

from returnn.config_keys.registry import ignore

ignore("""use_tensorflow backend device patch_atfork check_unsupported_device ipython
    use_hot_reloading web_server_port use_lovely_tensors EnableAutoNumpySharedMemPickling
    PYTORCH_CUDA_ALLOC_CONF __debug_dummy_distributed_rank_and_size""".split(),
       "RETURNN process set-up; no effect here")
ignore("""debug_add_check_numerics_ops debug_grad_summaries debug_save_updater_vars debug_shell_before_train_loop
    debug_shell_in_runner debug_shell_in_runner_step log_batch_size log_grad_norm tf_log_memory_usage
    torch_log_memory_usage watch_memory statistics statistics_dtype statistics_save_prefix
    store_metadata_mod_step store_tf_profile tensorboard_opts use_tensorboard dry_run analyze_dataset
    log_format""".split(),
       "RETURNN debugging/diagnostics option; no effect here")
ignore("""torch_amp torch_batching torch_cuda_graph torch_dataloader_opts torch_distributed torch_profile
    jax_amp jax_compilation_cache_dir jax_data_prefetch jax_default_matmul_precision jax_jit jax_static_shapes
    jax_time_buckets rf_att_dropout_broadcast rf_batch_norm_distributed rf_conformer_conv_norm_use_mask
    rf_dropout_broadcast rf_module_output_keep_dtype rf_native_opt rf_packed_att_fast_paths rf_packed_warn_regap
    rf_scatter_use_fixed_masking rf_specaugment_num_masks_per_seq rf_use_consistent_same_padding
    get_model train_step forward_step dataset_pipeline""".split(),
       "option of RETURNN's PyTorch/JAX/returnn-frontend backends; no effect on this TensorFlow engine")
ignore("""sprint_interface_custom_dataset sprint_interface_dataset_opts sprint_trainer_exec_path
    SprintInterfacePythonFeatureScorer tf_data_provider_capacity tf_run_options tf_static_shapes
    use_train_proc_manager file_cache_opts reset_dev_memory_caches need_data""".split(),
       "RETURNN infrastructure option; no effect here")
ignore("""accum_grad_multiple_step allow_skipping_seqs_in_forward
    apply_cleanup_old_models_to_optim_states calculate_exp_loss check_learning_rates
    cleanup_old_models combine_labels context_window ctc_prior_file data_key decouple_constraints
    decouple_constraints_factor default_float_dtype default_input deterministic_train distributed_tf
    dummy_dataset_num_seqs dynamic_learning_rate enforce_min_len1 epoch epoch_end epoch_start
    eval_output_file eval_output_file_per_seq eval_use_train_flag exclude extra_updates extract
    forward_auto_split_batch_on_oom forward_callback forward_data forward_output_layer
    forward_override_hdf_output forward_use_search get_network global_norm_tag grad_clip grad_norm_to_clip_to_zero
    grad_scaler gradient_clip_avg_norm gradient_clip_global_norm_tag gradient_nan_inf_filter horovod_avg_grad
    inc_seq_length inf_value init_new_network_callback init_train_epoch_posthook
    learning_rate_control_min_num_epochs_per_new_lr lm_dataset_debug_limit_line_count load_model_post_hooks
    loss loss_name max_pad_size maximize_grad_norm min_seq_length model_outputs
    newbob_learning_rate_growth online_shuffle_batches onnx_export optimizer_use_locking
    output_per_seq_file_format output_per_seq_format packed_batch_size packed_fallback_allowed packed_tensors
    pretrain pretrain_construction_algo pretrain_copy_output_layer pretrain_greedy
    pretrain_learning_rate pretrain_repetitions reinit_network_each_epoch reset_updater_vars_mod_step
    save_epoch1_initial_model search_do_eval search_train_network_layers seq_drop seq_drop_freq share_batches shuffle_batches
    shuffle_frames_of_nseqs sil_label_idx sort_dataset start_batch start_epoch startup_callback
    stop_for_resubmission_safety_factor stop_for_resubmission_when_low_time_left target tf_amp tf_jit
    tf_native_ctc_zero_infinity train_dummy_dataset_num_seqs update_batch_size use_dummy_datasets
    use_last_best_model use_learning_rate_control_always window""".split(),
       "RETURNN option not implemented by this engine", supported=False)
