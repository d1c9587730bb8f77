#!/usr/bin/env python3
"""Dumps a dataset into one HDF file in RETURNN's layout.

Usage: tools/hdf_dump.py CONFIG_OR_DATASET OUT.hdf [--dataset NAME] [--start_seq N] [--end_seq M]
                         [--epoch E]

CONFIG_OR_DATASET is a config file (its ``train`` dataset; ``--dataset dev`` chooses another), a
``{...}`` dict literal, or a comma-separated list of HDF files. Sequences are written in the epoch's order; ``--end_seq`` is
inclusive. Errors are printed as one line, exit code 2.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.util.environment import ensure_packages  # noqa: E402

ensure_packages(("numpy", "h5py"), "tools/hdf_dump.py")

from returnn.errors import ReturnnError  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description="Dump a dataset to an HDF file (RETURNN layout).")
    parser.add_argument("dataset", help="config file, {...} dataset dict, or comma-separated HDF files")
    parser.add_argument("out", help="output HDF file")
    parser.add_argument("--dataset", dest="which", default="train",
                        help="with a config: which dataset (train, dev, eval, or a name in eval_datasets)")
    parser.add_argument("--start_seq", type=int, default=0, help="first sequence (epoch order)")
    parser.add_argument("--end_seq", type=int, default=None, help="last sequence, inclusive (default: all)")
    parser.add_argument("--epoch", type=int, default=1, help="epoch whose order is dumped")
    args = parser.parse_args(argv)
    from returnn.datasets.from_cli import ProgressPrinter, dataset_from_cli_arg
    from returnn.datasets.hdf import dump_dataset_to_hdf
    from returnn.errors import OutputWriteError
    printer = ProgressPrinter("hdf_dump")
    _stop_on_signals()  # SIGTERM/SIGHUP end the dump like Ctrl-C: its temporary file is removed
    try:
        dataset, _ = dataset_from_cli_arg(args.dataset, args.which)
        try:
            count = dump_dataset_to_hdf(dataset, args.out, epoch=args.epoch, start_seq=args.start_seq,
                                        end_seq=args.end_seq, progress=printer)
        finally:
            printer.finish()
            dataset.close()
    except ReturnnError as exc:
        print("hdf_dump: error: %s" % exc, file=sys.stderr)
        return 2
    except OutputWriteError as exc:  # a full disk: the temporary file is gone, nothing under OUT
        print("hdf_dump: error: %s" % exc, file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print("hdf_dump: error: cannot write %s: %s" % (args.out, str(exc).splitlines()[0] if str(exc) else exc),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from returnn.datasets.hdf_write import discard_unfinished_outputs
        discard_unfinished_outputs()  # the signal may have landed before the dump's own cleanup was armed
        signum = getattr(exc, "signum", signal.SIGINT)
        print("hdf_dump: interrupted (%s); nothing written to %s" % (signal.Signals(signum).name, args.out),
              file=sys.stderr)
        return 128 + signum
    print("hdf_dump: wrote %i sequences to %s" % (count, args.out))
    return 0


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a job's end, a closed terminal) raise KeyboardInterrupt carrying the
    signal, so the dump's temporary file is removed on the way out. SIGKILL cannot be caught: the
    next writer into the same directory removes what the killed one left
    (``returnn.datasets.hdf_write.remove_stale_hdf_temp_files``). A KeyboardInterrupt that Python
    drops (raised inside a weakref callback) is sent again (``redeliver_dropped_signals``)."""
    from returnn.interrupts import raise_for_signal, redeliver_dropped_signals
    redeliver_dropped_signals()

    def stop(signum, _frame):
        exc = KeyboardInterrupt()
        exc.signum = signum
        raise_for_signal(exc)  # raised again before the output is put into place, if C code cleared it
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        try:
            signal.signal(sig, stop)
        except (ValueError, OSError):  # pragma: no cover - not the main thread
            pass


if __name__ == "__main__":
    sys.exit(main())
