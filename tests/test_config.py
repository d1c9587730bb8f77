"""Config files (Python, JSON, several in order), ``++key value`` typing, typed getters, and the
one-line CLI errors."""
from __future__ import annotations

import getpass
import json
import re
import textwrap

import pytest

from returnn.config import Config, load_config_from_args, parse_override_value, split_cmd_args
from returnn.errors import ConfigError
from helpers import TINY_12AX, describe, nonempty_lines, run_rnn, write_config


def _load(tmp_path, text, name="a.config", args=()):
    path = write_config(tmp_path / name, textwrap.dedent(text))
    config = Config()
    config.parse_cmd_args([str(path)] + list(args))
    return config


# ---------------------------------------------------------------- Python configs

def test_python_config_module_variables_become_entries(tmp_path):
    config = _load(tmp_path, """\
        #!rnn.py
        import os
        import os.path as osp
        from returnn.util.basic import get_login_username
        from collections import OrderedDict
        user = get_login_username()
        base = osp.basename("/a/b/c.txt")
        num_epochs = 4
        _private = 3
        network = {"output": {"class": "softmax", "loss": "ce"}}
        def my_hook(x):
            return x + 1
        """)
    assert config.typed_value("num_epochs") == 4
    assert config.typed_value("user") == getpass.getuser()
    assert config.typed_value("base") == "c.txt"
    assert config.typed_value("network") == {"output": {"class": "softmax", "loss": "ce"}}
    # Imported modules, functions and classes are not entries; '_private' names are (RETURNN's typed_dict).
    for name in ("os", "osp", "get_login_username", "OrderedDict", "config", "__file__"):
        assert not config.has(name), name
    assert config.typed_value("_private") == 3
    # A function the config defines itself is an entry (RETURNN configs define hooks).
    assert config.typed_value("my_hook")(1) == 2


def test_callables_a_config_makes_are_entries(tmp_path):
    """RETURNN's typed_dict keeps every name: a bound method of an object the config made (returnn-experiments'
    ``get_network = Pretrain(...).get_network``) and a partial are entries; imported functions are not."""
    config = _load(tmp_path, """\
        #!rnn.py
        import functools
        from fractions import Fraction
        from os.path import basename
        get_network = Fraction(3, 4).limit_denominator
        scaled = functools.partial(max, 2)
        """)
    assert config.typed_value("get_network")(1) == 1 and config.typed_value("scaled")(1) == 2
    assert not config.has("basename") and not config.has("Fraction") and not config.has("functools")


def test_py_suffix_is_python_without_shebang(tmp_path):
    config = _load(tmp_path, "a = [1, 2]\nb = 'x' * 3\n", name="setup.py")
    assert config.typed_value("a") == [1, 2]
    assert config.value("b") == "xxx"


def test_config_reads_overrides_while_running(tmp_path):
    text = """\
        #!rnn.py
        doubled = config.int("num_epochs", 1) * 2
        name = "run-%s" % config.value("tag", "none")
        """
    config = _load(tmp_path, text, args=["++num_epochs", "3", "++tag", "abc"])
    assert config.typed_value("doubled") == 6
    assert config.typed_value("name") == "run-abc"
    assert config.typed_value("num_epochs") == 3
    config = _load(tmp_path, text, name="b.config")
    assert config.typed_value("doubled") == 2
    assert config.typed_value("name") == "run-none"


