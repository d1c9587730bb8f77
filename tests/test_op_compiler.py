"""RETURNN's OpCodeCompiler (returnn/tf/util/op_compiler.py): a config's C++ op compiled, cached, loaded."""
import os
import shutil
import stat

import numpy as np
import pytest
import tensorflow as tf

from returnn.errors import ConfigError
from returnn.tf.util import op_compiler
from returnn.tf.util.op_compiler import OpCodeCompiler, bridge_tf_api

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                    reason="no C++ compiler (g++/c++) on this machine")

# written as 2020 configs wrote their ops (Status::OK(), tensor<string, N>), so the TF API bridges are exercised
CODE = r"""
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include <map>
#include <string>
using namespace tensorflow;

REGISTER_OP("ScaleCountDups")
.Input("x: float32")
.Input("words: string")
.Attr("factor: float")
.Output("y: float32")
.Output("dups: int32")
.SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
    c->set_output(0, c->input(0));
    c->set_output(1, c->input(1));
    return Status::OK();
});

class ScaleCountDupsOp : public OpKernel {
 public:
  explicit ScaleCountDupsOp(OpKernelConstruction* ctx) : OpKernel(ctx) { OP_REQUIRES_OK(ctx, ctx->GetAttr("factor", &factor_)); }
  void Compute(OpKernelContext* context) override {
    const Tensor& x = context->input(0);
    const Tensor& words = context->input(1);
    Tensor* y; Tensor* dups;
    OP_REQUIRES_OK(context, context->allocate_output(0, x.shape(), &y));
    OP_REQUIRES_OK(context, context->allocate_output(1, words.shape(), &dups));
    auto xf = x.flat<float>(); auto yf = y->flat<float>();
    for (int i = 0; i < xf.size(); ++i) yf(i) = xf(i) * factor_ + 1.f;
    int n = words.shape().dim_size(0), m = words.shape().dim_size(1);
    for (int b = 0; b < n; ++b) {
      std::map<std::string, int> count;
      for (int j = 0; j < m; ++j) count[words.tensor<string, 2>()(b, j)] += 1;
      for (int j = 0; j < m; ++j) dups->tensor<int32, 2>()(b, j) = count[words.tensor<string, 2>()(b, j)];
    }
  }
 private:
  float factor_;
};
REGISTER_KERNEL_BUILDER(Name("ScaleCountDups").Device(DEVICE_CPU), ScaleCountDupsOp);
"""


def test_bridges_rewrite_only_old_spellings():
    code = "return Status::OK(); auto a = t.tensor<string, 2>(); auto b = t.flat<tensorflow::string>(); std::string s;"
    new, applied = bridge_tf_api(code, (2, 15))
    assert new == ("return ::tensorflow::Status(); auto a = t.tensor<tstring, 2>(); auto b = t.flat<tstring>(); "
                   "std::string s;")
    assert len(applied) == 2
    assert bridge_tf_api(code, (1, 15)) == (code, [])  # older TensorFlow: the code as written


@needs_compiler
def test_compile_load_run_and_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RETURNN_CACHE_DIR", str(tmp_path / "cache"))
    comp = OpCodeCompiler(base_name="ScaleCountDups", code_version=1, code=CODE, is_cpp=True,
                          use_cuda_if_available=False)
    mod = comp.load_tf_module()
    x = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    words = tf.constant([[b"a", b"b", b"a"], [b"", b"", b"c"]])
    y, dups = mod.scale_count_dups(x, words, factor=2.0)
    np.testing.assert_allclose(y.numpy(), x * 2.0 + 1.0)
    np.testing.assert_array_equal(dups.numpy(), [[2, 1, 2], [2, 2, 1]])
    out = capsys.readouterr().out
    assert "compiling ScaleCountDups" in out and "Status::OK() -> Status()" in out
    so = comp.get_lib_filename()
    assert so.startswith(str(tmp_path / "cache" / "returnn_tf_cache" / "ops" / "ScaleCountDups")) and os.path.isfile(so)
    assert stat.S_IMODE(os.stat(os.path.dirname(so)).st_mode) == 0o700
    # inside a traced function too (how a custom_score_combine calls it)
    fn = tf.function(lambda a: mod.scale_count_dups(a, words, factor=0.5)[0])
    np.testing.assert_allclose(fn(x).numpy(), x * 0.5 + 1.0)
    # a second compiler of the same code finds the library: no compiler call
    again = OpCodeCompiler(base_name="ScaleCountDups", code_version=1, code=CODE, use_cuda_if_available=False)
    assert again.get_lib_filename() == so and "compiling" not in capsys.readouterr().out
    # another code version builds elsewhere
    other = OpCodeCompiler(base_name="ScaleCountDups", code_version=2, code=CODE, use_cuda_if_available=False)
    assert os.path.dirname(other._so_filename) != os.path.dirname(so)


@needs_compiler
def test_compile_error_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RETURNN_CACHE_DIR", str(tmp_path))
    comp = OpCodeCompiler(base_name="Broken", code="this is not C++;", use_cuda_if_available=False)
    with pytest.raises(ConfigError, match="compiling 'Broken' failed"):
        comp.load_tf_module()
    assert not os.path.exists(comp._so_filename)


def test_cache_dir_writable_by_others_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("RETURNN_CACHE_DIR", str(shared))
    comp = OpCodeCompiler(base_name="X", code="", use_cuda_if_available=False)
    with pytest.raises(ConfigError, match="no one else can write"):
        comp.get_lib_filename()
    link = tmp_path / "link"
    os.symlink(tmp_path / "elsewhere", link)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("RETURNN_CACHE_DIR", str(link))
    with pytest.raises(ConfigError, match="no link"):
        OpCodeCompiler(base_name="X", code="", use_cuda_if_available=False).get_lib_filename()


def test_default_cache_dir(monkeypatch):
    monkeypatch.delenv("RETURNN_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/some/tmp")
    assert op_compiler.get_cache_dir() == os.path.join("/some/tmp", op_compiler.get_login_username())


def test_config_import_names():
    from returnn.config_env import OLD_MODULE_NAMES
    import returnn.tf.util.basic as basic
    assert OLD_MODULE_NAMES["TFUtil"] == "returnn.tf.util.basic"  # from TFUtil import OpCodeCompiler
    assert basic.OpCodeCompiler is OpCodeCompiler
