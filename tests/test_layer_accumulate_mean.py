"""accumulate_mean: exponential average of the masked batch mean in training steps only, output
before the update; in a config as a prior for the output."""
import numpy as np
import pytest

from data_utils import btf, make_layer as make, run_layer as run
from helpers import config_12ax, describe, run_rnn, train_args, write_config
from returnn.errors import NetworkError

LENS = np.array([4, 2], np.int32)


def test_exponential_average_of_real_frames():
    data, val, x = btf(3, LENS, garbage=np.nan)
    layer = make("accumulate_mean", {"exp_average": 0.25, "is_prob_distribution": True}, [data])
    assert layer.output.dims == (data.feature_dim,)
    real = np.concatenate([x[0, :4], x[1, :2]])
    first = run(layer, [val], train=True).tensor.numpy()
    np.testing.assert_allclose(first, [1 / 3] * 3)  # the value before this step's update
    expect = 0.75 / 3 + 0.25 * real.mean(0)
    np.testing.assert_allclose(layer.mean.numpy(), expect, rtol=1e-5)
    np.testing.assert_allclose(run(layer, [val]).tensor.numpy(), expect, rtol=1e-5)  # evaluation: no update
    np.testing.assert_allclose(layer.mean.numpy(), expect, rtol=1e-5)
    assert make("accumulate_mean", {"exp_average": 0.1, "initial_value": 2.0}, [data]).mean.numpy().tolist() == [2.0] * 3
    with pytest.raises(NetworkError, match="'lay'.*exp_average"):
        make("accumulate_mean", {}, [data])
    with pytest.raises(NetworkError, match="'lay'.*only axes 'bt'"):
        make("accumulate_mean", {"exp_average": 0.1, "axes": "t"}, [data])


NETWORK = '''{
    "hidden": {"class": "linear", "activation": "tanh", "n_out": 8, "from": "data"},
    "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
    "prior": {"class": "accumulate_mean", "from": "output", "exp_average": 0.01, "is_prob_distribution": True},
    "scaled": {"class": "eval", "from": ["output", "prior"], "eval": "tf.math.log(source(0)) - tf.math.log(source(1))",
               "is_output_layer": True},
}'''
CONFIG = config_12ax(network=NETWORK, num_epochs=2)


def test_prior_in_a_config_is_saved_and_restored(tmp_path):
    config = write_config(tmp_path / "prior.config", CONFIG)
    proc = run_rnn(train_args(config, tmp_path), timeout=300)
    assert proc.returncode == 0, describe(proc)
    import tensorflow as tf
    reader = tf.train.load_checkpoint(str(tmp_path / "model.002"))
    names = [n for n in reader.get_variable_to_shape_map() if "mean" in n and "prior" in n]
    assert names, reader.get_variable_to_shape_map()
    prior = reader.get_tensor(names[0])
    assert prior.shape == (2,) and abs(prior.sum() - 1.0) < 1e-3 and not np.allclose(prior, 0.5)
