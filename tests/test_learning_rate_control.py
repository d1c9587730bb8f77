"""Learning-rate control: the file format and round trip, newbob variants, learning_rates, min rate."""
from __future__ import annotations

import math
import os
import re

import pytest

from returnn.config import Config
from returnn.errors import ConfigError, DataError
from returnn.learning_rate_control import LearningRateControl, read_learning_rate_file


def drive(control, errors, key="dev_score"):
    """Runs epochs 1..len(errors) (rate, then score) and returns the rates of epochs 1..len(errors)+1."""
    rates = []
    for epoch, err in enumerate(errors, start=1):
        rates.append(control.get_learning_rate_for_epoch(epoch))
        control.set_epoch_error(epoch, err if isinstance(err, dict) else {key: err})
    rates.append(control.get_learning_rate_for_epoch(len(errors) + 1))
    return rates


def reference(errors, lr, decay, decide, min_lr=0.0):
    """Rates of epochs 1..n+1: epoch e >= 3 decays the previous rate when decide(old, new) says so,
    with old/new the errors of epochs e-2 and e-1."""
    rates = [lr, lr]
    for e in range(3, len(errors) + 2):
        old, new = errors[e - 3], errors[e - 2]
        rates.append(max(rates[-1] * decay, min_lr) if decide(old, new) else rates[-1])
    return rates[:len(errors) + 1]


ERRORS = [4.0, 3.0, 2.9, 2.5, 2.48, 2.6, 2.0, 1.99, 1.5, 1.6]


@pytest.mark.parametrize("div_by_old", [False, True])
@pytest.mark.parametrize("threshold", [-0.01, -0.05, 0.0])
def test_newbob_relative(div_by_old, threshold):
    control = LearningRateControl("newbob", default_learning_rate=1.0, decay=0.5, relative_error_threshold=threshold,
                                  relative_error_div_by_old=div_by_old)
    rates = drive(control, ERRORS)

    def decide(old, new):
        return (new - old) / abs(old if div_by_old else new) > threshold
    expected = reference(ERRORS, 1.0, 0.5, decide)
    assert rates == pytest.approx(expected)
    assert len(set(expected)) > 2 and expected[-1] < expected[2]  # both decisions happened


def test_newbob_relative_default_divides_by_new_error():
    # (9 - 10) / 9 = -0.111 (no decay at -0.105), but (9 - 10) / 10 = -0.1 (decay).
    default = LearningRateControl("newbob_rel", default_learning_rate=1.0, relative_error_threshold=-0.105)
    assert drive(default, [10.0, 9.0]) == [1.0, 1.0, 1.0]
    by_old = LearningRateControl("newbob_rel", default_learning_rate=1.0, relative_error_threshold=-0.105,
                                 relative_error_div_by_old=True)
    assert drive(by_old, [10.0, 9.0]) == [1.0, 1.0, 0.5]


def test_newbob_threshold_is_strict():
    # Relative change exactly at the threshold is not worse than it: no decay.
    control = LearningRateControl("newbob", default_learning_rate=0.2, relative_error_threshold=-1.0)
    assert drive(control, [16.0, 8.0, 4.0, 4.0]) == pytest.approx([0.2, 0.2, 0.2, 0.2, 0.1])


def test_newbob_uses_dev_score_over_train_score_and_error_measure():
    errors = [{"train_score": 1.0, "dev_score": 2.0, "dev_error": 0.5},
              {"train_score": 1.5, "dev_score": 1.0, "dev_error": 0.6}]
    assert drive(LearningRateControl("newbob", default_learning_rate=1.0), errors)[-1] == 1.0
    by_train = LearningRateControl("newbob", default_learning_rate=1.0, error_measure="train_score")
    assert drive(by_train, errors)[-1] == 0.5
    by_err = LearningRateControl("newbob", default_learning_rate=1.0, error_measure="dev_error")
    assert drive(by_err, errors)[-1] == 0.5
    assert by_err.error_key(1) == "dev_error"
    train_only = LearningRateControl("newbob", default_learning_rate=1.0)
    assert drive(train_only, [{"train_score": 1.0}, {"train_score": 1.2}])[-1] == 0.5
    multi = LearningRateControl("newbob")
    multi.set_epoch_error(1, {"dev_score_aux": 1.0, "dev_score_output": 2.0, "train_score_output": 3.0})
    assert multi.error_key(1) == "dev_score_output"


