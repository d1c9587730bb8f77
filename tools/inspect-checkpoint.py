#!/usr/bin/env python3
"""Lists what a checkpoint ``<model>.NNN`` holds: network variables, optimizer state and counters.

    tools/inspect-checkpoint.py MODEL.NNN[.index] [--show NAME ...]

Checkpoints of this engine and of RETURNN (TensorFlow) hold RETURNN's names: network parameters
(``output/W``, ``lstm/rec/W_re``), optimizer state (``<param>/Adam``, ``beta1_power``,
``_engine/optimizer/...``) and the rest (``global_step``, ``_engine/epoch``, ...); they are listed in
these groups with shapes, dtypes, parameter counts and the values of scalars, and the first line
says who wrote the checkpoint. Checkpoints of earlier versions of this engine (TensorFlow object
paths, ``network/...``) are listed by their paths without the ``/.ATTRIBUTES/VARIABLE_VALUE``
suffix. A missing or incomplete checkpoint is reported in one line, exit status 2.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from returnn.util.basic import human_bytes  # noqa: E402
from returnn.util.environment import ensure_packages  # noqa: E402

ensure_packages(("tensorflow", "numpy"), "tools/inspect-checkpoint.py")

VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
SLOT_MARK = "/.OPTIMIZER_SLOT/"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
GROUPS = ("network", "optimizer", "other")
_DATA_RE = re.compile(r"\.data-(\d{5})-of-(\d{5})$")


class CheckpointError(Exception):
    """A one-line reason why the checkpoint cannot be inspected."""


def normalize_prefix(path: str) -> str:
    """``model.003``, ``model.003.index`` or a data shard's name -> ``model.003``."""
    if path.endswith(".index"):
        return path[:-len(".index")]
    match = _DATA_RE.search(path)
    return path[:match.start()] if match else path


def check_files(prefix: str) -> None:
    """Raises CheckpointError unless the index and all data shards of ``prefix`` exist."""
    if not os.path.exists(prefix + ".index"):
        found = sorted(p[:-len(".index")] for p in glob.glob(glob.escape(prefix) + ".*.index"))
        hint = "; found: %s" % ", ".join(found[:5] + (["..."] if len(found) > 5 else [])) if found else ""
        raise CheckpointError("no checkpoint at %s (%s.index is missing)%s" % (prefix, prefix, hint))
    shards = [m for m in (_DATA_RE.search(p) for p in glob.glob(glob.escape(prefix) + ".data-*")) if m]
    if not shards:
        raise CheckpointError("incomplete checkpoint %s: no data file %s.data-00000-of-NNNNN" % (prefix, prefix))
    total = int(shards[0].group(2))
    present = {int(m.group(1)) for m in shards}
    missing = sorted(set(range(total)) - present)
    if missing:
        raise CheckpointError("incomplete checkpoint %s: missing %s.data-%05d-of-%05d"
                              % (prefix, prefix, missing[0], total))


def display_name(key: str) -> str:
    """``network/W/.ATTRIBUTES/VARIABLE_VALUE`` -> ``network/W``; slots -> ``network/W [slot optimizer/m]``."""
    if SLOT_MARK in key:
        owner, slot = key.split(SLOT_MARK, 1)
        return "%s [slot %s]" % (owner, display_name(slot))
    return key[:-len(VALUE_SUFFIX)] if key.endswith(VALUE_SUFFIX) else key


def group_of(key: str, legacy: bool = True) -> str:
    """network, optimizer or other (``legacy``: a TensorFlow object checkpoint's path)."""
    if legacy:
        if SLOT_MARK in key or key.startswith("optimizer/"):
            return "optimizer"
        return "network" if key.startswith("network/") else "other"
    from returnn.tf.checkpoint_fit import stored_params
    if key.startswith("_engine/optimizer/") or key in ("beta1_power", "beta2_power"):
        return "optimizer"
    if key.startswith("_") or key == "global_step":
        return "other"
    return "network" if key in stored_params({key: []}) else "optimizer"


def num_elements(shape: Sequence[int]) -> int:
    """Product of the dimensions (1 for a scalar)."""
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


Entry = Tuple[str, List[int], str, int, Optional[str]]  # name, shape, dtype, bytes, scalar value