def test_code_a_config_calls_sees_the_names_set_so_far(tmp_path):
    """RETURNN runs a Python config in its typed_dict: a function the config calls while it runs (code of
    an imported module: get_global_config().typed_dict["target"]) sees the names set before the call,
    also those of an earlier config file; afterwards the entries are as before (imports not entries)."""
    helper = tmp_path / "cfg_helper.py"
    helper.write_text("from returnn.config import get_global_config\n"
                      "def target_dim():\n"
                      "    config = get_global_config()\n"
                      "    return config.typed_dict['target'], config.int('dim', 0), config.has('later')\n")
    write_config(tmp_path / "first.config", "#!rnn.py\ndim = 7\n")
    path = write_config(tmp_path / "a.config", textwrap.dedent("""\
        #!rnn.py
        import sys
        sys.path.insert(0, %r)
        from cfg_helper import target_dim
        target = "classes"
        seen = target_dim()
        later = 1
        """ % str(tmp_path)))
    from returnn.config import set_global_config
    config = Config()
    set_global_config(config)
    config.parse_cmd_args([str(tmp_path / "first.config"), str(path)])
    assert config.typed_value("seen") == ("classes", 7, False)
    assert not config.has("sys") and not config.has("target_dim") and not config.has("__builtins__")
    assert config.typed_value("later") == 1 and config.typed_value("dim") == 7


def test_override_wins_over_config_value(tmp_path):
    config = _load(tmp_path, "num_epochs = 5\nlearning_rate = 0.5\nmodel = '/x/model'\n",
                   args=["++num_epochs", "7", "++model", "/y/model"])
    assert config.typed_value("num_epochs") == 7
    assert config.typed_value("model") == "/y/model"
    assert config.typed_value("learning_rate") == 0.5


def test_json_config(tmp_path):
    obj = {"num_epochs": 3, "task": "eval", "network": {"output": {"class": "softmax"}}, "flag": True}
    config = _load(tmp_path, "\n  " + json.dumps(obj), name="c.json")
    for key, value in obj.items():
        assert config.typed_value(key) == value
    # JSON is recognised by the leading '{', whatever the file name.
    config = _load(tmp_path, json.dumps({"batch_size": 77}), name="other.config")
    assert config.int("batch_size") == 77


def test_json_syntax_error_names_file_and_line(tmp_path):
    path = write_config(tmp_path / "bad.json", '{\n"a": 1,\n"b": \n}\n')
    with pytest.raises(ConfigError, match=re.escape(str(path)) + r":\d+"):
        Config().load_file(str(path))


def test_several_config_files_in_order(tmp_path):
    a = write_config(tmp_path / "a.config", "#!rnn.py\nnum_epochs = 1\nlearning_rate = 0.1\nx = 'a'\n")
    b = write_config(tmp_path / "b.json", json.dumps({"num_epochs": 2, "x": "b"}))
    c = write_config(tmp_path / "c.config", "#!rnn.py\nx = x + 'c'\ny = num_epochs * 10\n")
    config = load_config_from_args([str(a), str(b), str(c), "++learning_rate", "0.3"])
    assert config.typed_value("num_epochs") == 2
    assert config.typed_value("x") == "bc"  # later files see and extend earlier entries
    assert config.typed_value("y") == 20
    assert config.typed_value("learning_rate") == 0.3
    assert config.files == [str(a), str(b), str(c)]


# ---------------------------------------------------------------- ++key value typing

def test_override_typing_rules(tmp_path):
    config = _load(tmp_path, """\
        num_epochs = 5
        learning_rate = 0.01
        model = "/tmp/model"
        task = "train"
        use_horovod = False
        """, args=["++num_epochs", "3", "++learning_rate", "1e-3", "++use_horovod", "1", "++model", "123",
                   "++task", "eval", "++flag", "true", "++other", "false", "++new_key", "hello",
                   "++some_list", "[1, 2]", "++dict_key={'a': 1}"])
    assert config.typed_value("num_epochs") == 3 and type(config.typed_value("num_epochs")) is int
    assert config.typed_value("learning_rate") == pytest.approx(1e-3)
    assert type(config.typed_value("learning_rate")) is float
    assert config.typed_value("use_horovod") and config.bool("use_horovod") is True
    assert config.typed_value("model") == "123"  # the key holds a string: stays a string
    assert config.typed_value("task") == "eval"
    assert config.typed_value("flag") is True
    assert config.typed_value("other") is False
    assert config.typed_value("new_key") == "hello"
    assert config.typed_value("some_list") == [1, 2]
    assert config.typed_value("dict_key") == {"a": 1}


