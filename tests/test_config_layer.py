"""Layer classes defined in a config with RETURNN's API (LayerBase subclass, get_out_data_from_opts,
__init__ setting self.output.placeholder from the sources' placeholders, register_layer_class) run on
this engine's layers (returnn/tf/layers/config_layer.py): template, values, variables created once and
trained, new dynamic axes, layouts, errors; and a config trained through rnn.py."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
import tensorflow as tf

from data_utils import btf, make_layer, run_layer
from helpers import config_12ax, describe, run_rnn, train_args, write_config
from returnn.config import Config
from returnn.errors import NetworkError

LENS = np.array([4, 2], np.int32)

CLASSES = """
import tensorflow as tf
from returnn.tf.layers.basic import LayerBase, _ConcatInputLayer, register_layer_class
from returnn.tf.util.data import Data, FeatureDim


class ScaleShiftLayer(LayerBase):
    layer_class = "scale_shift_cfg"

    def __init__(self, shift=1.0, **kwargs):
        super().__init__(**kwargs)
        with self.var_creation_scope():
            scale = self.add_param(tf.Variable(tf.ones([self.output.dim]) * 2.0, name="scale"))
        x = self.sources[0].output.copy_as_batch_major().placeholder
        self.output.placeholder = x * scale + shift

    @classmethod
    def get_out_data_from_opts(cls, name, sources, **kwargs):
        return sources[0].output.copy_template(name="%s_output" % name)


class ProjectLayer(_ConcatInputLayer):
    layer_class = "project_cfg"

    def __init__(self, n_out=None, **kwargs):
        super().__init__(n_out=n_out, **kwargs)
        dense = tf.keras.layers.Dense(n_out, use_bias=False, kernel_initializer="ones")
        self.output.placeholder = dense(self.input_data.placeholder)


class TimeMajorSumLayer(LayerBase):
    '''Returns time-major, masked with the sequence lengths; the engine puts it into the template's order.'''
    layer_class = "time_major_cfg"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        src = self.sources[0].output
        mask = tf.cast(src.get_sequence_mask_broadcast(), tf.float32)
        tm = src.copy_as_time_major()
        self.output = self.output.copy_as_time_major()
        lens = tf.cast(tm.get_sequence_lengths(), tf.float32)
        self.output.placeholder = tm.placeholder * tf.transpose(mask, [1, 0, 2]) + lens[None, :, None]


