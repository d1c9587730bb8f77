"""Parts of the docs that describe the code, generated from the registries so they cannot go stale.

A generated block in a Markdown file sits between ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->``; ``tools/gen-docs.py`` rewrites every block from :data:`BLOCKS`
(and docs/config-keys.md from the key registry), ``--check`` reports outdated ones, and
tests/test_generated_docs.py fails when one is outdated.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List

BEGIN = "<!-- generated: %s (tools/gen-docs.py) -->"
END = "<!-- end generated: %s -->"


def _names(names, limit: int = 0) -> str:
    return ", ".join("`%s`" % n for n in names)


def supported_table() -> str:
    """README's table of what the registries hold: tasks, datasets, layers, units, losses, optimizers."""
    from returnn.__main__ import KNOWN_TASKS
    from returnn.datasets import _load_registry
    from returnn.tf import layers as _all  # noqa: F401  (fills the layer registry)
    from returnn.tf.layers import catalog
    from returnn.tf.layers.base import LAYER_CLASSES
    from returnn.tf.losses import LOSS_CLASSES
    from returnn.tf.optimizers import OPTIMIZERS
    datasets = sorted(n for n, cls in _load_registry().items() if not refused_dataset(cls))
    classes: Dict[str, List[str]] = {}
    for name, cls in LAYER_CLASSES.items():
        if name.startswith("_"):  # internal classes (what masked_computation becomes)
            continue
        classes.setdefault(cls.layer_class or name, [])
        if name != cls.layer_class:
            classes[cls.layer_class].append(name)
    layers = ", ".join("`%s`%s" % (n, " (%s)" % _names(sorted(a)) if a else "") for n, a in sorted(classes.items()))
    units = [u for u in catalog.RETURNN_REC_UNITS if catalog.unit_status(u)[0] == "yes"]
    rows = ["| Registry | What this engine has |", "|---|---|",
            "| Tasks | %s |" % "; ".join("`%s`: %s" % (t, doc) for t, doc in KNOWN_TASKS.items()),
            "| Datasets (`\"class\"`) | %s; RETURNN's other classes are refused in one line saying why |"
            % _names(datasets),
            "| Layers (`\"class\"`) | %s, and `subnetwork`, `masked_computation`. %s Status of every RETURNN layer "
            "class: [docs/compat.md](docs/compat.md#layer-classes-and-rec-units) |" % (layers, catalog.summary()),
            "| Rec units (`\"unit\"`) | %s; a dict is a rec sub-network (step loop, beam search) |" % _names(units),
            "| Losses (`\"loss\"`) | %s |" % _names(sorted(LOSS_CLASSES)),
            "| Optimizers (`optimizer = {\"class\": ...}`) | %s |" % _names(sorted(OPTIMIZERS))]
    return "\n".join(rows)


def refused_dataset(cls: type) -> bool:
    """Whether a registered dataset class only refuses (RETURNN's classes that cannot run here)."""
    from returnn.datasets import not_here, sprint
    return cls.__name__ in not_here.NOT_HERE or issubclass(cls, sprint._NeedsRasr)


def layer_tables() -> str:
    """docs/compat.md: every RETURNN layer class, rec unit and loss class with its status here."""
    from returnn.tf.layers import catalog
    from returnn.tf.losses import loss_table
    line = catalog.extra_classes_line()
    extra = [line, ""] if line else []
    return "\n".join([catalog.summary(), ""] + extra + catalog.layers_table() + [""] + catalog.units_table() + [""]
                      + loss_table())


BLOCKS: Dict[str, Callable[[], str]] = {"supported": supported_table, "layer-tables": layer_tables}
FILES = {"supported": "README.md", "layer-tables": "docs/compat.md"}


def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with block ``name`` holding ``content`` (a ValueError if the markers are missing)."""
    pattern = re.compile(re.escape(BEGIN % name) + r"\n.*?" + re.escape(END % name), re.S)
    if not pattern.search(text):
        raise ValueError("no generated block %r (markers %r ... %r)" % (name, BEGIN % name, END % name))
    return pattern.sub(lambda _: "%s\n%s\n%s" % (BEGIN % name, content, END % name), text)