@pytest.mark.parametrize("threshold", [-0.01, -0.3, 0.05])
def test_newbob_abs(threshold):
    control = LearningRateControl("newbob_abs", default_learning_rate=0.8, decay=0.7, error_threshold=threshold)
    rates = drive(control, ERRORS)
    expected = reference(ERRORS, 0.8, 0.7, lambda old, new: (new - old) > threshold)
    assert rates == pytest.approx(expected)


def reference_multi(errors, lr, decay, threshold, n, interval):
    """Mean of the relative changes (divided by the new error) over the last n+1 epochs (at least 2)."""
    rates = [lr]
    for e in range(2, len(errors) + 2):
        known = errors[:e - 1][-(n + 1):]
        if (e - 1) % interval == 0 and len(known) >= 2:
            rels = [(b - a) / abs(b) for a, b in zip(known[:-1], known[1:])]
            if sum(rels) / len(rels) > threshold:
                rates.append(rates[-1] * decay)
                continue
        rates.append(rates[-1])
    return rates


@pytest.mark.parametrize("n,interval", [(1, 1), (3, 1), (3, 3), (2, 2), (5, 1)])
def test_newbob_multi_epoch(n, interval):
    errors = [4.0, 3.0, 2.9, 2.95, 2.8, 2.0, 1.99, 1.98, 2.1, 1.0, 0.99, 0.98, 0.99, 0.985, 0.99, 0.98, 0.99]
    control = LearningRateControl("newbob_multi_epoch", default_learning_rate=1.0, decay=0.5,
                                  relative_error_threshold=-0.02, multi_num_epochs=n, multi_update_interval=interval)
    expected = reference_multi(errors, 1.0, 0.5, -0.02, n, interval)
    assert drive(control, errors) == pytest.approx(expected)
    assert expected[-1] < 1.0


def test_newbob_multi_epoch_grow_threshold_above_decay_threshold():
    """RETURNN asserts not (grow and decay): a mean relative error between a decay threshold below
    the grow threshold is an error (here one line), one outside that range decides as usual."""
    def control():
        return LearningRateControl("newbob_multi_epoch", default_learning_rate=1.0, decay=0.5, growth=2.0,
                                   relative_error_threshold=-0.5, relative_error_grow_threshold=0.5,
                                   multi_num_epochs=1, multi_update_interval=1)
    with pytest.raises(ConfigError, match="epoch 3: newbob_multi_epoch.s mean relative error -0.111111 is above"):
        drive(control(), [1.0, 0.9])
    assert drive(control(), [1.0, 0.4]) == [1.0, 1.0, 2.0]  # (0.4 - 1) / 0.4 = -1.5: grow
    assert drive(control(), [1.0, 3.0]) == [1.0, 1.0, 0.5]  # (3 - 1) / 3 = 0.67: above both: decay


def test_newbob_multi_epoch_interval_defaults_to_num_epochs():
    control = LearningRateControl.from_config(Config({"learning_rate_control": "newbob_multi_epoch",
                                                      "newbob_multi_num_epochs": 3}))
    assert control.multi_update_interval == 3
    control = LearningRateControl.from_config(Config({"learning_rate_control": "newbob_multi_epoch",
                                                      "newbob_multi_num_epochs": 3, "newbob_multi_update_interval": 1}))
    assert control.multi_update_interval == 1


def test_min_learning_rate():
    control = LearningRateControl("newbob", default_learning_rate=1.0, decay=0.5, min_learning_rate=0.2)
    rates = drive(control, [1.0] * 7)  # never improves: decay from epoch 3 on
    assert rates == pytest.approx([1.0, 1.0, 0.5, 0.25, 0.2, 0.2, 0.2, 0.2])


