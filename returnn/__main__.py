"""Command line: ``python rnn.py CONFIG [CONFIG2 ...] [++key value ...]`` / ``python -m returnn``.

Loads the config, initialises distributed training and the log, and runs the task. Bad input is
one line on stderr and exit code 2 (with a traceback only at log_verbosity 5). In a multi-rank run,
a failure on one rank ends all ranks, so no rank waits for a dead peer.

Exit codes: 0 done; 1 runtime failure (including a non-finite score); 2 bad input; 128 + signum after
SIGTERM/SIGUSR1/SIGINT (the newest checkpoint on disk, possibly ``<model>.interrupted``, is the state
the same command resumes from; 130 is Ctrl-C: in the training loop it saves the interrupted state like
SIGTERM, a second Ctrl-C stops at once, and the message says what a re-run does).
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Any, List, Optional

from returnn.config import Config, load_config_from_args, parse_override_value, split_cmd_args
from returnn.errors import ConfigError, ReturnnError, RuntimeFailure, StopSignal, TrainingInterrupted
from returnn.interrupts import EarlyStop
from returnn.startup import HELP, USAGE, banner_lines, versions_line

# the tasks (config key 'task'), with one line each for the generated docs (README)
KNOWN_TASKS = {
    "train": "trains epochs and saves checkpoints; re-running resumes (dev/eval scores each epoch)",
    "eval": "scores the dev/eval datasets with a checkpoint",
    "forward": "writes the output layer's values (or hdf_dump layers) for a dataset to HDF (`output_file`)",
    "search": "beam search through rec sub-networks; hypotheses to `search_output_file`, edit distance",
}
DATASET_KEYS = ("train", "dev", "eval", "eval_datasets", "search_data")


# Input errors show their traceback from this log_verbosity on: above RETURNN's levels 0-5, because
# published configs run at 5 (one line per step) and still must get one error line.
TRACEBACK_VERBOSITY = 6


def _verbosity(config: Optional[Config], argv: Optional[List[str]] = None) -> int:
    """``log_verbosity`` of the config; without a config (it failed to load), from ``++log_verbosity``."""
    try:
        if config is not None:
            value = config.typed_value("log_verbosity")
            if isinstance(value, (list, tuple)):  # RETURNN's one per log target: the most verbose one here
                return max([int(v) for v in value] or [3])
            return config.int("log_verbosity")
        value = 3
        for key, text in split_cmd_args(argv or [])[1]:
            if key == "log_verbosity":
                value = int(parse_override_value(text))
        return value
    except (ReturnnError, ValueError, TypeError):
        return 3


class RunState:
    """What the process holds while it runs, for the error paths: the distributed context (to end
    the other ranks) and the model lock (released at exit)."""

    def __init__(self):
        self.dist = None
        self.lock = None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def _prepare_outputs(config: Config, task: str, state: RunState) -> None:
    """Training writes ``model``, ``learning_rate_file`` and TensorBoard summaries (``tf_log_dir``):
    their directories must be creatable and writable (checked before anything is built, so the
    error names the key). The model prefix is locked for
    this run (a second training on it is an error naming the first). Leftovers of a killed writer
    are removed."""
    from returnn.tf.checkpoint import prepare_dir, prepare_output_dir, remove_stale_temp_files
    from returnn.tf.summaries import SummaryLogger
    if task != "train":
        return
    model = config.value("model")
    lr_file = config.value("learning_rate_file")
    if model:
        prepare_output_dir(model, "model")
    if lr_file:
        prepare_output_dir(lr_file, "learning_rate_file")
    tf_log_dir = SummaryLogger.directory(config)
    if tf_log_dir:
        prepare_dir(tf_log_dir, "tf_log_dir")
    if model:
        from returnn.util.run_lock import ModelLock
        lock = ModelLock(model)
        lock.acquire()  # one training per model prefix; released at exit
        state.lock = lock
        remove_stale_temp_files(model, [lr_file] if lr_file else [])


def _configure_tensorflow(config: Config) -> None:
    """Thread counts from ``tf_session_opts`` (or ``tf_intra_op_threads``), before TF does any work."""
    from returnn.util.tf_import import import_tensorflow
    import_tensorflow()
    import tensorflow as tf
    opts = config.typed_value("tf_session_opts") or {}
    intra = opts.get("intra_op_parallelism_threads", config.int("tf_intra_op_threads"))
    inter = opts.get("inter_op_parallelism_threads", config.int("tf_inter_op_threads"))
    if intra:
        tf.config.threading.set_intra_op_parallelism_threads(int(intra))
    if inter:
        tf.config.threading.set_inter_op_parallelism_threads(int(inter))
    if config.bool("tf_deterministic"):
        tf.config.experimental.enable_op_determinism()


def _show(text: str) -> int:
    """Prints an info text (help, version); a closed pipe (``rnn.py --help | head``) is no error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _unknown_option_message(flag: str) -> str:
    """One line for an argument that starts with '-' but is no option of rnn.py."""
    from returnn import config_keys
    key = flag.lstrip("-").split("=", 1)[0]
    if config_keys.is_known(key) or config_keys.suggest(key):
        return "unknown option %s: config keys are set with ++%s VALUE" % (flag, config_keys.suggest(key) or key)
    return ("unknown option %s (options: --help, --help-keys [PATTERN], --version, --check-distributed; "
            "config keys are set with ++key value)" % flag)


