"""benchmarks/returnn_fuzz.py --kind published (the published configs' nets against RETURNN): the cases
drawn from the dumped nets and how a net RETURNN refuses is judged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import returnn_fuzz as rf  # noqa: E402
import returnn_fuzz_testnets as tn  # noqa: E402


def _dump(tmp_path: Path, network: dict, extern: dict) -> str:
    """A cases dir with one dumped net as ``published_configs.py --dump-nets`` writes it."""
    with open(tmp_path / "x_config.json", "w") as f:
        json.dump({"network": network, "extern": extern, "config": {}, "lengths": {}}, f)
    return str(tmp_path)


def test_published_cases_drop_load_on_init(tmp_path):
    """A subnetwork's checkpoint of the config's site is no part of the comparison (the harness sets the
    parameters): RETURNN's side failed reading it (train-scalar-minwer's LM), counted LAX."""
    net = {"lm": {"class": "subnetwork", "from": "data", "load_on_init": "/site/lm/network.035",
                  "subnetwork": {"output": {"class": "linear", "n_out": 3, "from": "data"}}},
           "output": {"class": "copy", "from": "lm"}}
    case, = tn.published_cases(_dump(tmp_path, net, {"data": {"shape": [None, 4], "dim": 4}}), 0, 5)
    assert "load_on_init" not in json.dumps(case["network"])
    assert case["network"]["lm"]["subnetwork"] == net["lm"]["subnetwork"]


def test_a_training_case_checks_its_losses_targets(tmp_path):
    """RETURNN refuses a loss whose output dim is not the target's when it builds a net to train (its
    Loss._check_init), as this engine's training does (check_losses): BOTH-FAIL, not LAX (the
    hmm-factorization config's output_prob of 16163 against classes of 13532)."""
    net = {"output": {"class": "linear", "activation": "softmax", "n_out": 5, "from": "data", "loss": "ce",
                      "target": "classes"}}
    extern = {"data": {"shape": [None, 4], "dim": 4},
              "classes": {"shape": [None], "dim": 7, "sparse": True, "dtype": "int32"}}
    case, = tn.published_cases(_dump(tmp_path, net, extern), 0, 5)
    kind, detail = rf.verdict(case, str(tmp_path), "AssertionError: Expected output dim is 7")
    assert kind == "BOTH-FAIL", (kind, detail)
    assert "output dim is 5" in detail