def test_learning_rates_list_then_control():
    control = LearningRateControl("constant", default_learning_rate=9.0, learning_rates=[0.1, 0.2, 0.3])
    assert drive(control, [1.0] * 5) == pytest.approx([0.1, 0.2, 0.3, 0.3, 0.3, 0.3])
    newbob = LearningRateControl("newbob", default_learning_rate=9.0, learning_rates=[0.1, 0.2, 0.4], decay=0.5)
    assert drive(newbob, [3.0, 2.0, 1.0, 1.0, 0.5]) == pytest.approx([0.1, 0.2, 0.4, 0.4, 0.2, 0.2])


def test_learning_rates_dict_and_the_constant_rate_of_the_epoch_before(tmp_path):
    """RETURNN's learning_rates as {epoch: rate}: listed epochs take theirs, the others the control's
    (constant: the rate of the epoch before); a learning-rate file's rates stay (a resumed run whose
    config changed learning_rate keeps the file's last rate, as RETURNN's constant control does)."""
    control = LearningRateControl("constant", default_learning_rate=1.0, learning_rates={1: 0.02, 3: 0.005})
    assert drive(control, [1.0] * 4) == pytest.approx([0.02, 0.02, 0.005, 0.005, 0.005])
    newbob = LearningRateControl("newbob", default_learning_rate=1.0, learning_rates={2: 0.5}, decay=0.5)
    assert drive(newbob, [3.0, 3.0, 3.0]) == pytest.approx([1.0, 0.5, 0.25, 0.125])
    path = tmp_path / "lr.txt"
    path.write_text("{1: EpochData(learningRate=0.5, error={'dev_score': 1.0}),\n"
                    " 2: EpochData(learningRate=0.5, error={'dev_score': 0.9})}\n")
    resumed = LearningRateControl("constant", default_learning_rate=0.1, filename=str(path))
    assert resumed.get_learning_rate_for_epoch(3) == 0.5


def test_listed_epochs_are_in_the_file_from_the_first_save(tmp_path):
    """RETURNN's LearningRateControl sets every epoch of learning_rates at start-up: the file holds them
    all (rate, no scores) from its first save on; an epoch the file already has a rate for keeps it
    (whole run: engine-run golden lr_file_listed_epochs)."""
    path = tmp_path / "lr.data"
    control = LearningRateControl("constant", default_learning_rate=1.0, learning_rates={1: 0.1, 2: 0.2, 5: 0.05},
                                  filename=str(path))
    control.set_epoch_error(1, {"dev_score": 1.0})
    control.save()
    epochs = read_learning_rate_file(str(path))
    assert sorted(epochs) == [1, 2, 5]
    assert [epochs[e].learning_rate for e in (1, 2, 5)] == [0.1, 0.2, 0.05]
    assert epochs[2].error == {} and epochs[5].error == {}
    assert "2: EpochData(learningRate=0.2, error={}),\n" in path.read_text()  # RETURNN's better_repr
    path.write_text("{1: EpochData(learningRate=0.1, error={'dev_score': 1.0}),\n"
                    " 2: EpochData(learningRate=0.3, error={})}\n")
    resumed = LearningRateControl("constant", default_learning_rate=1.0, learning_rates=[0.1, 0.2, 0.4],
                                  filename=str(path))
    assert [resumed.get_learning_rate_for_epoch(e) for e in (1, 2, 3)] == [0.1, 0.3, 0.4]


def test_constant():
    control = LearningRateControl("constant", default_learning_rate=0.003)
    assert drive(control, [3.0, 4.0, 5.0, 6.0]) == [0.003] * 5


def test_unknown_control_is_config_error():
    with pytest.raises(ConfigError, match="newbob_abs"):
        LearningRateControl("cosine")


def test_from_config_option_names(tmp_path):
    config = Config({"learning_rate_control": "newbob_abs", "learning_rate": 0.5, "min_learning_rate": 0.01,
                     "newbob_learning_rate_decay": 0.3, "newbob_error_threshold": 0.2,
                     "learning_rate_file": str(tmp_path / "lr.data"), "learning_rates": [0.1],
                     "learning_rate_control_error_measure": "dev_error"})
    c = LearningRateControl.from_config(config)
    assert (c.kind, c.default_learning_rate, c.min_learning_rate, c.decay, c.error_threshold) == \
        ("newbob_abs", 0.5, 0.01, 0.3, 0.2)
    assert c.learning_rates == {1: 0.1} and c.error_measure == "dev_error" and c.filename == str(tmp_path / "lr.data")