class HalveTimeLayer(LayerBase):
    '''A new dynamic axis: every second frame, with its own lengths.'''
    layer_class = "halve_time_cfg"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        src = self.sources[0].output
        self.output.placeholder = src.placeholder[:, ::2]
        self.output.size_placeholder = {0: (src.get_sequence_lengths() + 1) // 2}

    @classmethod
    def get_out_data_from_opts(cls, name, sources, **kwargs):
        src = sources[0].output
        return src.copy_template_replace_dim_tag(src.time_dim_axis, src.get_time_dim_tag().ceildiv_right(2),
                                                 name="%s_output" % name)


class GateByLayer(_ConcatInputLayer):
    '''Another layer as an input through an option (RETURNN: resolved in transform_config_dict).'''
    layer_class = "gate_by_cfg"

    def __init__(self, gate, **kwargs):
        super().__init__(**kwargs)
        self.output.placeholder = self.input_data.placeholder * tf.sigmoid(gate.output.placeholder)

    @classmethod
    def transform_config_dict(cls, d, network, get_layer):
        super().transform_config_dict(d, network=network, get_layer=get_layer)
        d["gate"] = get_layer(d["gate"])


class FromStateLayer(LayerBase):
    '''Makes an option its 'from' (as the published HMM factorization layer does) and reads another.'''
    layer_class = "from_state_cfg"

    def __init__(self, state, other, **kwargs):
        super().__init__(**kwargs)
        assert self.sources[0] is state
        self.output.placeholder = state.output.placeholder - other.output.placeholder

    @classmethod
    def transform_config_dict(cls, d, network, get_layer):
        d["from"] = d["state"]
        super().transform_config_dict(d, network=network, get_layer=get_layer)
        d["state"] = get_layer(d["state"])
        d["other"] = get_layer(d["other"])

    @classmethod
    def get_out_data_from_opts(cls, name, state, **kwargs):
        return state.output.copy_template(name="%s_output" % name)


class RunningSumLayer(_ConcatInputLayer):
    '''Own loop state (RETURNN's self-attention pattern): the sum so far in a loop step, a masked
    cumulative sum over the whole sequence when moved out of the loop.'''
    layer_class = "running_sum_cfg"
    recurrent = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        x = self.input_data.copy_as_batch_major()
        if self._rec_previous_layer:
            total = self._rec_previous_layer.rec_vars_outputs["total"] + x.placeholder
            self.rec_vars_outputs["total"] = total
            self.output.placeholder = total
        else:
            mask = tf.cast(x.get_sequence_mask_broadcast(), tf.float32)
            self.output.placeholder = tf.cumsum(x.placeholder * mask, axis=1)

    @classmethod
    def get_rec_initial_extra_outputs(cls, batch_dim, rec_layer, sources=(), **kwargs):
        return {"total": tf.zeros([batch_dim, sources[0].output.dim])}


for cls in (ScaleShiftLayer, ProjectLayer, TimeMajorSumLayer, HalveTimeLayer, GateByLayer, FromStateLayer,
            RunningSumLayer):
    register_layer_class(cls)
"""


@pytest.fixture(scope="module", autouse=True)
def registered(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "classes.py"
    path.write_text(CLASSES)
    Config().load_file(str(path))


def test_values_and_variables_created_once():
    a, va, x = btf(3, LENS)
    layer = make_layer("scale_shift_cfg", {"shift": 0.5}, [a])
    assert layer.output.dims == a.dims and list(layer.own_params) == ["scale"]
    assert [v.name for v in layer.trainable_variables] == ["scale:0"]
    out = run_layer(layer, [va])
    np.testing.assert_allclose(out.tensor.numpy()[0, :4], x[0, :4] * 2 + 0.5, rtol=1e-6)
    assert out.size("T").numpy().tolist() == LENS.tolist()
    # in a compiled step, the variable is the one made at construction (no new one)
    step = tf.function(lambda t: run_layer(layer, [va.with_tensor(t)]).tensor)
    layer.own_params["scale"].assign(tf.fill([3], 3.0))
    np.testing.assert_allclose(step(va.tensor).numpy()[1, :2], x[1, :2] * 3 + 0.5, rtol=1e-6)
    assert len(layer.trainable_variables) == 1


def test_concat_input_and_keras_layer_with_default_template():
    a, va, x = btf(3, LENS)
    b, vb, y = btf(2, LENS, time=a.time_dim, seed=1)
    layer = make_layer("project_cfg", {"n_out": 5}, [a, b])
    assert layer.output.dim == 5 and layer.output.dims[:2] == a.dims[:2]
    out = run_layer(layer, [va, vb]).tensor.numpy()
    np.testing.assert_allclose(out[0, :4], np.repeat((x[0, :4].sum(-1) + y[0, :4].sum(-1))[:, None], 5, -1),
                               rtol=1e-5)
    assert len(layer.trainable_variables) == 1


def test_layout_masks_and_new_dynamic_axis():
    a, va, x = btf(2, LENS)  # padded frames hold 1e4
    out = run_layer(make_layer("time_major_cfg", {}, [a]), [va])
    got = out.tensor.numpy()  # back in the template's (B, T, F) order
    np.testing.assert_allclose(got[1, :2], x[1, :2] + 2, rtol=1e-6)
    assert np.all(got[1, 2:] == 2)  # padding masked by get_sequence_mask_broadcast
    halve = make_layer("halve_time_cfg", {}, [a])
    out = run_layer(halve, [va])
    assert out.tensor.shape[1] == 2 and out.size("T").numpy().tolist() == [2, 1]
    assert halve.output.time_dim.dimension is None and halve.output.time_dim != a.time_dim


def test_unknown_option_and_errors_are_one_line():
    a, va, x = btf(3, LENS)
    with pytest.raises(NetworkError, match="shfit"):
        make_layer("scale_shift_cfg", {"shfit": 1.0}, [a])


def test_config_with_own_layer_class_trains(tmp_path):
    """The class is defined in the config file itself; its variable is trained and checkpointed."""
    head = textwrap.dedent('''
        import tensorflow as tf
        from returnn.tf.layers.basic import LayerBase, register_layer_class

        class GainLayer(LayerBase):
            layer_class = "gain"

            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                gain = self.add_param(tf.Variable(tf.ones([self.output.dim]), name="gain"))
                self.output.placeholder = tf.tanh(self.sources[0].output.placeholder * gain)

            @classmethod
            def get_out_data_from_opts(cls, name, sources, **kwargs):
                return sources[0].output.copy_template(name=name)

        register_layer_class(GainLayer)
        ''')
    net = ('{"hidden": {"class": "linear", "activation": None, "n_out": 8, "from": "data"},'
           ' "gain": {"class": "gain", "from": "hidden"},'
           ' "output": {"class": "softmax", "loss": "ce", "from": "gain"}}')
    config = write_config(tmp_path / "own_layer.config", config_12ax(net, num_epochs=2, head=head))
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    reader = tf.train.load_checkpoint(str(tmp_path / "model.002"))
    names = [n for n in reader.get_variable_to_shape_map() if n.startswith("gain/")]
    assert any(n.startswith("gain/gain") for n in names), names
    gain = reader.get_tensor([n for n in names if n.startswith("gain/gain") and "Adam" not in n][0])
    assert not np.allclose(gain, 1.0)  # trained


def test_auto_register_layer_classes_from_a_module_file(tmp_path, monkeypatch):
    """RETURNN's ``auto_register_layer_classes('path/to/module.py')`` (published configs, through the
    old ``TFNetworkLayer`` name): every LayerBase subclass with a layer_class in that file builds."""
    (tmp_path / "my_layers.py").write_text(textwrap.dedent('''
        from returnn.tf.layers.basic import LayerBase

        class NegLayer(LayerBase):
            layer_class = "neg_from_file"

            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.output.placeholder = -self.sources[0].output.placeholder

            @classmethod
            def get_out_data_from_opts(cls, name, sources, **kwargs):
                return sources[0].output.copy_template(name=name)

        class NotALayer:
            layer_class = "not_a_layer"
        '''))
    monkeypatch.chdir(tmp_path)
    from returnn.config_env import install_old_module_names
    install_old_module_names()
    import TFNetworkLayer as old  # noqa: N813 (RETURNN's old module name, as published configs import it)
    old.auto_register_layer_classes("my_layers.py")
    a, va, x = btf(3, LENS)
    out = run_layer(make_layer("neg_from_file", {}, [a]), [va])
    np.testing.assert_array_equal(out.tensor.numpy(), -va.tensor.numpy())
    with pytest.raises(NetworkError, match="not_a_layer"):
        make_layer("not_a_layer", {}, [a])
    with pytest.raises(ImportError, match="no Python file 'missing.py'"):
        old.auto_register_layer_classes("missing.py")


def _gate_net(in_rec: bool):
    from returnn.tensor import Data
    from returnn.tf.network import TFNetwork
    layers = {"g": {"class": "linear", "activation": None, "n_out": 3, "from": "data"},
              "o": {"class": "gate_by_cfg", "from": "x", "gate": "g"},
              "x": {"class": "copy", "from": "data"},
              "d": {"class": "from_state_cfg", "from": "x", "state": "g", "other": "x"},
              "output": {"class": "copy", "from": ["o", "d"]}}
    if in_rec:
        layers = {k: dict(v, **{"from": "data:source"}) if v.get("from") == "data" else v for k, v in layers.items()}
        net = {"output": {"class": "rec", "from": "data", "unit": layers}}
    else:
        net = {k: dict(v, is_output_layer=True) for k, v in layers.items()}
    return TFNetwork(net, {"data": Data("data", shape=(None, 3))})


@pytest.mark.parametrize("in_rec", [False, True], ids=["top", "rec_unit"])
def test_layers_named_by_options_resolved_in_transform_config_dict(in_rec):
    from returnn.tf.layers import RunContext
    from returnn.tf.layers.config_layer import ConfigLayer
    from returnn.tf.layers import get_layer_class
    adapter = get_layer_class("from_state_cfg", "d", {})
    assert issubclass(adapter, ConfigLayer) and adapter.ref_options == ("state", "other") \
        and adapter.from_option == "state"
    assert get_layer_class("gate_by_cfg", "o", {}).ref_options == ("gate",)
    net = _gate_net(in_rec)
    x = np.random.RandomState(3).randn(2, 4, 3).astype("float32")
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant([4, 2])}, RunContext(False))
    prefix = "output/" if in_rec else ""
    layers = net.layers["output"].sub_layers() if in_rec else net.layers
    w, b = (v.numpy() for v in layers["g"].variables)
    g = x @ w + b
    np.testing.assert_allclose(out[prefix + "o"].tensor.numpy()[0], (x * (1 / (1 + np.exp(-g))))[0], rtol=1e-5)
    np.testing.assert_allclose(out[prefix + "d"].tensor.numpy()[0], (g - x)[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[prefix + "d"].tensor.numpy()[1, :2], (g - x)[1, :2], rtol=1e-5, atol=1e-6)


def test_own_loop_state_class_moved_out_of_the_loop_runs_over_the_sequence():
    """RETURNN asks a layer for get_rec_initial_extra_outputs only when it stays in the loop; moved out
    (it reads no prev:), its __init__ sees the whole sequence and _rec_previous_layer None."""
    from returnn.tensor import Data
    from returnn.tf.layers import RunContext
    from returnn.tf.network import TFNetwork
    unit = {"c": {"class": "running_sum_cfg", "from": "data:source"}, "output": {"class": "copy", "from": "c"}}
    net = TFNetwork({"output": {"class": "rec", "from": "data", "unit": unit}}, {"data": Data("data", shape=(None, 3))})
    x = np.random.RandomState(5).randn(2, 4, 3).astype("float32")
    x[1, 2:] = np.nan  # padding
    out = net.forward({"data": tf.constant(x), "data:seq_len": tf.constant(LENS)}, RunContext(False))["output"]
    y = out.tensor.numpy()
    y = y if out.data.batch_dim_axis == 0 else np.transpose(y, (1, 0, 2))
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(y[b, :n], np.cumsum(x[b, :n], axis=0), rtol=1e-5)
    # in the loop (it reads prev:output) its own state is not supported here: refused, naming the class
    unit = {"s": {"class": "combine", "kind": "add", "from": ["data:source", "prev:output"]},
            "c": {"class": "running_sum_cfg", "from": "s"}, "output": {"class": "copy", "from": "c"}}
    with pytest.raises(NetworkError, match="RunningSumLayer defines get_rec_initial_extra_outputs"):
        TFNetwork({"output": {"class": "rec", "from": "data", "unit": unit}}, {"data": Data("data", shape=(None, 3))})
