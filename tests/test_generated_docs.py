"""The docs that describe the code are generated from the registries (tools/gen-docs.py) and must
be up to date: README's table of what is supported, docs/compat.md's layer-class and unit
tables, docs/config-keys.md."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_generated_docs_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen-docs.py"), "--check"], capture_output=True,
                          text=True, cwd=str(ROOT))
    assert proc.returncode == 0, "docs out of date, run tools/gen-docs.py: " + proc.stderr[-500:]


def test_generated_tables_come_from_the_registries():
    from returnn.__main__ import KNOWN_TASKS
    from returnn.tf.layers.catalog import RETURNN_LAYER_CLASSES, layer_status
    from returnn.util.doc_blocks import layer_tables, supported_table
    table = supported_table()
    for task in KNOWN_TASKS:
        assert "`%s`:" % task in table
    assert "`nativelstm2`" in table and "`HDFDataset`" in table and "`ce`" in table and "`adam`" in table
    rows = layer_tables()
    for name in RETURNN_LAYER_CLASSES:
        assert "| `%s` | %s |" % (name, layer_status(name)[0]) in rows
    assert layer_status("linear")[0] == "yes" and layer_status("hidden")[1].startswith("alias of `linear`")
    assert layer_status("fast_bw")[0] == "no"


def test_block_markers_are_required():
    from returnn.util.doc_blocks import replace_block
    with pytest.raises(ValueError, match="no generated block 'x'"):
        replace_block("text without markers", "x", "content")
    text = "a\n<!-- generated: x (tools/gen-docs.py) -->\nold\n<!-- end generated: x -->\nb"
    assert replace_block(text, "x", "new").split("\n")[2] == "new"
