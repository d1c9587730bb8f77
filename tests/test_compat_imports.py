"""Old RETURNN module names and TF1 names in config code (returnn/config_env.py, returnn/tf/compat.py)."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from helpers import REPO, TINY_12AX, describe, run_rnn, train_args, write_config
from returnn.config import Config, get_global_config
from returnn.errors import ConfigError


def load(tmp_path, text: str, name: str = "cfg.py") -> Config:
    path = write_config(tmp_path / name, textwrap.dedent(text))
    config = Config()
    config.load_file(str(path))
    return config


def test_old_module_imports_give_the_new_modules(tmp_path):
    config = load(tmp_path, """
        from Pretrain import WrapEpochValue
        from TFUtil import where_bc
        import TFUtil
        import returnn.TFUtil
        import TFHorovod
        hvd = TFHorovod.get_ctx(config=config)
        from returnn.Util import describe_returnn_version
        returnn_version = describe_returnn_version()
        tf_version_tuple = returnn.TFUtil.tf_version_tuple()
        from Util import NumbersDict, cleanup_env_var_path, get_login_username
        from returnn.util.basic import BackendEngine
        is_tf = BackendEngine.is_tensorflow_selected()
        from returnn.config import get_global_config
        seq_len = NumbersDict({"data": 10, "classes": 3}) * 2
        wrapped = WrapEpochValue(lambda epoch: epoch * 10).get_value(epoch=3)
        refs = (where_bc, TFUtil, returnn, get_login_username)
        """)
    import returnn.tf.util.basic as tf_util
    import returnn.util.basic as util
    from returnn.pretrain import WrapEpochValue
    where_bc, tfutil_mod, returnn_pkg, get_login_username = config.typed_value("refs")
    assert where_bc is tf_util.where_bc
    assert tfutil_mod is tf_util and sys.modules["TFUtil"] is tf_util
    assert returnn_pkg.TFUtil is tf_util
    assert sys.modules["Pretrain"].WrapEpochValue is WrapEpochValue
    assert get_login_username is util.get_login_username
    assert config.typed_value("hvd") is None
    assert config.typed_value("tf_version_tuple")[:2] == tuple(int(v) for v in tf.__version__.split(".")[:2])
    assert config.typed_value("returnn_version") == util.describe_returnn_version()
    assert config.typed_value("is_tf") is True
    assert config.typed_value("seq_len").dict == {"data": 20, "classes": 6}
    assert config.typed_value("wrapped") == 30


def test_old_extern_package_and_its_submodules(tmp_path):
    """RETURNN < 2020 had extern/ at its root: 'from extern.HawkAaronWarpTransducer import rnnt_loss'
    (the 2020 RNN-T configs) is returnn.extern's module."""
    config = load(tmp_path, """
        from extern.HawkAaronWarpTransducer import rnnt_loss
        from extern.WarpRna import rna_loss
        import extern
        refs = (rnnt_loss, rna_loss, extern)
        """)
    from returnn.tf.transducer_losses import rna_loss, rnnt_loss
    import returnn.extern
    got_rnnt, got_rna, extern_mod = config.typed_value("refs")
    assert got_rnnt is rnnt_loss and got_rna is rna_loss and extern_mod is returnn.extern


def test_users_own_module_of_an_old_name_wins(tmp_path, monkeypatch):
    (tmp_path / "Util.py").write_text("MINE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "Util", raising=False)
    config = load(tmp_path, "from Util import MINE\nvalue = MINE\n")
    assert config.typed_value("value") == 42
    sys.modules.pop("Util", None)


def test_old_name_of_a_module_this_engine_lacks(tmp_path, monkeypatch):
    from returnn import config_env
    monkeypatch.setitem(config_env.OLD_MODULE_NAMES, "SprintCacheOld", "returnn.sprint_cache_not_here")
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "import SprintCacheOld\n")
    assert "SprintCacheOld" in str(info.value) and "returnn.sprint_cache_not_here" in str(info.value)
    # RETURNN's demo-hyper-param-tuning (its task fails in RETURNN 1.20261022 too: KeyError in Runner.run)
    with pytest.raises(ConfigError, match="'HyperParamTuning' .RETURNN's old name for returnn.tf.hyper_param_tuning"):
        load(tmp_path, "from HyperParamTuning import HyperParam\n")


def test_horovod_ctx_reads_launcher_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    from returnn.config import load_config_from_args
    path = write_config(tmp_path / "h.py", textwrap.dedent("""
        import TFHorovod
        hvd = TFHorovod.get_ctx(config=config)
        facts = (hvd.rank(), hvd.size(), hvd.is_reduce_type_param())
        """))
    config = load_config_from_args([str(path), "++use_horovod", "1", "++horovod_reduce_type", "param"])
    assert config.typed_value("facts") == (1, 4, True)