def read_checkpoint(prefix: str, path: Optional[str] = None) -> Dict[str, List[Entry]]:
    """Entries per group, sorted by name; raises CheckpointError for an unreadable checkpoint.
    ``path``: the same files under a name TF does not read as a pattern (default ``prefix``)."""
    check_files(prefix)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(path or prefix)
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        groups: Dict[str, List[Entry]] = {g: [] for g in GROUPS}
        legacy = OBJECT_GRAPH_KEY in shapes
        for key in sorted(shapes):
            if key == OBJECT_GRAPH_KEY:
                continue
            shape = [int(d) for d in shapes[key]]
            dtype = dtypes[key]
            value = None
            if not shape:
                tensor = reader.get_tensor(key)
                value = tensor.decode("utf8", "replace") if isinstance(tensor, bytes) else str(tensor)
            size = num_elements(shape) * (dtype.size if dtype != tf.string else 0)
            groups[group_of(key, legacy)].append((display_name(key), shape, dtype.name, size, value))
    except (tf.errors.OpError, ValueError) as exc:
        message = (getattr(exc, "message", None) or str(exc)).strip().splitlines()
        raise CheckpointError("cannot read checkpoint %s: %s" % (prefix, message[0] if message else exc))
    needed = sum(e[3] for g in GROUPS for e in groups[g])
    stored = sum(os.path.getsize(p) for p in glob.glob(glob.escape(prefix) + ".data-*"))
    if stored < needed:
        raise CheckpointError("incomplete checkpoint %s: data files hold %i bytes, its variables need %i (truncated?)"
                              % (prefix, stored, needed))
    return groups


def format_report(prefix: str, groups: Dict[str, List[Entry]]) -> str:
    """The listing printed by the tool."""
    from returnn.tf.checkpoint_format import epoch_from_filename
    scalars = {name: value for name, _, _, _, value in groups["other"] + groups["optimizer"] if value is not None}
    legacy = any(e[0].startswith("network/") for e in groups["network"])
    if "_engine/epoch" in scalars:
        scalars["epoch"], writer = scalars["_engine/epoch"], "this engine"
    elif legacy:
        writer = "an earlier version of this engine"
    else:
        writer = "RETURNN (or another TensorFlow program)"
        if epoch_from_filename(prefix) is not None:
            scalars["epoch"] = "%i (from its name)" % epoch_from_filename(prefix)
    counters = ("epoch", "global_step") if "global_step" in scalars else ("epoch", "optimizer/iterations")
    extra = ", ".join("%s %s" % (k, scalars[k]) for k in counters if k in scalars)
    lines = ["checkpoint %s%s" % (prefix, " (%s)" % extra if extra else ""), "written by %s" % writer]
    all_entries = [e for g in GROUPS for e in groups[g]]
    width = max([len(e[0]) for e in all_entries] + [4])
    shape_width = max([len(str(e[1])) for e in all_entries] + [5])
    titles = {"network": "network parameters", "optimizer": "optimizer state", "other": "other"}
    for group in GROUPS:
        entries = groups[group]
        if not entries:
            continue
        count = sum(num_elements(e[1]) for e in entries)
        lines += ["", "%s: %i variables, %s values, %s"
                  % (titles[group], len(entries), "{:,}".format(count), human_bytes(sum(e[3] for e in entries), " "))]
        for name, shape, dtype, _, value in entries:
            row = "  %s  %s  %s" % (name.ljust(width), str(shape).ljust(shape_width), dtype.ljust(8))
            lines.append((row + ("  = %s" % value if value is not None else "")).rstrip())
    network = sum(num_elements(e[1]) for e in groups["network"])
    optimizer = sum(num_elements(e[1]) for e in groups["optimizer"])
    lines += ["", "network parameters: {:,}".format(network), "optimizer state values: {:,}".format(optimizer)]
    if not groups["network"]:
        lines.append("note: no network parameters")
    return "\n".join(lines)


def show_values(prefix: str, names: Sequence[str], path: Optional[str] = None) -> List[str]:
    """The values of the variables ``names`` (display names or raw checkpoint keys)."""
    import numpy as np
    import tensorflow as tf

    reader = tf.train.load_checkpoint(path or prefix)
    by_name = {display_name(k): k for k in reader.get_variable_to_shape_map()}
    lines = []
    for name in names:
        key = by_name.get(name, name if name in by_name.values() else None)
        if key is None:
            raise CheckpointError("no variable %r in %s" % (name, prefix))
        with np.printoptions(threshold=200, edgeitems=3, precision=6):
            lines += ["", "%s:" % name, str(reader.get_tensor(key))]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Command line; returns the exit status (2 for a missing, incomplete or unreadable checkpoint)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="checkpoint prefix, e.g. net-model/network.003 (a trailing .index is fine)")
    p.add_argument("--show", action="append", default=[], metavar="NAME",
                   help="also print the values of variable NAME (as listed); may be repeated")
    args = p.parse_args(argv)
    prefix = normalize_prefix(args.checkpoint)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from returnn.tf.checkpoint import readable_prefix  # TF reads '[', '*', '?' in names as patterns
    try:
        with readable_prefix(prefix) as path:
            print(format_report(prefix, read_checkpoint(prefix, path)))
            if args.show:
                print("\n".join(show_values(prefix, args.show, path)))
    except CheckpointError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