@pytest.mark.parametrize("text,current,expected", [
    ("3", None, 3), ("3", 5, 3), ("1e-3", 0.1, 1e-3), ("2", 0.5, 2.0), ("1", False, True),
    ("0", True, False), ("True", None, True), ("false", 1, False), ("abc", None, "abc"),
    ("42", "x", "42"), ("/a/b", None, "/a/b"), ("'q'", None, "q"), ("None", 3, None),
])
def test_parse_override_value(text, current, expected):
    value = parse_override_value(text, current)
    assert value == expected
    assert type(value) is type(expected)


def test_split_cmd_args():
    files, overrides = split_cmd_args(["a.config", "++x", "1", "b.config", "++y=2", "++z", "--v"])
    assert files == ["a.config", "b.config"]
    assert overrides == [("x", "1"), ("y", "2"), ("z", "--v")]
    with pytest.raises(ConfigError):
        split_cmd_args(["a.config", "++x"])


# ---------------------------------------------------------------- getters

def test_typed_getters_and_defaults():
    c = Config({"s": "hello", "i": 7, "istr": " 8 ", "f": 2.5, "fint": 3.0, "b": True, "bstr": "yes",
                "bzero": "0", "l": ["a", "b"], "lstr": "x, y,,z", "none": None, "d": {"k": 1}})
    assert c.has("s") and not c.has("missing")
    assert c.value("s") == "hello" and c.value("i") == "7" and c.value("l") == "a,b"
    assert c.value("missing", "dflt") == "dflt" and c.value("none", "dflt") == "dflt"
    assert c.int("i") == 7 and c.int("istr") == 8 and c.int("fint") == 3 and c.int("b") == 1
    assert c.int("missing", 5) == 5 and c.int("missing") is None
    assert c.float("f") == 2.5 and c.float("i") == 7.0 and c.float("missing", 0.5) == 0.5
    assert c.bool("b") is True and c.bool("bstr") is True and c.bool("bzero") is False
    assert c.bool("missing") is False and c.bool("missing", True) is True
    assert c.is_true("b") and not c.is_true("missing")
    assert c.list("l") == ["a", "b"] and c.list("lstr") == ["x", "y", "z"] and c.list("i") == [7]
    assert c.list("missing", [1]) == [1]
    assert c.typed_value("d") == {"k": 1} and c.typed_value("missing", 3) == 3
    c.set("new", 1)
    assert c.int("new") == 1


@pytest.mark.parametrize("getter,key", [("int", "f"), ("int", "s"), ("float", "s"), ("bool", "s")])
def test_getter_type_errors_name_the_key(getter, key):
    c = Config({"s": "hello", "f": 2.5})
    with pytest.raises(ConfigError, match="'%s'" % key):
        getattr(c, getter)(key)


# ---------------------------------------------------------------- CLI errors (subprocess)

def _one_error_line(proc):
    assert proc.returncode == 2, describe(proc)
    lines = nonempty_lines(proc.stderr)
    assert len(lines) == 1, describe(proc)
    return lines[0]


def test_cli_syntax_error_one_line_with_file_and_line(tmp_path):
    path = write_config(tmp_path / "bad.config", "#!rnn.py\nx = 1\ny = (\nz = 3\n")
    line = _one_error_line(run_rnn([path]))
    assert re.search(re.escape(str(path)) + r":\d+", line), line
    assert "Traceback" not in line


def test_cli_runtime_error_in_config_names_line(tmp_path):
    path = write_config(tmp_path / "bad.config", "#!rnn.py\nx = 1\n\ny = undefined_name + 1\n")
    line = _one_error_line(run_rnn([path]))
    assert "%s:4" % path in line and "undefined_name" in line


def test_cli_missing_config_file(tmp_path):
    missing = tmp_path / "nope.config"
    line = _one_error_line(run_rnn([missing]))
    assert str(missing) in line