def test_global_config_is_the_loading_config_while_it_runs(tmp_path):
    from returnn.config import load_config_from_args
    path = write_config(tmp_path / "g.py", "from returnn.config import get_global_config\n"
                                           "same = get_global_config() is config\n")
    config = load_config_from_args([str(path), "++x", "1"])
    assert config.typed_value("same") is True and get_global_config() is config


TF1_CONFIG = """
    import tensorflow as tf

    def tf1_code(x, lengths):
        y = tf.log(tf.to_float(x) + 1.0)
        mask = tf.sequence_mask(lengths, maxlen=tf.shape(x)[1])
        noise = tf.random_uniform(tf.shape(y), minval=0.0, maxval=0.0)  # zero: deterministic
        s = tf.reduce_sum(tf.where(mask, y, tf.zeros_like(y)) + noise, axis=1, keep_dims=True)
        s = tf.Print(s, [s], "config print: ")
        return tf.squeeze(s, squeeze_dims=[1])

    def tf2_code(x):
        return tf.where(x > 1.0, x, 0.0)  # TF2 broadcasting where stays TF2

    xent = (tf.nn.softmax_cross_entropy_with_logits_v2,)
    is_real_tensor = tf.Tensor is __import__("tensorflow").Tensor
    """


def test_tf1_names_in_config_code_work_later_inside_tf_function(tmp_path):
    config = load(tmp_path, TF1_CONFIG)
    tf1_code, tf2_code = config.typed_value("tf1_code"), config.typed_value("tf2_code")
    x = np.array([[0, 1, 3], [2, 7, 9]], dtype=np.int32)
    lengths = np.array([3, 1], dtype=np.int32)

    @tf.function
    def run(x, lengths):  # as an eval layer calls config code: traced at network construction
        return tf1_code(x, lengths)

    expected = [np.log(1.0) + np.log(2.0) + np.log(4.0), np.log(3.0)]
    np.testing.assert_allclose(run(x, lengths).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(tf2_code(tf.constant([0.5, 2.0])).numpy(), [0.0, 2.0])
    assert config.typed_value("xent")[0] is tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2
    assert config.typed_value("is_real_tensor") is True
    assert not hasattr(tf, "log") and not hasattr(tf, "to_float")  # the real module is untouched


def test_tf_name_neither_version_has_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "import tensorflow as tf\nx = tf.contrib.layers\n")
    assert "contrib" in str(info.value) and "tf.compat.v1" in str(info.value)


def test_returnn_tf_compat_v1_import(tmp_path):
    config = load(tmp_path, "from returnn.tf.compat import v1 as tf\nf = (tf.log,)\n")
    assert config.typed_value("f")[0] is tf.compat.v1.log


def test_config_with_old_imports_trains(tmp_path):
    text = TINY_12AX.replace("#!rnn.py\n", textwrap.dedent("""\
        #!rnn.py
        from Pretrain import WrapEpochValue
        from TFUtil import where_bc
        import TFUtil
        from Util import NumbersDict
        import tensorflow as tf
        hidden_size = int(NumbersDict({"data": 4}).max_value() * 2)
        assert tf.to_float is not None
        """)).replace('"n_out": 8', '"n_out": hidden_size').replace("num_epochs = 2", "num_epochs = 1")
    config = write_config(tmp_path / "old.config", text)
    proc = run_rnn(train_args(config, tmp_path))
    assert proc.returncode == 0, describe(proc)
    assert "epoch 1 score:" in proc.stdout


def test_data_model_under_old_names(tmp_path):
    config = load(tmp_path, """
        from TFUtil import DimensionTag, Data
        from returnn.tf.util.data import batch_dim, SpatialDim, FeatureDim, Dim
        time_tag = DimensionTag(kind=DimensionTag.Types.Spatial, description="time")
        feat = FeatureDim("feat", 40)
        refs = (DimensionTag, Data, Dim, time_tag, feat, batch_dim)
        """)
    from returnn.tensor import Data, Dim, batch_dim
    tag_cls, data_cls, dim_cls, time_tag, feat, bdim = config.typed_value("refs")
    assert tag_cls is Dim and dim_cls is Dim and data_cls is Data and bdim is batch_dim
    assert time_tag.dimension is None and time_tag.description == "time" and feat.dimension == 40


def test_getlogin_without_terminal_falls_back_to_the_user_name(tmp_path):
    """Configs build paths from os.getlogin(), which fails without a controlling terminal (batch
    jobs): the config still loads, with the process's user name."""
    import getpass
    import subprocess
    import sys
    config = tmp_path / "login.config"
    config.write_text("#!rnn.py\nimport os\nmodel = '/tmp/%s/model' % os.getlogin()\n")
    code = ("import sys; sys.path.insert(0, %r); from returnn.config import Config; c = Config(); "
            "c.load_file(%r); print(c.value('model'))" % (str(REPO), str(config)))
    proc = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          start_new_session=True, timeout=120)  # no controlling terminal
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "/tmp/%s/model" % getpass.getuser()


