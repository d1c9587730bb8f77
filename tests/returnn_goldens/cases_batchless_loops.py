"""Golden cases of rec loops whose unit reads nothing with a batch axis (loaded by make_goldens.py): RETURNN
starts every ``prev:`` template without a batch axis and only sources add one, so a counter over ``prev:`` and
constants stays batch-less and the loop's output is (T, F) (its time axis the loop's: the source's, the target's,
or the one its 'end' sub-layer ends). As RETURNN's test nets test_engine_rec_subnet_count and
test_SplitLayer_move_out_as_output_layer (layers moved out of the loop after a batch-less one stay batch-less),
and a batch-less counter read by a layer with the source (that one has the batch axis)."""
from make_goldens import case

X3 = {"data": {"dim": 3}}
X3_CLASSES = {"data": {"dim": 3}, "classes": {"dim": 4, "sparse": True}}

# the loop along the source's time axis, which its unit never reads (RETURNN's test_engine_rec_subnet_count):
# (T, 1), frames 1, 2, ... up to the longest; the one-frame template of prev:output from its out_type, batch-less
case("rec_batchless_count", "batchless_loops", {
    "output": {"class": "rec", "from": "data", "unit": {
        "output": {"class": "activation", "activation": "identity + 1", "from": "prev:output", "initial_output": 0,
                   "out_type": {"dim": 1, "dtype": "int32"}}}}}, extern=X3)

# a constant counter (its template from the constant, batch-less already before) and a layer after it
case("rec_batchless_count_constant", "batchless_loops", {
    "output": {"class": "rec", "from": "data", "unit": {
        "one": {"class": "constant", "value": 1.0, "shape": [1]},
        "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
        "output": {"class": "eval", "from": "i", "eval": "source(0) * 2.0"}}}}, extern=X3)

# a batch-less linear recurrence along the target's time axis (training), its split and a linear moved out of the
# loop: all (T, F)
case("rec_batchless_split_moved_out", "batchless_loops", {
    "output": {"class": "rec", "from": [], "target": "classes", "unit": {
        "input": {"class": "linear", "n_out": 5, "from": "prev:input", "with_bias": True},
        "split": {"class": "split", "from": "input", "size_splits": [2, 3]},
        "output": {"class": "linear", "from": ["split/0", "split/1"], "n_out": 4, "activation": "tanh"}}}},
    extern=X3_CLASSES, train=True)

# the counter batch-less, the sum with the source's frame has the batch axis; the loop's output the sum
case("rec_batchless_count_plus_source", "batchless_loops", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "one": {"class": "constant", "value": 1.0, "shape": [3]},
        "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
        "output": {"class": "combine", "kind": "add", "from": ["i", "data:source"]}}},
    "output": {"class": "copy", "from": "loop"}}, extern=X3)

# the counter read from outside (loop/i): batch-less (T, 3)
case("rec_batchless_sub_layer_outside", "batchless_loops", {
    "loop": {"class": "rec", "from": "data", "unit": {
        "one": {"class": "constant", "value": 1.0, "shape": [3]},
        "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
        "output": {"class": "combine", "kind": "add", "from": ["i", "data:source"]}}},
    "output": {"class": "copy", "from": "loop/i"}}, extern=X3)

# no source, no target: the loop ended by its batch-less 'end' (one length for all sequences, a scalar)
case("rec_batchless_end", "batchless_loops", {
    "output": {"class": "rec", "from": [], "max_seq_len": 10, "unit": {
        "i": {"class": "activation", "activation": "identity + 1", "from": "prev:i", "initial_output": 0,
              "out_type": {"dim": 1}},
        "cmp": {"class": "compare", "kind": "greater_equal", "from": "i", "value": 4.0},
        "end": {"class": "squeeze", "from": "cmp", "axis": "F"},
        "output": {"class": "eval", "from": "i", "eval": "source(0) * 3.0"}}}}, extern=X3)

# a trainable initial output ('var') of a batch-less sub-layer: RETURNN's (F,) variable, not tiled over a batch
case("rec_batchless_initial_output_var", "batchless_loops", {
    "output": {"class": "rec", "from": "data", "unit": {
        "output": {"class": "linear", "n_out": 2, "from": "prev:output", "initial_output": "var"}}}}, extern=X3)

