"""Dependency analysis of rec unit dicts: references, checks, in-loop vs. moved-out layers."""
import pytest

from returnn.errors import NetworkError
from returnn.tf.layers.rec_net.deps import Ref, analyse_unit

ATTENTION_UNIT = {
    "output": {"class": "choice", "target": "classes", "beam_size": 4, "from": ["output_prob"]},
    "end": {"class": "compare", "from": ["output"], "value": 0},
    "target_embed": {"class": "linear", "activation": None, "from": ["output"], "n_out": 8,
                     "initial_output": 0},
    "s_transformed": {"class": "linear", "activation": None, "with_bias": False, "from": ["s"], "n_out": 8},
    "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s_transformed"], "n_out": 8},
    "energy": {"class": "linear", "activation": None, "from": ["energy_in"], "n_out": 1},
    "att_weights": {"class": "softmax_over_spatial", "from": ["energy"]},
    "att": {"class": "generic_attention", "weights": "att_weights", "base": "base:encoder"},
    "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["prev:target_embed", "prev:att"], "n_out": 8},
    "readout_in": {"class": "linear", "from": ["s", "prev:target_embed", "att"], "activation": None, "n_out": 8},
    "output_prob": {"class": "softmax", "from": ["readout_in"], "target": "classes", "loss": "ce"},
}


def test_ref_parse():
    assert Ref.parse("prev:s") == Ref("prev", "s")
    assert Ref.parse("base:encoder") == Ref("base", "encoder")
    assert Ref.parse("data:source") == Ref("data", "source")
    assert Ref.parse("data") == Ref("data", "source")
    assert Ref.parse(":i") == Ref("step", ":i")
    assert Ref.parse("att") == Ref("self", "att")


def test_attention_unit_all_in_loop():
    plan = analyse_unit(ATTENTION_UNIT, "output", base_layers=["encoder", "enc_ctx"], has_source=False)
    assert plan.prev_used == {"target_embed", "att"}
    assert plan.base_used == {"encoder", "enc_ctx"}
    # everything depends on the state s (rnn_cell) or on the choice: nothing moves out
    assert set(plan.in_loop) == set(ATTENTION_UNIT) - {"end"} and plan.out_of_loop == []
    assert plan.after_loop == ["end"]  # nothing in the loop reads it (search forces it in: step_only)
    pos = {n: i for i, n in enumerate(plan.in_loop)}
    for a, b in [("s", "s_transformed"), ("att_weights", "att"), ("output_prob", "output")]:
        assert pos[a] < pos[b]


def test_move_out_of_loop():
    unit = {
        "ff": {"class": "linear", "from": ["data:source"], "n_out": 4, "activation": "tanh"},
        "ff2": {"class": "linear", "from": ["ff", "base:enc"], "n_out": 4},
        "state": {"class": "combine", "kind": "add", "from": ["prev:state", "ff2"], "initial_output": "zeros"},
        "idx": {"class": "copy", "from": [":i"]},
        "output": {"class": "combine", "kind": "add", "from": ["state", "ff"]},
    }
    plan = analyse_unit(unit, "r", base_layers=["enc"], has_source=True)
    assert plan.out_of_loop == ["ff", "ff2"]
    # a reader of ':i' is not moved before the loop; nothing in the loop reads it: after it (as RETURNN)
    assert set(plan.in_loop) == {"state"} and plan.after_loop == ["idx", "output"]
    plan2 = analyse_unit(unit, "r", step_only=["ff"])
    assert plan2.out_of_loop == []


def test_initial_output_layer_is_not_a_step_edge():
    unit = {"init": {"class": "copy", "from": ["base:enc"]},
            "output": {"class": "combine", "kind": "add", "from": ["prev:output", "data:source"],
                       "initial_output": "init"}}
    plan = analyse_unit(unit, "r")
    assert plan.out_of_loop == ["init"] and plan.in_loop == ["output"]
    assert Ref("self", "init") in plan.deps["output"]


@pytest.mark.parametrize("unit, msg", [
    ({"output": {"class": "copy", "from": ["prev:nope"]}}, "sub-layer 'output': unknown layer 'nope' in 'prev:'"),
    ({"output": {"class": "copy", "from": ["nope"]}}, "sub-layer 'output': unknown layer 'nope'"),
    ({"a": {"class": "copy", "from": ["output"]}, "output": {"class": "copy", "from": ["a"]}},
     "in a cycle without 'prev:'"),
    ({"a": {"class": "copy", "from": ["data"]}}, "no 'output' layer"),
    ({"output": {"class": "copy", "from": ["base:x"]}}, "unknown outer layer 'base:x'"),
    ({"output": {"class": "copy", "from": ["data:source"]}}, "'data:source' but the rec layer has no 'from'"),
    ({"output": "copy"}, "expected a dict"),
])
def test_bad_units_one_line(unit, msg):
    with pytest.raises(NetworkError) as e:
        analyse_unit(unit, "dec", base_layers=["enc"], has_source=False)
    text = str(e.value)
    assert msg in text and "\n" not in text and "'dec'" in text


def test_cycle_through_prev_is_fine():
    unit = {"a": {"class": "copy", "from": ["prev:output"]}, "output": {"class": "copy", "from": ["a"]}}
    plan = analyse_unit(unit, "r")
    assert plan.in_loop == ["a", "output"] and plan.after_loop == []


def test_switch_refs_without_default_from():
    unit = {"c": {"class": "constant", "value": 1.0},
            "output": {"class": "switch", "condition": "base:flag", "true_from": "prev:output", "false_from": "c",
                       "initial_output": 0}}
    plan = analyse_unit(unit, "r", base_layers=["flag"], has_source=False)
    assert plan.out_of_loop == ["c"] and plan.in_loop == ["output"]
    assert plan.base_used == {"flag"} and plan.prev_used == {"output"}


def test_teacher_forcing_moves_target_choice_out():
    plan = analyse_unit(ATTENTION_UNIT, "output", base_layers=["encoder", "enc_ctx"], has_source=False,
                        teacher_forcing=True)
    # the choice is the target: its embedding and 'end' move out; the attention state cycle stays
    assert set(plan.out_of_loop) == {"output", "target_embed", "end"}
    assert {"s", "att", "att_weights"} <= set(plan.in_loop)
    # the readout only reads the loop: computed after it on the stacked outputs
    assert plan.after_loop == ["readout_in", "output_prob"]


def test_enc_dec_teacher_forcing_has_no_loop():
    unit = {
        "output_embed": {"class": "linear", "activation": None, "from": "output", "n_out": 5},
        "s": {"class": "rec", "unit": "nativelstm2", "from": ["prev:output_embed", "base:input_last"], "n_out": 5},
        "prob": {"class": "softmax", "from": "s", "target": "classes0", "loss": "ce"},
        "output": {"class": "choice", "from": "prob", "target": "classes0", "beam_size": 8},
        "end": {"class": "compare", "from": "output", "value": 2},
    }
    plan = analyse_unit(unit, "output", base_layers=["input_last"], has_source=False, teacher_forcing=True)
    assert plan.in_loop == [] and set(plan.out_of_loop) == set(unit)
    plan = analyse_unit(unit, "output", base_layers=["input_last"], has_source=False, step_only=["output", "end"])
    assert set(plan.in_loop) == set(unit)
