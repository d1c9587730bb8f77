"""End-to-end runs of ``rnn.py``: 12AX training with RETURNN's log lines, checkpoints, resume,
eval and forward tasks, and non-finite losses."""
from __future__ import annotations

import ast
import re

import h5py
import numpy as np
import pytest

from helpers import REPO, TINY_12AX, assert_one_line_error, describe, lines_matching, run_rnn, write_config
from returnn.datasets.generating import Task12AXDataset

DEMO = REPO / "demos" / "demo-tf-lstm.12ax.config"
# RETURNN's TF task forward forwards the 'eval' dataset (the demo has none): the demo's dev set
DEMO_EVAL = '{"class": "Task12AXDataset", "num_seqs": 100, "fixed_random_seed": 1}'
DEMO_EPOCHS = 3
HMS = r"(\d+):(\d\d):(\d\d)"
NUM = r"([-+0-9.eE]+|nan|inf)"
START_RE = r"start epoch (\d+) with learning rate (\S+) \.\.\."
FINISHED_RE = r"train epoch (\d+), finished after (\d+) steps, %s elapsed \((\d+\.\d)%% computing time\)" % HMS
EPOCH_RE = r"epoch (\d+) score: %s error: %s elapsed: %s dev: score %s error %s" % (NUM, NUM, HMS, NUM, NUM)
DONE_RE = r"Finished training in epoch (\d+)\."
STEP_RE = (r"train epoch (\d+), step (\d+), cost:output %s, error:output %s, (.+), (\d+\.\d+) sec/step, "
           r"elapsed \d+:\d\d:\d\d, exp\. remaining \d+:\d\d:\d\d, complete (\d+\.\d\d)%%" % (NUM, NUM))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo config trained for a few epochs at log_verbosity 5."""
    d = tmp_path_factory.mktemp("demo")
    args = [DEMO, "++num_epochs", str(DEMO_EPOCHS), "++log_verbosity", "5", "++model", d / "model",
            "++learning_rate_file", d / "newbob.data", "++log", d / "train.log"]
    proc = run_rnn(args)
    assert proc.returncode == 0, describe(proc)
    return {"dir": d, "args": args, "proc": proc, "out": proc.stdout}


def read_lr_file(path):
    text = path.read_text()
    return eval(text, {"EpochData": lambda learningRate, error: (learningRate, error),  # noqa: N803
                       "nan": float("nan"), "inf": float("inf")})


def test_epoch_log_lines(demo):
    out = demo["out"]
    starts = lines_matching(START_RE, out)
    finished = lines_matching(FINISHED_RE, out)
    epochs = lines_matching(EPOCH_RE, out)
    assert [int(m.group(1)) for m in starts] == list(range(1, DEMO_EPOCHS + 1)), out[-3000:]
    assert [int(m.group(1)) for m in finished] == list(range(1, DEMO_EPOCHS + 1))
    assert [int(m.group(1)) for m in epochs] == list(range(1, DEMO_EPOCHS + 1))
    assert [m.group(1) for m in lines_matching(DONE_RE, out)] == [str(DEMO_EPOCHS)]
    assert "start training at epoch 1" in out
    assert "time split per rank" not in out  # one process: one line, no rank
    assert len(lines_matching(r"train epoch \d+, time split: step [\d.]+%, data wait [\d.]+%, other [\d.]+%", out)) \
        == DEMO_EPOCHS
    for m in finished:
        assert int(m.group(2)) == 100  # 1000 seqs, max_seqs 10
        assert 0.0 < float(m.group(6)) <= 100.0
    lr_data = read_lr_file(demo["dir"] / "newbob.data")
    assert sorted(lr_data) == list(range(1, DEMO_EPOCHS + 1))
    for m in starts:
        assert float(m.group(2)) == lr_data[int(m.group(1))][0]
    for m in epochs:
        errors = lr_data[int(m.group(1))][1]
        assert float(m.group(2)) == pytest.approx(errors["train_score"], rel=1e-5)
        assert float(m.group(3)) == pytest.approx(errors["train_error"], rel=1e-5)
        assert float(m.group(7)) == pytest.approx(errors["dev_score"], rel=1e-5)
        assert float(m.group(8)) == pytest.approx(errors["dev_error"], rel=1e-5)
    # The order within an epoch: start, finished, epoch summary.
    lines = out.splitlines()
    pos = [next(i for i, line in enumerate(lines) if re.fullmatch(rx, line.strip()) and
                re.fullmatch(rx, line.strip()).group(1) == "2") for rx in (START_RE, FINISHED_RE, EPOCH_RE)]
    assert pos == sorted(pos)
    log_text = (demo["dir"] / "train.log").read_text()
    assert len(lines_matching(FINISHED_RE, log_text)) == DEMO_EPOCHS
    assert len(lines_matching(EPOCH_RE, log_text)) == DEMO_EPOCHS


def test_per_step_lines_at_verbosity_5(demo):
    steps = lines_matching(STEP_RE, demo["out"])
    assert len(steps) == 100 * DEMO_EPOCHS
    for epoch in range(1, DEMO_EPOCHS + 1):
        mine = [m for m in steps if int(m.group(1)) == epoch]
        assert [int(m.group(2)) for m in mine] == list(range(100))
        assert float(mine[-1].group(7)) == pytest.approx(100.0)
        assert all(float(a.group(7)) < float(b.group(7)) for a, b in zip(mine, mine[1:]))
        for m in mine:
            assert np.isfinite(float(m.group(3))) and 0.0 <= float(m.group(4)) <= 1.0
            assert re.search(r"num_seqs ([1-9]|10)\b", m.group(5))
    # Costs fall over training: the mean step cost of the last epoch is below the first one's.
    first = np.mean([float(m.group(3)) for m in steps if m.group(1) == "1"])
    last = np.mean([float(m.group(3)) for m in steps if m.group(1) == str(DEMO_EPOCHS)])
    assert last < first


def test_learns_12ax(demo):
    dev_errors = [float(m.group(8)) for m in lines_matching(EPOCH_RE, demo["out"])]
    # Baseline: always answering 'L' on the dev set (the same data as the config's dev set).
    ds = Task12AXDataset(num_seqs=100, fixed_random_seed=1)
    ds.init_seq_order(1)
    targets = np.concatenate([ds.get_data(i, "classes") for i in range(ds.num_seqs)])
    baseline = float(np.mean(targets == 1))
    assert baseline > 0.05
    assert min(dev_errors) < 0.04 and min(dev_errors) < baseline / 3, (dev_errors, baseline)
    assert dev_errors[-1] < dev_errors[0] and dev_errors[-1] < baseline / 2


def test_checkpoints_and_no_temp_files(demo):
    names = sorted(p.name for p in demo["dir"].iterdir())
    for epoch in range(1, DEMO_EPOCHS + 1):
        assert "model.%03d.index" % epoch in names
        assert "model.%03d.data-00000-of-00001" % epoch in names
    assert "model.%03d.index" % (DEMO_EPOCHS + 1) not in names
    assert not [n for n in names if "tmp" in n.lower()], names


def test_rerun_resumes_after_last_epoch(demo):
    proc = run_rnn(demo["args"])
    assert proc.returncode == 0, describe(proc)
    assert "is already trained (num_epochs = %i, checkpoint of epoch %i found)" % (DEMO_EPOCHS, DEMO_EPOCHS) \
        in proc.stdout
    assert "start training" not in proc.stdout and not lines_matching(START_RE, proc.stdout)
    assert lines_matching(DONE_RE, proc.stdout)[0].group(1) == str(DEMO_EPOCHS)
    assert not (demo["dir"] / ("model.%03d.index" % (DEMO_EPOCHS + 1))).exists()


def test_eval_task_reproduces_dev_scores(demo):
    d = demo["dir"]
    proc = run_rnn([DEMO, "++task", "eval", "++load_epoch", "2", "++model", d / "model",
                    "++learning_rate_file", d / "newbob.data"])
    assert proc.returncode == 0, describe(proc)
    (m,) = lines_matching(r"epoch 2 dev: score %s error %s" % (NUM, NUM), proc.stdout)
    trained = [t for t in lines_matching(EPOCH_RE, demo["out"]) if t.group(1) == "2"][0]
    assert float(m.group(1)) == pytest.approx(float(trained.group(7)), rel=1e-4)
    assert float(m.group(2)) == pytest.approx(float(trained.group(8)), rel=1e-4, abs=1e-6)
    assert "loaded checkpoint %s.002" % (d / "model") in proc.stdout


def test_forward_task_writes_hdf(demo, tmp_path):
    d = demo["dir"]
    out_file = tmp_path / "fwd.hdf"
    proc = run_rnn([DEMO, "++task", "forward", "++eval", DEMO_EVAL, "++forward_batch_size", "5000", "++load_epoch", str(DEMO_EPOCHS),
                    "++model", d / "model",
                    "++learning_rate_file", d / "newbob.data", "++output_file", out_file])
    assert proc.returncode == 0, describe(proc)
    ds = Task12AXDataset(num_seqs=100, fixed_random_seed=1)
    ds.init_seq_order(1)
    with h5py.File(out_file, "r") as f:
        inputs = f["inputs"][...]
        seq_lengths = f["seqLengths"][...]
        tags = [t.decode() if isinstance(t, bytes) else t for t in f["seqTags"][...]]
    assert inputs.ndim == 2 and inputs.shape[1] == 2  # output layer dim
    assert len(seq_lengths) == ds.num_seqs == len(tags)
    lens = seq_lengths[:, 0] if seq_lengths.ndim == 2 else seq_lengths
    assert int(lens.sum()) == inputs.shape[0]
    np.testing.assert_allclose(inputs.sum(axis=1), 1.0, rtol=1e-4)  # softmax rows
    # The posteriors classify the dev set about as well as the training log said.
    by_tag = {ds.get_tag(i): ds.get_data(i, "classes") for i in range(ds.num_seqs)}
    offsets = np.concatenate([[0], np.cumsum(lens)])
    wrong = total = 0
    for i, tag in enumerate(tags):
        target = by_tag[tag]
        assert len(target) == lens[i]
        wrong += int(np.sum(np.argmax(inputs[offsets[i]:offsets[i + 1]], axis=1) != target))
        total += len(target)
    logged = float(lines_matching(EPOCH_RE, demo["out"])[-1].group(8))
    assert wrong / total == pytest.approx(logged, abs=2.0 / total)


def nan_config(tmp_path):
    # relu + plain SGD with a huge rate: the second step's loss is nan.
    text = TINY_12AX.replace('"activation": "tanh"', '"activation": "relu"').replace("adam = True", "adam = False")
    return write_config(tmp_path / "nan.config", text + "learning_rate = 1e30\n")


def test_nonfinite_loss_stops_training(tmp_path):
    proc = run_rnn([nan_config(tmp_path), "++model", tmp_path / "model", "++learning_rate_file",
                    tmp_path / "lr.data", "++log", tmp_path / "train.log"])
    assert proc.returncode != 0, describe(proc)
    assert "Model seems broken, got inf or nan score." in proc.stdout + proc.stderr
    assert "Model seems broken, got inf or nan score." in (tmp_path / "train.log").read_text()
    assert not list(tmp_path.glob("model.001*"))
    assert not lines_matching(EPOCH_RE, proc.stdout)
    assert "Traceback" not in proc.stderr


def test_nonfinite_loss_can_be_ignored(tmp_path):
    proc = run_rnn([nan_config(tmp_path), "++model", tmp_path / "model", "++learning_rate_file",
                    tmp_path / "lr.data", "++stop_on_nonfinite_train_score", "False"])
    assert proc.returncode == 0, describe(proc)
    assert "Model seems broken" not in proc.stdout + proc.stderr
    epochs = lines_matching(EPOCH_RE, proc.stdout)
    assert [m.group(1) for m in epochs] == ["1", "2"]
    assert not np.isfinite(float(epochs[0].group(2)))
    assert (tmp_path / "model.002.index").exists()
    assert lines_matching(DONE_RE, proc.stdout)[0].group(1) == "2"


def test_learning_rate_file_is_valid_python_literal(demo):
    text = (demo["dir"] / "newbob.data").read_text()
    tree = ast.parse(text, mode="eval")
    assert isinstance(tree.body, ast.Dict)
    assert all(isinstance(v, ast.Call) and v.func.id == "EpochData" for v in tree.body.values)


@pytest.mark.parametrize("seconds,text", [(0, "0:00:00"), (59.4, "0:00:59"), (61, "0:01:01"),
                                          (3600 * 25 + 62, "25:01:02"), (-1, "0:00:00")])
def test_hms_format(seconds, text):
    from returnn.util.basic import hms
    assert hms(seconds) == text
    assert re.fullmatch(HMS, hms(seconds))


def test_forward_creates_output_directory(demo, tmp_path):
    d = demo["dir"]
    target = tmp_path / "no" / "such" / "x.hdf"
    proc = run_rnn([DEMO, "++task", "forward", "++eval", DEMO_EVAL, "++forward_batch_size", "5000", "++load_epoch", "1",
                    "++model", d / "model", "++learning_rate_file", d / "newbob.data", "++output_file", target])
    assert proc.returncode == 0, describe(proc)
    with h5py.File(target, "r") as f:
        assert len(f["seqTags"]) == 100
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.hdf"]  # no temporary file left


def test_batching_sets_train_seq_ordering(tmp_path):
    # A recurrent network: whole sequences per batch row (a frame-wise one gets packed batches).
    recurrent = TINY_12AX.replace('"class": "linear", "activation": "tanh"', '"class": "rec", "unit": "lstm"')
    config = write_config(tmp_path / "tiny.config", recurrent)
    proc = run_rnn([config, "++model", tmp_path / "model", "++learning_rate_file", tmp_path / "lr",
                    "++num_epochs", "1", "++batching", "sorted", "++log_verbosity", "5"])
    assert proc.returncode == 0, describe(proc)
    sizes = [int(m.group(1)) for m in re.finditer(r"max_size:data (\d+)", proc.stdout)]
    assert len(sizes) > 2
    assert sizes == sorted(sizes), sizes


def test_forward_without_checkpoint_needs_allow_random_model_init(tmp_path):
    """RETURNN's demo-fwd: forward with a fresh network only when allow_random_model_init says so."""
    target = tmp_path / "fwd.hdf"
    args = [DEMO, "++task", "forward", "++eval", DEMO_EVAL, "++forward_batch_size", "5000", "++model", tmp_path / "none" / "model",
            "++output_file", target]
    proc = run_rnn(args)
    assert_one_line_error(proc, "no complete checkpoint found for model %s" % (tmp_path / "none" / "model"))
    proc = run_rnn(args + ["++allow_random_model_init", "1"])
    assert proc.returncode == 0, describe(proc)
    assert "parameters randomly initialised (allow_random_model_init)" in proc.stdout + proc.stderr
    with h5py.File(target, "r") as f:
        assert len(f["seqTags"]) == 100 and np.allclose(f["inputs"][...].sum(axis=1), 1.0, rtol=1e-4)
    assert not (tmp_path / "none").exists() or not any((tmp_path / "none").iterdir())  # nothing saved