def _warn_unknown_keys(config: Config) -> None:
    """Typos and unsupported RETURNN keys: one warning each (rank 0); the config's own helper variables
    in one line at log_verbosity 4."""
    from returnn.config_keys.check import unknown_keys
    from returnn.log import log
    warnings, helpers = unknown_keys(config.typed_dict, config.cmdline_keys)
    for line in warnings:
        print(line, file=log.warn)
    if helpers:
        print("config entries the engine does not read (the config's own variables?): %s" % ", ".join(helpers),
              file=log.v4)


def _mentions_hdf(config: Config) -> bool:
    """Whether a dataset of the config may be an HDF file (its class name or a file name says so)."""
    def walk(value: Any, depth: int = 0) -> bool:
        if isinstance(value, str):
            return "hdf" in value.lower()
        if depth > 4:
            return False
        if isinstance(value, dict):
            return any(walk(v, depth + 1) for v in value.values())
        if isinstance(value, (list, tuple)):
            return any(walk(v, depth + 1) for v in value)
        return False
    return any(walk(config.typed_value(key)) for key in DATASET_KEYS)


def run(config: Config, state: Optional[RunState] = None) -> int:
    """Runs the configured task; returns the exit code."""
    state = state if state is not None else RunState()
    task = config.value("task")
    if task not in KNOWN_TASKS:
        raise ConfigError("unknown task %r (known: %s)" % (task, ", ".join(KNOWN_TASKS)))
    if task == "forward" and not config.typed_value("eval"):  # RETURNN's TF forward: "no eval data provided"
        raise ConfigError("task 'forward' needs an 'eval' dataset (RETURNN forwards it alone: 'no eval data provided')")
    from returnn.config_keys.values import check_values
    check_values(config.typed_dict, config.cmdline_keys)  # types and ranges of declared keys: one line naming the key
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if _mentions_hdf(config):
        from returnn.datasets import hdf_check
        hdf_check.prestart()  # imports h5py in its own process while this one imports TensorFlow
    _configure_tensorflow(config)
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    dist = DistributedContext.from_config(config)
    state.dist = dist
    from returnn.log import rank_log_filename
    from returnn.util.output_guard import check_early_outputs
    check_early_outputs(config, task, [rank_log_filename(name, dist.rank, dist.size)
                                       for name in config.list("log") or [] if name], dist.is_chief)
    try:
        log.initialize(config.list("log") or [], _verbosity(config), dist.rank, dist.size)
    except OSError as exc:
        raise ConfigError("config key 'log': cannot write log file %s: %s"
                          % (config.value("log"), exc.strerror or exc))
    for level, line in banner_lines(sys.argv):
        print(line, file=log.v(level))
    if dist.enabled:
        print(dist.backend.describe(), file=log.v3)
    if dist.is_chief:
        _warn_unknown_keys(config)
        _prepare_outputs(config, task, state)
    from returnn.tf.engine import Engine
    try:
        Engine(config, dist).run(task)
    except TrainingInterrupted as exc:  # rank 0 logged what was saved; every rank stopped at the same step
        return exc.exit_code
    except RuntimeFailure as exc:  # raised on every rank at the same step (e.g. a non-finite score)
        if not exc.all_ranks:  # e.g. an output that could not be written: main() ends the other ranks
            raise
        print(str(exc), file=log.error)
        log.flush_all()
        return exc.exit_code
    dist.shutdown()
    log.flush_all()
    return 0


def _fail_on_every_rank(exc: ReturnnError, tb: Optional[str]) -> int:
    """An error every rank raised at the same point (ranks that disagree on config or network): each
    rank writes it to its own log file, only the reporting rank (0) to stderr, so the job shows one
    line; every rank ends with the error's exit code, no rank aborts the others."""
    from returnn.log import log
    for f in log.files:
        f.write("ERROR: %s\n" % exc)
    log.flush_all()
    if getattr(exc, "report_here", True):
        if tb:
            sys.stderr.write(tb)
        sys.stderr.write("ERROR: %s\n" % exc)
        sys.stderr.flush()
    return exc.exit_code


def _fail(message: str, exit_code: int, tb: Optional[str], state: Optional[RunState] = None) -> int:
    """Reports a failure; in a multi-rank run also ends the other ranks."""
    from returnn.log import log
    if tb:
        sys.stderr.write(tb)
    dist = state.dist if state is not None else None
    if dist is not None and dist.size > 1:
        print(message, file=log.error)
        log.flush_all()
        dist.backend.abort(exit_code)
    if log.files:
        for f in log.files:
            f.write("ERROR: %s\n" % message)
        log.flush_all()
    sys.stderr.write("ERROR: %s\n" % message)
    sys.stderr.flush()
    return exit_code


