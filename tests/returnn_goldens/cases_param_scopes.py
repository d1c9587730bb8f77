"""Golden cases of where parameters live (RETURNN's names, what checkpoints store): a rec or rnn_cell
layer with a ``name_scope`` of its own has no ``rec/`` subscope (RETURNN's test_partly_trainable_reclayer:
a second rec layer reading the first one's parameters by ``name_scope: "output/rec"``); a subnetwork's
``name_scope`` moves its layers' parameters along (``""``: a decoder's sub-layers in the enclosing
scope); a masked_computation's ``name_scope`` is its unit's. The golden test compares the parameter
names with RETURNN's before the values."""
from make_goldens import case
from golden_dims import dim_marker, dim_ref

X = {"data": {"dim": 5}}
case("param_scope_rec_own_name_scope", "param_scopes", {
    "enc": {"class": "rec", "unit": "lstm", "n_out": 3, "from": "data", "name_scope": "lm"},
    "cell": {"class": "rnn_cell", "unit": "LSTMBlock", "n_out": 2, "from": "data", "name_scope": "c"},
    "dec": {"class": "rec", "from": "data", "name_scope": "dec_scope",
            "unit": {"a": {"class": "linear", "activation": "tanh", "n_out": 3, "from": ["data:source", "prev:a"]},
                     "output": {"class": "copy", "from": "a"}}},
    "output": {"class": "copy", "from": ["enc", "cell", "dec"]}}, extern=X)
case("param_scope_rec_reads_other_rec_scope", "param_scopes", {
    "first": {"class": "rec", "from": "data",
              "unit": {"a": {"class": "linear", "n_out": 3, "from": "data:source"}, "output": {"class": "copy", "from": "a"}}},
    "label_model": {"class": "rec", "from": "first", "name_scope": "first/rec",
                    "unit": {"b": {"class": "linear", "n_out": 2, "from": "data:source"},
                             "output": {"class": "copy", "from": "b"}}},
    "output": {"class": "copy", "from": ["first", "label_model"]}}, extern=X,
    notes="RETURNN's test_partly_trainable_reclayer: label_model's b/W in first/rec/b/")
case("param_scope_subnetwork_name_scope", "param_scopes", {
    "output": {"class": "subnetwork", "from": "data", "name_scope": "foo", "subnetwork": {
        "a": {"class": "linear", "n_out": 3, "from": "data"},
        "inner": {"class": "subnetwork", "from": "a", "subnetwork": {
            "output": {"class": "rec", "unit": "lstm", "n_out": 2, "from": "data"}}},
        "output": {"class": "linear", "n_out": 2, "from": ["a", "inner"], "name_scope": "bar"}}}}, extern=X)
case("param_scope_subnetwork_empty_name_scope", "param_scopes", {
    "sub": {"class": "subnetwork", "from": "data", "name_scope": "", "subnetwork": {
        "a": {"class": "linear", "n_out": 3, "from": "data"},
        "output": {"class": "rec", "unit": "lstm", "n_out": 2, "from": "a"}}},
    "sub2": {"class": "subnetwork", "from": "data", "name_scope": "/abs", "subnetwork": {
        "output": {"class": "rec", "unit": "lstm", "n_out": 2, "from": "data", "name_scope": "r"}}},
    "output": {"class": "copy", "from": ["sub", "sub2"]}}, extern=X)
_T = dim_marker("time", None)
_MASKED = {"data": {"dim": 5, "same_dim_tags_as": {"t": _T}},
           "mask": {"dim": 2, "dtype": "bool", "sparse": True, "same_dim_tags_as": {"t": dim_ref("time")}}}
case("param_scope_masked_unit_rec", "param_scopes", {
    "output": {"class": "masked_computation", "from": "data", "mask": "data:mask",
               "unit": {"class": "rec", "unit": "lstm", "from": "data", "n_out": 3}}}, extern=_MASKED,
    notes="RETURNN: the unit's parameters in output/rec/ (the masked layer's scope, the rec subscope kept)")
case("param_scope_masked_name_scope", "param_scopes", {
    "output": {"class": "masked_computation", "from": "data", "mask": "data:mask", "name_scope": "foo",
               "unit": {"class": "rec", "unit": "lstm", "from": "data", "n_out": 3}}}, extern=_MASKED,
    notes="RETURNN: the masked layer's name_scope is its unit's: foo/W (no rec subscope)")
case("param_scope_rec_unit_batch_norm", "param_scopes", {
    "output": {"class": "rec", "from": "data", "batch_norm": {"masked_time": False, "param_version": 2, "momentum": 0.5},
               "unit": {"cell": {"class": "rnn_cell", "unit": "GRU", "n_out": 4, "from": "data:source"},
                        "output": {"class": "copy", "from": "cell"}}},
    "named": {"class": "rec", "from": "data", "name_scope": "nm", "batch_norm": True,
              "unit": {"output": {"class": "linear", "n_out": 3, "from": "data:source"}}}}, extern=X,
    notes="returnn_fuzz mutate seed 239 #72: the batch_norm option of a rec layer with a unit dict puts its "
          "parameters in output/rec/batch_norm/ (RETURNN's rec scope), with a name_scope directly in it")