# ---------------------------------------------------------------- the file

class _IndependentEpochData:
    def __init__(self, learningRate, error):  # noqa: N803
        self.lr, self.error = learningRate, error


def test_file_round_trip_and_format(tmp_path):
    path = str(tmp_path / "sub" / "newbob.data")
    control = LearningRateControl("newbob", default_learning_rate=0.01, filename=path)
    scores = [{"train_score": 1.25, "dev_score": 1.5, "dev_error": 0.125},
              {"train_score": 0.1 + 0.2, "dev_score": 1.0 / 3.0, "dev_error": float("nan")},
              {"train_score": float("inf"), "dev_score": 1e-20}]
    drive(control, scores)
    control.save()
    assert sorted(os.listdir(tmp_path / "sub")) == ["newbob.data"]  # no temp files left
    text = open(path).read()
    # RETURNN's format: a dict literal of EpochData(learningRate=..., error={...}).
    assert text.startswith("{\n") and text.rstrip().endswith("}")
    # (epoch 4 has a rate, no scores yet: "error={})," on its line, as RETURNN's better_repr writes it)
    heads = re.findall(r"^(\d+): EpochData\(learningRate=([^,]+), error=\{(?:\}\),)?$", text, re.M)
    assert [int(e) for e, _ in heads] == [1, 2, 3, 4]
    assert "4: EpochData(learningRate=0.01, error={}),\n" in text
    parsed = eval(text, {"EpochData": _IndependentEpochData, "nan": float("nan"), "inf": float("inf")})
    assert sorted(parsed) == [1, 2, 3, 4]
    for epoch, data in parsed.items():
        assert data.lr == control.epochs[epoch].learning_rate
    assert parsed[2].error["train_score"] == 0.1 + 0.2 and parsed[2].error["dev_score"] == 1.0 / 3.0
    assert math.isnan(parsed[2].error["dev_error"]) and parsed[3].error["train_score"] == float("inf")
    assert parsed[4].error == {}
    # Reading back gives the same epochs, rates and errors.
    back = read_learning_rate_file(path)
    assert sorted(back) == [1, 2, 3, 4]
    for epoch in back:
        assert back[epoch].learning_rate == control.epochs[epoch].learning_rate
        a, b = back[epoch].error, control.epochs[epoch].error
        assert sorted(a) == sorted(b)
        assert all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)
    # A new control on the same file resumes with the same rates and the next decision.
    again = LearningRateControl("newbob", default_learning_rate=0.5, filename=path)
    assert [again.get_learning_rate_for_epoch(e) for e in (1, 2, 3, 4)] == \
        [control.get_learning_rate_for_epoch(e) for e in (1, 2, 3, 4)]
    assert again.last_epoch_with_error() == 3


def test_save_overwrites_atomically(tmp_path):
    path = str(tmp_path / "lr.data")
    control = LearningRateControl("constant", default_learning_rate=0.1, filename=path)
    control.set_epoch_error(1, {"train_score": 1.0})
    control.save()
    control.set_epoch_error(2, {"train_score": 0.5})
    control.save()
    assert os.listdir(tmp_path) == ["lr.data"]
    assert sorted(read_learning_rate_file(path)) == [1, 2]


def test_reads_returnn_written_file(tmp_path):
    path = tmp_path / "newbob.data"
    path.write_text("{\n1: EpochData(learningRate=0.001, error={\n'dev_error_output': 0.25,\n"
                    "'dev_score_output': 1.5,\n'train_score_output': 2.0,\n}),\n"
                    "2: EpochData(learningRate=0.001, error={'dev_score_output': 1.6, 'train_score_output': 1.0}),\n"
                    "3: EpochData(learningRate=0.0005, error=3.5),\n}\n")
    control = LearningRateControl("newbob", default_learning_rate=0.001, filename=str(path))
    assert control.epochs[3].error == {"old_format_score": 3.5}
    assert control.error_key(1) == "dev_score_output"
    assert control.get_learning_rate_for_epoch(3) == 0.0005  # stored rates are kept