# a batch-less 'end': one length (RETURNN's scalar size), also of a reduce over the loop's frames afterwards
END_UNIT = {
    "i": {"class": "activation", "activation": "identity + 1", "from": "prev:i", "initial_output": 0,
          "out_type": {"dim": 1}},
    "cmp": {"class": "compare", "kind": "greater_equal", "from": "i", "value": 4.0},
    "end": {"class": "squeeze", "from": "cmp", "axis": "F"},
    "output": {"class": "eval", "from": "i", "eval": "source(0) * 3.0"}}
case("rec_batchless_end_reduce", "batchless_loops", {
    "loop": {"class": "rec", "from": [], "max_seq_len": 10, "unit": END_UNIT},
    "output": {"class": "reduce", "mode": "sum", "axis": "T", "from": "loop"}}, extern=X3)

# the same length for an output with the batch axis (from a base: layer), frames scaled by ':i' too
case("rec_batchless_end_batch_output", "batchless_loops", {
    "red": {"class": "reduce", "mode": "mean", "axis": "T", "from": "data"},
    "loop": {"class": "rec", "from": [], "max_seq_len": 10, "unit": {
        "one": {"class": "constant", "value": 1.0},
        "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
        "end": {"class": "compare", "kind": "greater_equal", "from": "i", "value": 3.0},
        "pos": {"class": "cast", "from": ":i", "dtype": "float32"},
        "output": {"class": "combine", "kind": "mul", "from": ["i", "pos", "base:red"]}}},
    "output": {"class": "reduce", "mode": "mean", "axis": "T", "from": "loop"}}, extern=X3)

# in a searched loop (a choice with search True over a declared axis, as rc_loop_search_over_declared_axis): a
# batch-less sub-layer has no beam either, the choice's reordering of the hypotheses leaves it as it is; read by
# the scores (the labels tell), as the loop's output ((T, 2), from the constant's template, or (T, 1) from its
# out_type), the choice's labels exported beside it
from golden_dims import dim_marker, dim_ref  # noqa: E402

X4_DIMS = {"data": {"dim_tags": [dim_ref("batch"), dim_marker("time"), dim_marker("feat", 4, "feature")]}}


def _search_unit(extra, out="choice"):
    """The searched unit: log-probabilities of the unstacked encoder frame, a beam-3 choice, a counter."""
    unit = {"u": {"class": "rec_unstack", "from": "base:enc", "axis": dim_ref("time")},
            "one": {"class": "constant", "value": 1.0, "shape": [2]},
            "i": {"class": "combine", "kind": "add", "from": ["prev:i", "one"], "initial_output": 0},
            "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True,
                    "out_dim": dim_marker("cls", 3, "feature"), "from": "u"},
            "choice": {"class": "choice", "from": "lin", "target": None, "beam_size": 3, "search": True,
                       "input_type": "log_prob", "length_normalization": False},
            "output": {"class": "copy", "from": out}}
    unit.update(extra)
    return {"enc": {"class": "linear", "activation": "tanh", "with_bias": True,
                    "out_dim": dim_marker("enc", 5, "feature"), "from": "data"},
            "loop": {"class": "rec", "from": [], "axis": dim_ref("time"), "unit": unit},
            "output": {"class": "copy", "from": "loop"}}


case("rec_batchless_search_scores_read", "batchless_loops", _search_unit({
    "lin": {"class": "linear", "activation": "log_softmax", "with_bias": True, "out_dim": dim_marker("cls", 3, "feature"),
            "from": ["u", "i"]}}), extern=X4_DIMS, lens={"data": [7, 4, 2]})
case("rec_batchless_search_loop_output", "batchless_loops", _search_unit({
    "labels": {"class": "copy", "from": "choice", "is_output_layer": True}}, out="i"),
    extern=X4_DIMS, lens={"data": [7, 4, 2]})
case("rec_batchless_search_count_out_type", "batchless_loops", _search_unit({
    "i": {"class": "activation", "activation": "identity + 1", "from": "prev:i", "initial_output": 0,
          "out_type": {"dim": 1}},
    "labels": {"class": "copy", "from": "choice", "is_output_layer": True}}, out="i"),
    extern=X4_DIMS, lens={"data": [7, 4, 2]})
