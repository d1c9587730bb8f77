"""Command line: ``python rnn.py CONFIG [CONFIG2 ...] [++key value ...]`` / ``python -m returnn``.

Loads the config, initialises distributed training and the log, and runs the task. Bad input is
one line on stderr and exit code 2 (with a traceback only at log_verbosity 5). In a multi-rank run,
a failure on one rank ends all ranks, so no rank waits for a dead peer.
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import List, Optional

from returnn.config import Config, load_config_from_args
from returnn.errors import ConfigError, ReturnnError

KNOWN_TASKS = ("train", "eval", "forward")
USAGE = "usage: rnn.py CONFIG [CONFIG2 ...] [++key value ...]   (or: rnn.py --check-distributed)"


def _verbosity(config: Optional[Config]) -> int:
    try:
        return config.int("log_verbosity", 3) if config is not None else 3
    except ReturnnError:
        return 3


def _configure_tensorflow(config: Config) -> None:
    """Thread counts from ``tf_session_opts`` (or ``tf_intra_op_threads``), before TF does any work."""
    import tensorflow as tf
    opts = config.typed_value("tf_session_opts") or {}
    intra = opts.get("intra_op_parallelism_threads", config.int("tf_intra_op_threads", 0))
    inter = opts.get("inter_op_parallelism_threads", config.int("tf_inter_op_threads", 0))
    if intra:
        tf.config.threading.set_intra_op_parallelism_threads(int(intra))
    if inter:
        tf.config.threading.set_inter_op_parallelism_threads(int(inter))
    if config.bool("tf_deterministic", False):
        tf.config.experimental.enable_op_determinism()


def run(config: Config) -> int:
    """Runs the configured task; returns the exit code."""
    task = config.value("task", "train")
    if task not in KNOWN_TASKS:
        raise ConfigError("unknown task %r (known: %s)" % (task, ", ".join(KNOWN_TASKS)))
    num_epochs = config.typed_value("num_epochs")
    if num_epochs is not None:
        config.int("num_epochs")  # non-integers are an error naming the key
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _configure_tensorflow(config)
    from returnn.distributed.context import DistributedContext
    from returnn.log import log
    dist = DistributedContext.from_config(config)
    _state["dist"] = dist
    log.initialize(config.list("log", []), _verbosity(config), dist.rank, dist.size)
    if dist.enabled:
        print(dist.backend.describe(), file=log.v3)
    from returnn.tf.engine import Engine, NonFiniteScoreError, TrainingInterrupted
    try:
        Engine(config, dist).run(task)
    except TrainingInterrupted as exc:
        return exc.exit_code
    except NonFiniteScoreError as exc:
        print(str(exc), file=log.error)
        log.flush_all()
        return exc.exit_code
    if dist.enabled:
        dist.backend.shutdown()
    log.flush_all()
    return 0


_state: dict = {}


def _fail(message: str, exit_code: int, tb: Optional[str]) -> int:
    """Reports a failure; in a multi-rank run also ends the other ranks."""
    from returnn.log import log
    if tb:
        sys.stderr.write(tb)
    dist = _state.get("dist")
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


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of ``rnn.py``, ``python -m returnn`` and the ``returnn`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--check-distributed" in argv:
        from returnn.distributed.check import main as check_main
        return int(check_main() or 0)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    config: Optional[Config] = None
    try:
        config = load_config_from_args(argv)
        return run(config)
    except ReturnnError as exc:
        tb = traceback.format_exc() if _verbosity(config) >= 5 else None
        return _fail(str(exc), exc.exit_code, tb)
    except KeyboardInterrupt:
        return _fail("interrupted by keyboard", 130, None)
    except Exception as exc:  # noqa: BLE001 - anything else is a bug or a runtime failure: show it
        return _fail("%s: %s" % (type(exc).__name__, exc), 1, traceback.format_exc())


if __name__ == "__main__":
    sys.exit(main())
