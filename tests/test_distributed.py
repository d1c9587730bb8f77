"""Data-parallel training under real ``mpirun -np 2`` (TCP only, one TF thread per rank), with the
Horovod backend and with the mpi4py backend."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from helpers import BACKENDS, MPIRUN_AS_ROOT, PYTHON, REPO, child_env  # BACKENDS: Horovod only where installed

CONFIG = textwrap.dedent("""\
    #!rnn.py
    import os
    _rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    task = "train"
    train = {"class": "DummyDataset", "input_dim": 5, "output_dim": 3, "num_seqs": 40, "seq_len": 10}
    num_inputs = 5
    num_outputs = 3
    batch_size = 50
    max_seqs = 5
    network = {
        "hidden": {"class": "linear", "activation": "tanh", "n_out": 8},
        "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
    }
    optimizer = {"class": "adam"}
    learning_rate = 0.01
    num_epochs = 1
    tf_session_opts = {"intra_op_parallelism_threads": 1, "inter_op_parallelism_threads": 1}
    log_verbosity = 4
    """)


def mpirun(tmp_path, name: str, args, config_text: str = CONFIG, timeout: float = 240):
    """Runs the probe under mpirun -np 2; returns (returncode, output, [rank0 events, rank1 events])."""
    config = tmp_path / ("%s.config" % name)
    config.write_text(config_text)
    prefix = str(tmp_path / name)
    env = child_env(MPIRUN_AS_ROOT)
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "tcp,self",
           PYTHON, os.path.join(REPO, "tests", "mpi_probe.py"), prefix, str(config),
           "++use_horovod", "1", "++model", str(tmp_path / name / "model"), "++log", str(tmp_path / (name + ".log")),
           "++learning_rate_file", str(tmp_path / name / "lr.data")] + list(args)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    events = []
    for rank in range(2):
        path = "%s.rank%i.json" % (prefix, rank)
        events.append(json.load(open(path)) if os.path.exists(path) else None)
    return proc.returncode, proc.stdout + proc.stderr, events


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_reduce_shard_scale_lr_checkpoints(tmp_path, backend):
    timeline = tmp_path / "timeline.json"
    extra = ["++horovod_timeline", str(timeline)] if backend == "horovod" else []
    code, out, (r0, r1) = mpirun(tmp_path, "grad", ["++distributed_backend", backend, "++horovod_scale_lr", "1",
                                                    "++num_epochs", "2"] + extra)
    assert code == 0, out
    if backend == "horovod":  # horovod_timeline turns on Horovod's timeline for the run
        assert "ALLREDUCE" in timeline.read_text()
    # grad: parameters are bit-identical on both ranks after every step
    assert len(r0["steps"]) == len(r1["steps"]) == 8
    assert r0["steps"] == r1["steps"]
    assert len(set(r0["steps"])) == len(r0["steps"])  # and they do change every step
    # scale_lr: the applied learning rate is the configured one times the number of ranks (RETURNN's)
    assert r0["lr"] == r1["lr"] and r0["lr"] == pytest.approx([0.02] * 8)
    assert "effective 0.02 = 0.01 * 2 ranks" in out
    # shard: per epoch, the union of the ranks' sequences is the whole dataset, none seen twice
    for epoch in range(2):
        seen = [tag for ev in (r0, r1) for batch in ev["train_tags"][epoch * 4:(epoch + 1) * 4] for tag in batch]
        assert sorted(seen) == sorted("seq-%i" % i for i in range(40))
    assert set(map(tuple, r0["train_tags"][:4])).isdisjoint(map(tuple, r1["train_tags"][:4]))
    # only rank 0 writes checkpoints; rank 1 has its own log file
    assert r0["checkpoint_writes"] == ["model.001", "model.002"]
    assert r1["checkpoint_writes"] == []
    assert (tmp_path / "grad.horovod-1-2.log").exists()
    assert "rank 1 / size 2" in (tmp_path / "grad.horovod-1-2.log").read_text()
    # rank 1's normal lines go to its own file only; the console and main log are rank 0's
    assert out.count("initialized. Hostname") == 1 and "rank 0 / size 2" in out
    assert "rank 1 / size 2" not in (tmp_path / "grad.log").read_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_param_sync_every_3_steps(tmp_path, backend):
    code, out, (r0, r1) = mpirun(tmp_path, "param", [
        "++distributed_backend", backend, "++horovod_reduce_type", "param", "++horovod_param_sync_step", "3",
        "++train", "{'class': 'DummyDataset', 'input_dim': 5, 'output_dim': 3, 'num_seqs': 80, 'seq_len': 10}"])
    assert code == 0, out
    n = len(r0["steps"])
    assert n == len(r1["steps"]) == 8
    # synced after steps 3 and 6, and once more at epoch end (step 8)
    assert [s for s, _ in r0["syncs"]] == [3, 6, 8] == [s for s, _ in r1["syncs"]]
    assert [h for _, h in r0["syncs"]] == [h for _, h in r1["syncs"]]
    # between syncs each rank trains on its own data: parameters differ
    for step in (1, 2, 4, 5, 7):
        assert r0["steps"][step - 1] != r1["steps"][step - 1], step


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_seed_offset_and_uneven_data(tmp_path, backend):
    config = CONFIG.replace('"num_seqs": 40', '"num_seqs": 40 if _rank == 0 else 25, "seq_ordering": "random"')
    code, out, (r0, r1) = mpirun(tmp_path, "uneven", [
        "++distributed_backend", backend, "++horovod_dataset_distribution", "random_seed_offset"],
        config_text=config)
    assert code == 0, out
    # rank 1 has 5 batches, rank 0 has 8: the epoch ends for both after 5 steps, nobody hangs
    assert len(r0["steps"]) == len(r1["steps"]) == 5
    assert r0["steps"] == r1["steps"]
    order0 = [t for b in r0["train_tags"] for t in b]
    order1 = [t for b in r1["train_tags"] for t in b]
    assert order0[:25] != order1[:25]  # each rank shuffles with its own seed
    assert "finished after 5 steps" in out


@pytest.mark.parametrize("backend", BACKENDS)
def test_resume_two_ranks(tmp_path, backend):
    args = ["++distributed_backend", backend]
    code, out, (r0, _) = mpirun(tmp_path, "resume", args + ["++num_epochs", "1"])
    assert code == 0, out
    code, out, (r0b, r1b) = mpirun(tmp_path, "resume", args + ["++num_epochs", "2"])
    assert code == 0, out
    assert "start training at epoch 2" in out
    assert r0b["checkpoint_writes"] == ["model.002"] and r1b["checkpoint_writes"] == []
    # the second run starts from the saved parameters on both ranks
    assert r0b["steps"] == r1b["steps"]
    assert r0b["steps"][0] != r0["steps"][0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_param_sync_by_time(tmp_path, backend):
    # horovod_param_sync_time_diff = 0: every step is "late", so the ranks agree to sync every step
    code, out, (r0, r1) = mpirun(tmp_path, "ptime", [
        "++distributed_backend", backend, "++horovod_reduce_type", "param", "++horovod_param_sync_time_diff", "0"])
    assert code == 0, out
    assert [s for s, _ in r0["syncs"]] == list(range(1, 5)) == [s for s, _ in r1["syncs"]]
    assert [h for _, h in r0["syncs"]] == [h for _, h in r1["syncs"]]


ATTENTION_CONFIG = CONFIG.replace(textwrap.dedent("""\
    network = {
        "hidden": {"class": "linear", "activation": "tanh", "n_out": 8},
        "output": {"class": "softmax", "loss": "ce", "from": "hidden"},
    }"""), textwrap.dedent("""\
    network = {
        "enc": {"class": "rec", "unit": "nativelstm2", "n_out": 6},
        "enc_ctx": {"class": "linear", "activation": None, "from": "enc", "n_out": 4},
        "output": {"class": "rec", "from": [], "target": "classes", "unit": {
            "emb": {"class": "linear", "activation": None, "from": "prev:output", "n_out": 4},
            "s": {"class": "rnn_cell", "unit": "LSTMBlock", "from": ["emb", "prev:att"], "n_out": 4},
            "energy_in": {"class": "combine", "kind": "add", "from": ["base:enc_ctx", "s"], "n_out": 4},
            "energy": {"class": "linear", "activation": "tanh", "from": "energy_in", "n_out": 1},
            "weights": {"class": "softmax_over_spatial", "from": "energy"},
            "att": {"class": "generic_attention", "weights": "weights", "base": "base:enc"},
            "prob": {"class": "softmax", "from": ["s", "att"], "target": "classes", "loss": "ce", "dropout": 0.1},
            "output": {"class": "choice", "initial_output": 0, "from": "prob", "target": "classes", "beam_size": 2}}},
    }"""))


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_decoder_trains_in_step_on_two_ranks(tmp_path, backend):
    """A rec sub-network (attention decoder with a step loop) under mpirun -np 2: the ranks'
    parameters stay bit-identical after every step (gradients through the loop are reduced)."""
    assert "rnn_cell" in ATTENTION_CONFIG
    code, out, (r0, r1) = mpirun(tmp_path, "att", ["++distributed_backend", backend], config_text=ATTENTION_CONFIG)
    assert code == 0, out
    assert len(r0["steps"]) == len(r1["steps"]) > 0 and r0["steps"] == r1["steps"]
    assert len(set(r0["steps"])) == len(r0["steps"])


SPARSE_CONFIG = CONFIG.replace(
    'train = {"class": "DummyDataset", "input_dim": 5, "output_dim": 3, "num_seqs": 40, "seq_len": 10}',
    'train = {"class": "Task12AXDataset", "num_seqs": 40}\n'
    'dev = {"class": "Task12AXDataset", "num_seqs": 10, "fixed_random_seed": 1}').replace(
    "num_inputs = 5\nnum_outputs = 3", "num_inputs = 9\nnum_outputs = 2").replace(
    'optimizer = {"class": "adam"}', 'optimizer = {"class": "momentum", "momentum": 0.9}\n'
    'gradient_clip = 0.5\nlearning_rates = [0.01, 0.01, 200.0, 0.0]\nuse_last_best_model = True').replace(
    "num_epochs = 1", "num_epochs = 4")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_rows_and_last_best_model_on_two_ranks(tmp_path, backend):
    """Class-index input (an embedding: its gradient is rows, updated row-wise by momentum, touched
    rows reduced with the values), gradient_clip per occurrence, and use_last_best_model (rank 0
    loads the better epoch, all ranks take its parameters): bit-identical ranks after every step."""
    assert "Task12AXDataset" in SPARSE_CONFIG and "use_last_best_model" in SPARSE_CONFIG
    code, out, (r0, r1) = mpirun(tmp_path, "sparse", ["++distributed_backend", backend], config_text=SPARSE_CONFIG)
    assert code == 0, out
    assert len(r0["steps"]) == len(r1["steps"]) > 0 and r0["steps"] == r1["steps"]
    assert "Last epoch 3" in out and "is not the optimal model" in out, out[-3000:]
