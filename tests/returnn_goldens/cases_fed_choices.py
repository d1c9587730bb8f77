"""Golden cases of a choice fed its target (``search: False``) beside a choice that searches in a training network
(``search: True``: the loop searches, as long as its target; loaded by make_goldens.py). RETURNN's
``add_to_beam_scores`` defaults to the network's search flag: here the fed choice adds nothing to the hypotheses'
scores and its ``from`` is not built (no parameters of its scores' layers); with ``add_to_beam_scores: True`` its
score of the target label is added to each hypothesis' score (the labels tell). The fed labels reach the scores
through ``prev:fed``. The search task's forms are search goldens (tests/test_search_fuzz_goldens.py)."""
from make_goldens import case


def _net(add):
    """The decoder; ``add``: the fed choice's add_to_beam_scores (None: not given)."""
    fed = {"class": "choice", "from": "prob2", "target": "classes", "search": False, "beam_size": 3,
           "initial_output": 0, "length_normalization": False}
    if add is not None:
        fed["add_to_beam_scores"] = add
    return {
        "enc": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
        "loop": {"class": "rec", "from": [], "target": "classes", "unit": {
            "emb": {"class": "linear", "activation": None, "with_bias": False, "n_out": 3, "from": "prev:output"},
            "emb2": {"class": "linear", "activation": None, "with_bias": False, "n_out": 3, "from": "prev:fed"},
            "prob": {"class": "softmax", "n_out": 4, "from": ["emb", "base:enc", "emb2"]},
            "output": {"class": "choice", "from": "prob", "target": "classes", "beam_size": 3, "search": True,
                       "initial_output": 0, "length_normalization": False},
            "cur": {"class": "linear", "activation": "tanh", "with_bias": False, "n_out": 3, "from": "output"},
            "prob2": {"class": "softmax", "n_out": 4, "from": ["cur", "base:enc"]},
            "fed": fed}},
        "output": {"class": "copy", "from": "loop"}}


EXTERN = {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}
LENS = {"data": [5, 3, 4], "classes": [4, 3, 2]}
case("fed_choice_search_in_training_default", "fed_choices", _net(None), extern=EXTERN, lens=LENS, train=True)
case("fed_choice_search_in_training_adds_scores", "fed_choices", _net(True), extern=EXTERN, lens=LENS, train=True)
# the fed choice with scheduled_sampling (RETURNN samples its label from its scores, each engine from its own random
# stream: mutate seed 227 #33 differed in the labels): with gold_mixin_prob 1.0 every sample is the target label,
# so the rest of the wiring (scores added, prev:fed) is compared
_SAMPLED = _net(True)
_SAMPLED["loop"]["unit"]["fed"]["scheduled_sampling"] = {"gold_mixin_prob": 1.0}
case("fed_choice_search_in_training_scheduled_sampling_gold", "fed_choices", _SAMPLED, extern=EXTERN, lens=LENS,
     train=True)
