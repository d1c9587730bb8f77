"""RETURNN config keys this engine does not read (names taken from RETURNN's config getters).

Two kinds: keys without effect here (other backends, debugging aids, tasks this engine refuses,
RETURNN internals) are accepted silently, each group with the reason the result is the same
(:func:`ignore`); keys that change what RETURNN does but are not implemented here are listed with
RETURNN's default (:func:`refuse`): that value (or None) is accepted, any other is refused at
start-up in one line naming the key (:func:`returnn.config_keys.values.check_values`). A key declared
in :mod:`returnn.config_keys.declarations` is read by the engine and never listed here.
"""
from __future__ import annotations

from returnn.config_keys.registry import ignore, refuse

ignore("""use_tensorflow backend device patch_atfork check_unsupported_device ipython
    use_hot_reloading web_server_port use_lovely_tensors EnableAutoNumpySharedMemPickling
    PYTORCH_CUDA_ALLOC_CONF __debug_dummy_distributed_rank_and_size""".split(),
       "RETURNN process set-up; no effect here")
ignore("""debug_add_check_numerics_ops debug_grad_summaries debug_save_updater_vars debug_shell_before_train_loop
    debug_shell_in_runner debug_shell_in_runner_step log_batch_size log_grad_norm tf_log_memory_usage
    torch_log_memory_usage watch_memory statistics statistics_dtype statistics_save_prefix
    store_metadata_mod_step store_tf_profile tensorboard_opts use_tensorboard analyze_dataset
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
ignore("""apply_cleanup_old_models_to_optim_states default_float_dtype epoch_end epoch_start
    forward_auto_split_batch_on_oom grad_clip grad_scaler load_model_post_hooks model_outputs online_shuffle_batches
    packed_batch_size packed_fallback_allowed packed_tensors sort_dataset stop_for_resubmission_safety_factor
    stop_for_resubmission_when_low_time_left tf_amp tf_jit""".split(),
       "read only by RETURNN's frontend engines (PyTorch, JAX, TF returnn-frontend); its TF layer engine, "
       "which this one re-implements, ignores it too")
ignore("""check_learning_rates data_key sil_label_idx extract""".split(),
       "read only by RETURNN tools and tasks this engine does not run (unknown tasks are refused); "
       "no effect on train, eval, forward or search")
ignore(["deterministic_train", "optimizer_use_locking"],
       "RETURNN's TF1 update details (gradient aggregation order, variable locking): the same updates "
       "(this engine: tf_deterministic)")
ignore(["search_do_eval"], "RETURNN also reports scores while searching; the hypotheses are the same")
ignore(["decouple_constraints_factor"], "used by RETURNN only with decouple_constraints, refused unless False")
ignore(["seq_drop_freq"], "used by RETURNN only with seq_drop, refused unless 0")
ignore(["dummy_dataset_num_seqs", "train_dummy_dataset_num_seqs"],
       "used by RETURNN only with use_dummy_datasets, refused unless False")
ignore(["output_per_seq_file_format", "output_per_seq_format"],
       "used by RETURNN only with eval_output_file_per_seq, refused unless None")

refuse({"decouple_constraints": False, "distributed_tf": None, "dynamic_learning_rate": None, "extra_updates": None,
        "global_norm_tag": None, "gradient_clip_global_norm_tag": None, "grad_norm_to_clip_to_zero": 0.0,
        "gradient_clip_avg_norm": 0.0, "gradient_nan_inf_filter": False, "horovod_avg_grad": False,
        "maximize_grad_norm": 0.0, "newbob_learning_rate_growth": 1.0, "learning_rate_growth": 1.0, "reinit_network_each_epoch": False,
        "reset_updater_vars_mod_step": 0, "update_batch_size": 0, "init_new_network_callback": None,
        "init_train_epoch_posthook": None, "search_train_network_layers": None, "save_epoch1_initial_model": False,
        "use_last_best_model": None, "startup_callback": None, "dry_run": False},
       "RETURNN training option not implemented by this engine")
refuse({"context_window": None, "exclude": None, "inc_seq_length": 0, "max_pad_size": None, "min_seq_length": 0,
        "seq_drop": 0.0, "share_batches": False, "shuffle_batches": False, "shuffle_frames_of_nseqs": 0,
        "lm_dataset_debug_limit_line_count": None, "use_dummy_datasets": False, "start_batch": "auto"},
       "RETURNN data or batching option not implemented by this engine")
refuse({"default_input": "data", "inf_value": float("inf"), "onnx_export": False, "tf_native_ctc_zero_infinity": None,
        "ctc_prior_file": None, "enforce_min_len1": False},
       "RETURNN network option not implemented by this engine")
refuse({"allow_skipping_seqs_in_forward": False, "combine_labels": "", "epoch": None, "eval_output_file": None,
        "eval_output_file_per_seq": None, "eval_use_train_flag": None, "forward_callback": None, "forward_data": None,
        "forward_output_layer": None, "forward_override_hdf_output": False, "forward_use_search": False,
        "loss_name": None},
       "RETURNN eval/forward/search option not implemented by this engine")