def test_cli_unknown_task_lists_known(tmp_path):
    path = write_config(tmp_path / "t.config", "#!rnn.py\ntask = 'train'\n")
    line = _one_error_line(run_rnn([path, "++task", "dance"]))
    assert "dance" in line
    for task in ("train", "eval", "forward"):
        assert task in line


@pytest.mark.parametrize("value", ["abc", "2.5"])
def test_cli_non_integer_num_epochs_names_key(tmp_path, value):
    path = write_config(tmp_path / "t.config", "#!rnn.py\nnum_epochs = 3\n")
    line = _one_error_line(run_rnn([path, "++num_epochs", value]))
    assert "num_epochs" in line and value in line


def test_cli_unknown_dataset_class_lists_known(tmp_path):
    path = write_config(tmp_path / "t.config", TINY_12AX)
    proc = run_rnn([path, "++train", "{'class': 'NoSuchDataset'}", "++model", tmp_path / "model"])
    line = _one_error_line(proc)
    assert "NoSuchDataset" in line
    for name in ("Task12AXDataset", "DummyDataset", "StaticDataset", "HDFDataset"):
        assert name in line
    assert not list(tmp_path.glob("model.*"))


def test_python_m_returnn_same_as_rnn_py(tmp_path):
    bad = write_config(tmp_path / "t.config", "#!rnn.py\ntask = 'dance'\n")
    a, b = run_rnn([bad]), run_rnn([bad], module=True)
    assert a.returncode == b.returncode == 2
    assert a.stderr == b.stderr and "dance" in a.stderr
    good = write_config(tmp_path / "good.config", TINY_12AX)
    args = [good, "++num_epochs", "0", "++model", tmp_path / "m", "++learning_rate_file", tmp_path / "lr"]
    proc = run_rnn(args, module=True)
    assert proc.returncode == 0, describe(proc)
    assert "nothing to train (num_epochs = 0)" in proc.stdout, describe(proc)
    assert "Finished training in epoch 0." in proc.stdout


def test_int_accepts_numpy_integers():
    import numpy as np
    c = Config({"a": np.int64(5), "b": np.float32(3.0), "c": np.float64(2.5)})
    assert c.int("a") == 5 and type(c.int("a")) is int
    assert c.int("b") == 3
    with pytest.raises(ConfigError, match="'c'"):
        c.int("c")


def test_bom_and_non_utf8_files(tmp_path):
    bom_json = tmp_path / "bom.json"
    bom_json.write_bytes(b"\xef\xbb\xbf" + json.dumps({"num_epochs": 4}).encode())
    bom_py = tmp_path / "bom.config"
    bom_py.write_bytes(b"\xef\xbb\xbf#!rnn.py\nbatch_size = 9\n")
    config = load_config_from_args([str(bom_json), str(bom_py)])
    assert config.int("num_epochs") == 4 and config.int("batch_size") == 9
    latin = tmp_path / "latin.config"
    latin.write_bytes(b"#!rnn.py\nname = '\xe9t\xe9'\n")
    with pytest.raises(ConfigError, match="latin.config"):
        Config().load_file(str(latin))
    line = _one_error_line(run_rnn([latin]))
    assert str(latin) in line


def test_underscore_names_are_readable_with_typed_value(tmp_path):
    """RETURNN's typed_dict holds the config's whole namespace: configs hide helpers as ``_name``
    and read them back (``get_config().typed_value('_stop_token_target')`` in Tacotron2 configs);
    dunder names and the config object are not entries, and ``_names`` are no typo warnings."""
    from returnn.config_keys.check import unknown_keys
    cfg = tmp_path / "x.config"
    cfg.write_text("#!rnn.py\n_scale = 3\ndef _double(x):\n    return 2 * x\nnum_epochs = 1\n")
    config = Config()
    config.load_file(str(cfg))
    assert config.typed_value("_scale") == 3 and config.typed_value("_double")(4) == 8
    assert "__file__" not in config.typed_dict and "config" not in config.typed_dict
    assert unknown_keys(config.typed_dict, []) == ([], [])
