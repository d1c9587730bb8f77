"""RETURNN init specs (forward_weights_init, recurrent_weights_init, bias_init) as layers use them."""
import math

import numpy as np
import pytest

from data_utils import make_layer
from returnn.errors import NetworkError
from returnn.tensor import Data
from returnn.tf.layers.initializers import initial_value

RNG = np.random.RandomState


def test_specs_as_returnn_writes_them():
    np.testing.assert_array_equal(initial_value(0.5, [2, 3], RNG(0)), np.full([2, 3], 0.5))
    np.testing.assert_array_equal(initial_value("zeros_initializer", [4], RNG(0)), np.zeros(4))
    np.testing.assert_array_equal(initial_value("ones", [4], RNG(0)), np.ones(4))
    big = [300, 200]
    glorot = initial_value("glorot_uniform", big, RNG(1))
    limit = math.sqrt(6 / 500)
    assert glorot.max() <= limit and glorot.min() >= -limit and glorot.std() == pytest.approx(limit / math.sqrt(3), rel=0.03)
    normal = initial_value("random_normal_initializer(stddev=1/math.sqrt(400))", big, RNG(2))
    assert normal.std() == pytest.approx(0.05, rel=0.03) and abs(normal.mean()) < 0.005
    vs = initial_value("variance_scaling_initializer(mode='fan_in', distribution='uniform', scale=0.78)", big, RNG(3))
    assert np.abs(vs).max() <= math.sqrt(3 * 0.78 / 300) and vs.std() == pytest.approx(math.sqrt(0.78 / 300), rel=0.03)
    trunc = initial_value("truncated_normal_initializer(stddev=0.1)", big, RNG(4))
    assert np.abs(trunc).max() <= 0.2
    conv = initial_value("glorot_uniform", [3, 3, 8, 16], RNG(5))  # TF fans: receptive field times channels
    assert np.abs(conv).max() <= math.sqrt(6 / (9 * 8 + 9 * 16))
    ortho = initial_value("orthogonal", [8, 32], RNG(6))
    np.testing.assert_allclose(ortho @ ortho.T, np.eye(8), atol=1e-5)
    uni = initial_value("random_uniform_initializer(-0.1, 0.1)", [50], RNG(7))
    assert uni.min() >= -0.1 and uni.max() <= 0.1
    np.testing.assert_array_equal(initial_value("glorot_uniform", big, RNG(1)), glorot)  # seeded


@pytest.mark.parametrize("spec", ["constant(0.05)", "zeros()", "random_normal(stddev=0.1)",
                                  "random_uniform(-0.1, 0.1)", "truncated_normal(stddev=0.1)"])
def test_tensorflow_op_names_called_in_an_init_string_are_refused_as_returnn(spec):
    """In RETURNN's get_initializer these names are TensorFlow's ops (tf.constant, tf.random_normal, ...):
    called, they give a tensor or a TypeError, so RETURNN fails (checked with RETURNN 1.20261022); their
    *_initializer forms and the bare names are initializers in both engines."""
    with pytest.raises(ValueError, match=r"is TensorFlow's op tf\.\w+ in RETURNN's initializer namespace"):
        initial_value(spec, [4], RNG(0))
    name = spec.split("(")[0]
    assert initial_value(name, [4], RNG(0)).shape == (4,)
    assert initial_value(spec.replace(name, name + "_initializer", 1), [4], RNG(0)).shape == (4,)


def test_layers_read_init_options_and_errors_name_them():
    data = Data("data", shape=(None, 6))
    lin = make_layer("linear", {"n_out": 4, "forward_weights_init": "random_normal_initializer(stddev=0.01)",
                                "bias_init": 0.5}, [data])
    np.testing.assert_array_equal(lin.bias.numpy(), np.full(4, 0.5))
    assert np.abs(lin.W.numpy()).max() < 0.06
    rec = make_layer("rec", {"n_out": 4, "recurrent_weights_init": "orthogonal", "bias_init": 0.1}, [data])
    w_re = rec.W_re.numpy()
    np.testing.assert_allclose(w_re @ w_re.T, np.eye(4), atol=1e-5)
    np.testing.assert_array_equal(rec.bias.numpy(), np.full(16, 0.1, np.float32))
    conv = make_layer("conv", {"n_out": 2, "filter_size": (3,), "forward_weights_init": "zeros"}, [data])
    assert not conv.W.numpy().any()
    with pytest.raises(NetworkError, match="layer 'lay' \\(linear\\): option 'forward_weights_init'.*bogus"):
        make_layer("linear", {"n_out": 4, "forward_weights_init": "bogus_init(3)"}, [data])
    with pytest.raises(NetworkError, match="'lay'.*bias_init"):
        make_layer("copy", {"bias_init": 0.0}, [data])  # as in RETURNN: copy has no weights


def test_initializer_given_as_a_class_dict():
    """RETURNN configs also write initializers as {"class": "VarianceScaling", ...}."""
    import numpy as np
    import pytest
    from returnn.tf.layers.initializers import initial_value
    rng = np.random.RandomState(0)
    w = initial_value({"class": "VarianceScaling", "distribution": "uniform", "mode": "fan_in", "scale": 0.78},
                      [400, 300], rng)
    limit = np.sqrt(3 * 0.78 / 400)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit
    assert np.allclose(initial_value({"class": "Constant", "value": 0.5}, [2], rng), 0.5)
    with pytest.raises(ValueError, match="known classes:.*VarianceScaling"):
        initial_value({"class": "NoSuchInit"}, [2], rng)
