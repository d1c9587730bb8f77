#!/usr/bin/env python3
"""Training config keys against the real RETURNN: one key of a whole-run case changed, both engines trained.

Usage: python benchmarks/returnn_fuzz_engine.py [--seed S] [--n N] [--bases ff_newbob ...] [--keys K ...] [--show]
       [--returnn-venv PATH]

A draw takes one of the whole-run cases of ``tests/returnn_goldens/engine_run_configs.py`` (both engines
agree on each) and appends one assignment of a training key (optimizer, gradient clipping and
accumulation, learning-rate control and its newbob options, batches, constraints, ...; a key
``train:OPT`` sets the option OPT of the train dataset) from :data:`MUTATIONS`, so what differs is that
key's effect. RETURNN trains first and saves its initial
parameters; this engine trains from them (``engine_run_cases.run_ours``). Verdicts per draw:

- AGREE: both trained, the same steps, learning rates, scores and final parameters
  (``engine_run_cases.compare``);
- DIFFER: both trained, the numbers differ (an option with another effect here: the worst case);
- GAP: RETURNN trained, this engine refused (a one-line exit 2) or crashed (CRASH: any other exit);
- LAX: this engine trained, RETURNN failed;
- BOTH-FAIL: neither trained.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "returnn_goldens"))
import engine_run_cases as cases  # noqa: E402

# key -> the values a draw assigns (Python source text); no random effects (dropout, noise)
MUTATIONS: Dict[str, List[str]] = {
    "optimizer": ['{"class": "adam"}', '{"class": "nadam"}', '{"class": "rmsprop"}', '{"class": "adagrad"}',
                  '{"class": "adadelta"}', '{"class": "gradientdescent"}', '{"class": "momentum", "momentum": 0.9}',
                  '{"class": "adam", "beta1": 0.8, "epsilon": 1e-3}', '{"class": "adamw", "weight_decay": 0.01}',
                  '{"class": "rmsprop", "decay": 0.5, "momentum": 0.3}', '{"class": "adam", "amsgrad": True}',
                  '{"class": "adagrad", "initial_accumulator_value": 0.5}', '{"class": "nadam", "beta2": 0.9}',
                  '{"class": "ftrl"}', '{"class": "proximaladagrad"}', '{"class": "adam", "use_locking": True}',
                  # the classes of 005b028 and later, with their options
                  '{"class": "proximaladagrad", "initial_accumulator_value": 0.5, "l2_regularization_strength": 0.01}',
                  '{"class": "ProximalGradientDescentOptimizer", "l1_regularization_strength": 0.01}',
                  '{"class": "proximalgradientdescent", "l2_regularization_strength": 0.1, "use_locking": True}',
                  '{"class": "customadam"}', '{"class": "CustomAdamOptimizer", "beta1": 0.5, "beta2": 0.9}',
                  '{"class": "customgradientdescent"}', '{"class": "normalizedsgd"}',
                  '{"class": "gradvariancescaled"}', '{"class": "GradVarianceScaledOptimizer", "beta1": 0.5}',
                  '{"class": "neuraloptimizer1"}', '{"class": "neuraloptimizer1", "decrease_factor": 0.5}',
                  '{"class": "ftrl", "beta": 0.5, "l1_regularization_strength": 0.01}',
                  '{"class": "ftrl", "l2_regularization_strength": 0.1, "learning_rate_power": -0.3}',
                  '{"class": "ftrl", "initial_accumulator_value": 0.5, "l2_shrinkage_regularization_strength": 0.1}',
                  '{"class": "momentum", "momentum": 0.5, "use_nesterov": True}',
                  '{"class": "rmsprop", "centered": True}', '{"class": "adadelta", "rho": 0.5}',
                  '{"class": "gradientdescent", "use_locking": True}', '{"class": "adam", "name": "my_adam"}'],
    "adam": ["True"], "nadam": ["True"], "rmsprop": ["True"], "adagrad": ["True"], "adadelta": ["True"],
    "momentum": ["0.9", "0.5"],
    "optimizer_epsilon": ["1e-3", "0.1"],
    "learning_rate": ["0.1", "0.001"],
    "learning_rates": ["[0.1, 0.05]", "[0.001]", "{1: 0.02, 3: 0.005}"],
    "min_learning_rate": ["0.009", "0.02"],
    "learning_rate_control": ['"constant"', '"newbob"', '"newbob_abs"', '"newbob_rel"', '"newbob_multi_epoch"'],
    "learning_rate_control_error_measure": ['"dev_score"', '"dev_error"', '"train_score"', '"dev_score_output"'],
    "learning_rate_control_relative_error_relative_lr": ["True"],
    "learning_rate_control_min_num_epochs_per_new_lr": ["2"],
    "use_learning_rate_control_always": ["True"],
    "newbob_learning_rate_decay": ["0.3", "0.9"],
    "newbob_learning_rate_growth": ["1.5"],
    "newbob_relative_error_threshold": ["0.0", "-0.5", "0.5"],
    "newbob_relative_error_grow_threshold": ["-0.5", "0.5"],
    "newbob_error_threshold": ["0.0", "10.0"],
    "newbob_relative_error_div_by_old": ["True"],
    "newbob_multi_num_epochs": ["2", "3"],
    "newbob_multi_update_interval": ["2"],
    "gradient_clip": ["0.01", "0.5"],
    "gradient_clip_norm": ["0.1"],
    "gradient_clip_avg_norm": ["0.1"],
    "gradient_clip_global_norm": ["0.05", "1.0"],
    "grad_norm_to_clip_to_zero": ["0.5", "100.0"],
    "gradient_nan_inf_filter": ["True"],
    "accum_grad_multiple_step": ["2", "3"],
    "decouple_constraints": ["True"],
    "decouple_constraints_factor": ["0.5"],
    "batch_size": ["30", "200", "7"],
    "max_seqs": ["1", "3", "20"],
    "max_seq_length": ["8", '{"data": 9}'],
    "min_seq_length": ["6"],
    "chunking": ['"5:3"', '"4:4"', '"100:50"'],
    "chunking_variance": ["0.0"],
    "min_chunk_size": ["3"],
    "calculate_exp_loss": ["True"],
    "reset_updater_vars_mod_step": ["2"],
    "save_interval": ["2"],
    "stop_on_nonfinite_train_score": ["False"],
    "behavior_version": ["0", "12", "21"],
    "num_epochs": ["1", "4"],
    "max_pad_size": ["2"],
    "learning_rate_decay": ["0.3"],
    "learning_rate_growth": ["1.2"],
    "pretrain": ['"default"', '{"repetitions": 2}', '{"construction_algo": "from_input"}'],
    "pretrain_repetitions": ["2"],
    "use_last_best_model": ['{"modulo": 2}', '{"only_last_n": 2, "filter_score": 100.0}'],
    "cleanup_old_models": ["True", '{"keep_last_n": 1, "keep_best_n": 1}'],
    "debug_add_check_numerics_ops": ["True"],
    "pretrain_learning_rate": ['0.001\npretrain = "default"'],
    "pretrain_construction_algo": ['"from_input"\npretrain = "default"', '"no_network_modifications"\npretrain = "default"'],
    "batching": ['"random"', '"sorted"', '"laplace:.3"', '"sorted_reverse"', '"random:3"', '"reverse"',
                 '"sort_bin_shuffle_x2:.4"', '"default_every_n:3"', '"laplace:4"'],
    # forms and keys the list lacked (today's pass)
    "maximize_grad_norm": ["0.1", "1.0"],
    "optimizer_use_locking": ["True"],
    "inc_seq_length": ["2"],
    "reinit_network_each_epoch": ["True"],
    "seq_drop": ["0.0"],
    "random_seed": ["7"],
    "tf_session_opts": ['{"intra_op_parallelism_threads": 1}', '{"log_device_placement": False}'],
    "tf_intra_op_threads": ["1"],
    "device": ['"cpu"'],
    "dynamic_learning_rate": ['lambda *, global_train_step, learning_rate, **kwargs: learning_rate * 0.5',
                              '{"interval": 3, "decay": 0.5}'],
    "save_epoch1_initial_model": ["True"],
    "on_size_limit": ['"ignore"'],
    "update_batch_size": ["10"],
    # options of the train dataset (a key "train:OPT" sets OPT in the train dataset's dict)
    "train:seq_ordering": ['"laplace:.3"', '"sorted_reverse"', '"random:5"', '"random"', '"reverse"',
                           '"sort_bin_shuffle:.5"', '"sort_bin_shuffle_x2:3"', '"default_every_n:2"', '"laplace:3"',
                           '"sorted"', '"random_sample"'],
    "train:partition_epoch": ["2", "3"],
    "train:repeat_epoch": ["2"],
    "train:fixed_random_seed": ["4"],
    "train:random_seed_offset": ["11"],
    "train:unique_seq_tags": ["True"],
    # (not epoch_wise_filter: RETURNN's HDFDataset does not take it, this engine refuses it too; seeds 10-21)
    "train:chunking": ['"6:3"', '({"data": 5, "classes": 5}, {"data": 3, "classes": 3})'],
    "train:min_chunk_size": ["4"],
}
MUTATIONS["max_seq_length"] += ['{"classes": 7}', '{"data": 10, "classes": 10}']
MUTATIONS["min_seq_length"] += ['{"classes": 5}', '{"data": 4}']
MUTATIONS["chunking"] += ['"6"', '{"data": 6, "classes": 6}', '({"data": 4, "classes": 4}, {"data": 2, "classes": 2})',
                          '"0"']
MUTATIONS["max_seqs"] += ["-1"]
MUTATIONS["batch_size"] += ['{"data": 40, "classes": 40}']
MUTATIONS["learning_rate_control_error_measure"] += ['"dev_score_output/output"', '"train_error"']
MUTATIONS["gradient_clip_global_norm"] += ["0.0"]
MUTATIONS["accum_grad_multiple_step"] += ["1"]
# pretrain's constructions need every 'from' as a list (RETURNN iterates a string by character): the base
# configs' string sources are made lists when a draw turns pretraining on
PRETRAIN_KEYS = ("pretrain", "pretrain_repetitions", "pretrain_learning_rate", "pretrain_construction_algo")
BASES = ("ff_newbob", "constant_warmup", "multi_loss_l2", "seq_filter_sorted", "decouple_nadam", "partition_laplace",
         "accum_clip", "ctc")


def draws(seed: int, n: int, bases: List[str], only: Optional[List[str]] = None) -> List[Tuple[str, str, str]]:
    """``n`` (base case, key, value) draws of ``seed`` (keys starting with one of ``only``, if given)."""
    rnd = random.Random(seed)
    keys = sorted(k for k in MUTATIONS if not only or k.startswith(tuple(only)))
    return [(rnd.choice(bases), key, rnd.choice(MUTATIONS[key])) for key in (rnd.choice(keys) for _ in range(n))]


def register(base: str, key: str, value: str, index: int) -> str:
    """A whole-run case: ``base`` with ``key = value`` appended (num_epochs in place, read by the harness)."""
    prefix, train_opts, body = cases.CASES[base]
    if key == "behavior_version" and int(value) < 15 and re.search(r"^accum_grad_multiple_step = [2-9]", body, re.M):
        value = "15"  # (RETURNN's accumulation races with its step counter before 15: see below; engine seed 33)
    if key.startswith("train:"):
        pass
    elif key == "num_epochs":
        body = re.sub(r"^num_epochs = \d+$", "num_epochs = %s" % value, body, flags=re.M)
    else:
        body = body + "%s = %s\n" % (key, value)
    if key == "accum_grad_multiple_step" and "behavior_version" not in body:
        # before version 15 RETURNN reads its step counter racing with the step's increment: which steps apply
        # the accumulated sum varies from run to run there (engine_run_configs' accum_clip)
        body += "behavior_version = 15\n"
    if key.startswith("train:"):
        train_opts += ', "%s": %s' % (key[len("train:"):], value)
    elif key in PRETRAIN_KEYS:
        body = re.sub(r'"from": "([^"]+)"', r'"from": ["\1"]', body)
    name = "m%03i_%s_%s" % (index, base, key.replace(":", "_"))
    cases.CASES[name] = (prefix, train_opts, body)
    return name


def run_one(name: str, data: Dict[str, str], root: str, returnn_python: str, env: Dict[str, str]
            ) -> Tuple[str, str]:
    """(verdict, detail) of one registered case."""
    theirs, ours_dir = os.path.join(root, name + "_returnn"), os.path.join(root, name + "_ours")
    os.makedirs(theirs)
    os.makedirs(ours_dir)
    ref, ref_err = None, ""
    try:
        ref = cases.run_training([returnn_python, "-m", "returnn"], name, data, theirs, env)
    except Exception as exc:  # noqa: BLE001  (RETURNN's failure is a verdict)
        ref_err = _last_error(str(exc))
    ours, our_err, exit_code = None, "", 0
    try:
        if ref is not None:
            ours = cases.run_ours([sys.executable, os.path.join(REPO, "rnn.py")], name, data, ours_dir, env, ref["init"])
        else:
            ours = cases.run_training([sys.executable, os.path.join(REPO, "rnn.py")], name, data, ours_dir, env)
    except Exception as exc:  # noqa: BLE001
        our_err = _last_error(str(exc))
        m = re.search(r"\(exit (-?\d+)\)", str(exc))
        exit_code = int(m.group(1)) if m else -1
    if ref is None and ours is None:
        return "BOTH-FAIL", "ours: %s | RETURNN: %s" % (our_err, ref_err)
    if ref is None:
        return "LAX", "RETURNN: " + ref_err
    if ours is None:
        return ("GAP" if exit_code == 2 else "CRASH"), our_err
    problems, max_diff = cases.compare(ref, ours)
    return ("DIFFER", "; ".join(problems[:4]) + " (max param diff %.3g)" % max_diff) if problems else ("AGREE", "")


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"(Error|Exception|error:|refused|not supported)", line)]
    return (errors[-1] if errors else (lines[-1] if lines else text))[:300]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--bases", nargs="+", default=list(BASES), choices=list(cases.CASES))
    parser.add_argument("--keys", nargs="+", help="draw only keys starting with one of these (e.g. optimizer train:)")
    parser.add_argument("--show", action="store_true", help="print each draw's verdict and detail")
    parser.add_argument("--returnn-venv", default=os.path.join(REPO, ".bench-venv-returnn"))
    args = parser.parse_args(argv)
    returnn_python = os.path.join(args.returnn_venv, "bin", "python")
    if not os.path.exists(returnn_python):
        sys.exit("no RETURNN venv at %s (benchmarks/vs_returnn.py creates one)" % args.returnn_venv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(DISABLE_CUDA="1", TF_CPP_MIN_LOG_LEVEL="2")
    root = tempfile.mkdtemp(prefix="fuzz_engine_")
    counts: Dict[str, int] = {}
    try:
        data = cases.write_data(root)
        for i, (base, key, value) in enumerate(draws(args.seed, args.n, args.bases, args.keys)):
            name = register(base, key, value, i)
            verdict, detail = run_one(name, data, root, returnn_python, env)
            counts[verdict] = counts.get(verdict, 0) + 1
            if args.show or verdict != "AGREE":
                print("%-9s %s: %s = %s  %s" % (verdict, base, key, value, detail), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("seed %i, %i draws: %s" % (args.seed, args.n, ", ".join("%s %i" % kv for kv in sorted(counts.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
