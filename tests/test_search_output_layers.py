"""``search_output_layer`` as a list (RETURNN's): one search writes ``{tag: {layer: hypothesis}}`` in
the ``py`` format; ``txt`` is refused before decoding, as RETURNN asserts."""
from __future__ import annotations

import ast

from helpers import assert_one_line_error, describe, run_rnn, train_args, write_config
from test_rec_search import ENC_DEC


def test_several_search_output_layers(tmp_path):
    # RETURNN writes a layer's labels by the labels of its target (input_copy: 'data'); 'decision' takes the
    # best of the searched rec layer's beam (whose hypotheses RETURNN would write all, with scores)
    net = ENC_DEC.replace('network = {', 'network = {\n    "input_copy": {"class": "copy", "from": "data", '
                          '"target": "data"},\n    "decision": {"class": "decide", "from": "output", '
                          '"is_output_layer": True},')
    cfg = write_config(tmp_path / "encdec.config", net + "\nnum_epochs = 1\n")
    proc = run_rnn(train_args(cfg, tmp_path), timeout=600)
    assert proc.returncode == 0, describe(proc)
    out = tmp_path / "hyps.py"
    args = ["++task", "search", "++search_output_file", str(out), "++search_output_layer", "['decision', 'input_copy']",
            "++search_data", "dev"]
    proc = run_rnn(train_args(cfg, tmp_path, *args, "++search_output_file_format", "py"), timeout=600)
    assert proc.returncode == 0, describe(proc)
    hyps = ast.literal_eval(out.read_text())
    assert len(hyps) == 20 and all(set(h) == {"decision", "input_copy"} for h in hyps.values())
    assert all(set(h["decision"].split()) <= {"0", "1"} for h in hyps.values())
    assert any(set(h["input_copy"].split()) - {"0", "1"} for h in hyps.values())  # the input digits (0..7)
    proc = run_rnn(train_args(cfg, tmp_path, *args[:4], "++search_output_layer", "['decision']",
                              "++search_output_file_format", "txt", "++search_output_file", str(tmp_path / "h.txt"),
                              "++search_data", "dev"))
    assert_one_line_error(proc, "search_output_file_format 'py'")