def test_bad_file_is_data_error(tmp_path):
    path = tmp_path / "lr.data"
    path.write_text("{1: EpochData(learningRate=0.1, error={)}\n")
    with pytest.raises(DataError, match="lr.data"):
        read_learning_rate_file(str(path))


def test_min_num_epochs_per_new_lr_holds_each_rate():
    """Errors only grow, so newbob would decay every epoch; N=3 keeps every rate 3 epochs
    (the first one too), as RETURNN's learning_rate_control_min_num_epochs_per_new_lr does."""
    control = LearningRateControl("newbob", default_learning_rate=1.0, min_num_epochs_per_new_lr=3)
    rates = drive(control, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6])
    assert rates == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    plain = drive(LearningRateControl("newbob", default_learning_rate=1.0), [1.0, 1.1, 1.2, 1.3])
    assert plain == [1.0, 1.0, 0.5, 0.25, 0.125]


def test_min_num_epochs_from_config():
    config = Config({"learning_rate_control": "newbob_multi_epoch", "newbob_multi_num_epochs": 1,
                     "newbob_multi_update_interval": 1, "learning_rate_control_min_num_epochs_per_new_lr": 2})
    control = LearningRateControl.from_config(config)
    assert drive(control, [1.0, 1.1, 1.2, 1.3, 1.4]) == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


def test_error_measure_exp_suffix_is_the_recorded_exp_score():
    """RETURNN's get_error_key looks for the measure's key as it is: 'dev_score:exp' is the score the engine
    records with calculate_exp_loss; without it the control falls back to dev_score (found by
    benchmarks/returnn_fuzz_lr.py: this engine computed exp itself). CE 2.015 -> 2.0: relative change
    -0.0075 (decay at threshold -0.01); the perplexity changes by 1 - e^0.015 = -0.0151 (no decay)."""
    errors = [2.015, 2.0]
    ce = drive(LearningRateControl("newbob", default_learning_rate=1.0, error_measure="dev_score"), errors)
    assert ce == [1.0, 1.0, 0.5]
    for measure in ("dev_score:exp", "dev_score_output:exp"):
        fallback = drive(LearningRateControl("newbob", default_learning_rate=1.0, error_measure=measure), errors)
        assert fallback == [1.0, 1.0, 0.5], measure
    both = [{"dev_score": e, "dev_score:exp": math.exp(e)} for e in errors]
    ppl = drive(LearningRateControl("newbob", default_learning_rate=1.0, error_measure="dev_score:exp"), both)
    assert ppl == [1.0, 1.0, 1.0]


def test_error_key_prefers_the_output_sub_layer_score_as_returnn():
    """Several scores of a rec layer 'output' (dev_score_output/ce, dev_score_output/output): RETURNN looks at
    dev_score_output/output; without dev scores of 'output', at the first 'dev_' key by name (dev_error_...
    before dev_score_...)."""
    control = LearningRateControl("newbob", default_learning_rate=1.0)
    control.set_epoch_error(1, {"dev_score_output/ce": 1.0, "dev_score_output/output": 2.0, "train_score": 3.0})
    assert control.error_key(1) == "dev_score_output/output"
    control.set_epoch_error(2, {"dev_score_ctc": 1.0, "dev_error_ctc": 0.5, "train_score": 3.0})
    assert control.error_key(2) == "dev_error_ctc"
    control.set_epoch_error(3, {"dev_score_output/ctc": 1.0, "dev_score_output/att": 2.0})
    assert control.error_key(3) == "dev_score_output/att"


def test_set_default_learning_rate_keeps_a_stored_rate():
    control = LearningRateControl("newbob", default_learning_rate=1.0)
    assert control.set_default_learning_rate_for_epoch(1, 0.3) == 0.3
    assert control.set_default_learning_rate_for_epoch(1, 0.7) == 0.3
    assert control.get_learning_rate_for_epoch(1) == 0.3
