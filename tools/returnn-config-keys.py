#!/usr/bin/env python3
"""Lists the config keys a RETURNN source tree reads: every ``config.value/int/bool/float/typed_value/
list/has/is_true/is_typed/int_list/float_list/bool_or_other/opt_typed_value/get_of_type("KEY", ...)``
call (on any receiver whose name says config: ``config``, ``self.config``, ``get_global_config()``,
``self.network.get_config()``), ``config.typed_dict.get("KEY")``, ``config.typed_dict["KEY"]`` and
``"KEY" in config.typed_dict``, plus the keys read through a variable (loops over literal lists),
which :data:`KEYS_READ_THROUGH_VARIABLES` names.

Usage: tools/returnn-config-keys.py RETURNN_PACKAGE_DIR [--check]

Without ``--check`` it prints the keys, one a line. With it, it compares them with
``RETURNN_SOURCE_KEYS`` in returnn/config_keys/returnn_keys.py and names the differences (exit 1).
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Set

GETTERS = {"value", "int", "bool", "float", "typed_value", "list", "has", "is_true", "is_typed", "int_list",
           "float_list", "bool_or_other", "opt_typed_value", "get_of_type", "int_pair"}
# read with a variable as the key (RETURNN's __main__ datasets, the batching options its frontend
# engines pass on, the gradient options its JAX updater refuses, the PyTorch per-task batch sizes)
KEYS_READ_THROUGH_VARIABLES = ("train dev eval forward_data search_data max_seq_length min_seq_length max_pad_size "
                               "max_total_num_seqs seq_drop gradient_clip gradient_clip_norm gradient_clip_avg_norm "
                               "gradient_noise global_norm_tag gradient_clip_global_norm_tag grad_norm_to_clip_to_zero "
                               "maximize_grad_norm gradient_nan_inf_filter num_allowed_consec_invalid_gradient_steps "
                               "debug_grad_summaries batch_size_train batch_size_dev").split()


def _is_config(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return "config" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "config" in node.attr.lower()
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return "config" in name.lower()
    return False


def _is_config_dict(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in ("typed_dict", "dict") and _is_config(node.value)


def _literal(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def keys_read(root: str) -> Set[str]:
    """The config keys the Python files under ``root`` read (see the module doc)."""
    found: Set[str] = set(KEYS_READ_THROUGH_VARIABLES)
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                key = None
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                    attr, recv = node.func.attr, node.func.value
                    if (attr in GETTERS and _is_config(recv)) or (attr == "get" and _is_config_dict(recv)):
                        key = _literal(node.args[0])
                elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                    if any(_is_config_dict(c) for c in node.comparators):
                        key = _literal(node.left)
                elif isinstance(node, ast.Subscript) and _is_config_dict(node.value):
                    key = _literal(node.slice)
                if key:
                    found.add(key)
    return found


def main(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    keys = keys_read(argv[0])
    if "--check" not in argv[1:]:
        print("\n".join(sorted(keys)))
        return 0
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from returnn.config_keys.returnn_keys import RETURNN_SOURCE_KEYS
    new, gone = sorted(keys - RETURNN_SOURCE_KEYS), sorted(RETURNN_SOURCE_KEYS - keys)
    if new or gone:
        print("RETURNN_SOURCE_KEYS differs from %s: read there, not listed: %s; listed, not read there: %s"
              % (argv[0], ", ".join(new) or "-", ", ".join(gone) or "-"))
        return 1
    print("RETURNN_SOURCE_KEYS: the %i keys %s reads" % (len(keys), argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