def test_util_helpers_configs_import(tmp_path):
    config = load(tmp_path, """
        from returnn.util.basic import (BehaviorVersion, NumbersDict, dict_joined, make_hashable, better_repr,
                                        hms_fraction, softmax, DictAsObj, get_fwd_compat_kwargs)
        from returnn.util import better_exchook
        better_exchook.install()
        behavior_version = 12
        joined = dict_joined({"a": 1}, {"b": 2})
        hashable = hash(make_hashable({"x": [1, {"y": 2}]}))
        text = better_repr({"b": 1, "a": [2]})
        obj = DictAsObj({"k": 3}).k
        kwargs = get_fwd_compat_kwargs()
        """)
    from returnn.config import set_global_config
    from returnn.util.basic import BehaviorVersion
    assert config.typed_value("joined") == {"a": 1, "b": 2} and config.typed_value("text") == "{'a': [2], 'b': 1}"
    assert config.typed_value("obj") == 3 and config.typed_value("kwargs") == {}
    set_global_config(config)
    try:
        assert BehaviorVersion.get() == 12
        BehaviorVersion.require(True, "fine", 5)
        with pytest.raises(ValueError, match="not allowed"):
            BehaviorVersion.require(False, "not allowed", 5)
    finally:
        set_global_config(Config())


def test_returnn_layer_class_names_extern_data_and_vocabulary_classes(tmp_path):
    """Names code imported by configs takes from RETURNN's modules (returnn-experiments' common/):
    layer classes by RETURNN's class names (annotations, isinstance), ExternData (templates),
    Vocabulary/BytePairEncoding/CharacterTargets from returnn.datasets.generating."""
    from returnn.tf.layers.basic import EvalLayer, SoftmaxOverSpatialLayer, SplitDimsLayer
    from returnn.tf.layers.rec import ChoiceLayer, RecLayer
    from returnn.tf.layers.base import LAYER_CLASSES
    assert (EvalLayer, SoftmaxOverSpatialLayer, SplitDimsLayer, ChoiceLayer) == tuple(
        LAYER_CLASSES[n] for n in ("eval", "softmax_over_spatial", "split_dims", "choice"))
    assert RecLayer is LAYER_CLASSES["rec"]
    with pytest.raises(ImportError):
        from returnn.tf.layers.basic import NoSuchLayer  # noqa: F401
    from returnn.tf.network import ExternData
    ext = ExternData({"data": {"shape": (None, 1)}, "classes": {"dim": 5, "sparse": True}})
    assert ext.get_default_input_data().dim == 1 and ext.data["classes"].sparse and ext.has_data("classes")
    with pytest.raises(ConfigError, match="needs 'dim' or 'shape'"):
        ExternData({"x": {}})
    from returnn.datasets.generating import BytePairEncoding, CharacterTargets, Vocabulary
    vocab_file = tmp_path / "vocab"
    vocab_file.write_text("{'<s>': 0, '</s>': 0, 'a': 1, 'b@@': 2, '<unk>': 3}\n")
    vocab = Vocabulary.create_vocab(vocab_file=str(vocab_file), unknown_label="<unk>", seq_postfix=[0])
    assert type(vocab) is Vocabulary and vocab.num_labels == 4
    assert vocab.labels == ["<s>", "a", "b@@", "<unk>"]  # a shared id: the last label in sorted order, as RETURNN
    assert vocab.get_seq("a zz a") == [1, 3, 1, 0] and vocab.get_seq_labels([1, 2]) == "a b@@"
    assert Vocabulary(str(vocab_file)).unknown_label_id is None  # RETURNN's default 'UNK' is not in it
    codes = tmp_path / "codes"
    codes.write_text("#version: 0.2\n")
    bpe = Vocabulary.create_vocab(vocab_file=str(vocab_file), bpe_file=str(codes), unknown_label=None)
    assert isinstance(bpe, BytePairEncoding) and bpe.labels[2] == "b@@"
    assert bpe.get_seq("ba a") == [2, 1, 1]  # split on the fly (tests/test_returnn_text_datasets.py: RETURNN's)
    chars = Vocabulary.create_vocab(**{"class": "CharacterTargets", "vocab_file": None, "labels": ["a", "b", "c"]})
    assert isinstance(chars, CharacterTargets) and chars.get_seq("cab") == [2, 0, 1]
    with pytest.raises(ConfigError, match="num_labels says 9"):
        Vocabulary(str(vocab_file), num_labels=9)