def _user_error(exc: BaseException) -> Optional[ReturnnError]:
    """The ReturnnError behind a wrapper (e.g. the prefetcher's ProducerError), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ReturnnError):
            return exc
        seen.add(id(exc))
        exc = getattr(exc, "original", None) or exc.__cause__
    return None


def _stopped(exc: StopSignal, state: RunState, config: Optional[Config] = None) -> int:
    """A stop signal outside the training loop (start-up): nothing new to save; end all ranks. The
    line says what the same command will do (from the checkpoints on disk)."""
    from returnn.interrupts import rerun_hint, signal_name
    task = config.value("task") if config is not None else None
    if task in (None, "train"):
        message = ("stopped by %s outside the training loop: nothing new to save; %s"
                   % (signal_name(exc.signum), rerun_hint(config)))
    else:
        message = "stopped by %s during task %r: %s" % (signal_name(exc.signum), task, rerun_hint(config))
    from returnn.log import log
    dist = state.dist
    if log.files:
        for f in log.files:
            f.write(message + "\n")
        log.flush_all()
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    if dist is not None and dist.size > 1:
        dist.backend.abort(exc.exit_code)
    return exc.exit_code


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``rnn.py``, ``python -m returnn`` and the ``returnn`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--check-distributed" in argv:
        from returnn.distributed.check import main as check_main
        return int(check_main() or 0)
    if not argv:
        sys.stderr.write("%s\n(rnn.py --help explains more)\n" % USAGE)
        return 2
    if argv[0] in ("-h", "--help"):
        return _show(HELP)
    if argv[0] in ("--version", "-V"):
        return _show(versions_line())
    if argv[0] == "--help-keys":
        from returnn.config_keys.docs import help_keys_text
        return _show(help_keys_text(argv[1] if len(argv) > 1 else None))
    try:
        flags = [a for a in split_cmd_args(argv)[0] if a.startswith("-")]
    except ConfigError as exc:
        return _fail(str(exc), exc.exit_code, None)
    if flags:
        return _fail(_unknown_option_message(flags[0]), 2, None)
    from returnn.util.environment import ensure_packages
    ensure_packages(("tensorflow", "numpy", "h5py"), "rnn.py")
    from returnn.util.tf_import import import_tensorflow_quietly
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import_tensorflow_quietly()
    config: Optional[Config] = None
    state = RunState()
    early_stop = EarlyStop()
    try:
        config = load_config_from_args(argv)
        early_stop.install()  # a stop signal ends every task with one line (forward: its temporary file removed)
        return run(config, state)
    except ReturnnError as exc:
        tb = traceback.format_exc() if _verbosity(config, argv) >= TRACEBACK_VERBOSITY else None
        if getattr(exc, "on_every_rank", False):  # every rank raised it at the same point: none aborts
            return _fail_on_every_rank(exc, tb)
        return _fail(str(exc), exc.exit_code, tb, state)
    except RuntimeFailure as exc:  # one line, no traceback (e.g. a full disk, naming the file)
        return _fail(str(exc), exc.exit_code, None, state)
    except StopSignal as exc:
        return _stopped(exc, state, config)
    except KeyboardInterrupt:  # Ctrl-C outside the training loop's handlers, or a second Ctrl-C
        hint = ""
        if config is not None:
            from returnn.interrupts import rerun_hint
            hint = "; " + rerun_hint(config)  # training: from the checkpoints on disk now
        return _fail("interrupted by keyboard" + hint, 130, None, state)
    except Exception as exc:  # noqa: BLE001 - anything else is a bug or a runtime failure: show it
        user_error = _user_error(exc)
        if user_error is not None:  # bad input found late (e.g. by the data loader thread)
            tb = traceback.format_exc() if _verbosity(config, argv) >= TRACEBACK_VERBOSITY else None
            return _fail(str(user_error), user_error.exit_code, tb, state)
        return _fail("%s: %s" % (type(exc).__name__, exc), RuntimeFailure.exit_code, traceback.format_exc(), state)
    finally:
        early_stop.uninstall()
        _discard_unfinished_outputs()
        state.release()


def _discard_unfinished_outputs() -> None:
    """Removes what this process's HDF writers left half-written (see hdf_write's
    ``discard_unfinished_outputs``); nothing to do when no writer module was loaded."""
    module = sys.modules.get("returnn.datasets.hdf_write")
    if module is not None:
        module.discard_unfinished_outputs()


def exit_process(code: int) -> None:
    """Ends the process with ``code``. A single-process run skips the interpreter's teardown
    (which spends a second or more freeing TensorFlow's objects one by one) once the log files
    and standard streams are flushed and closed; with MPI loaded (or started by a launcher) the
    normal exit runs, as MPI_Finalize lives in an atexit handler."""
    from returnn.util.launcher_env import launched
    if launched() or any(m in sys.modules for m in ("mpi4py", "horovod", "horovod.tensorflow")):
        sys.exit(code)
    import logging
    from returnn.log import log
    log.flush_all()
    log.close_files()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(int(code) & 0xFF)


if __name__ == "__main__":
    exit_process(main())
