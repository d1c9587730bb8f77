"""cleanup_old_models: RETURNN's keep policy on real checkpoints; never the newest or the best."""
from __future__ import annotations

import pytest

from returnn.errors import ConfigError
from returnn.tf.checkpoint import CheckpointManager, is_complete, list_epoch_checkpoints
from returnn.tf.model_cleanup import cleanup_old_models, cleanup_options, default_keep_pattern, epochs_to_keep
from test_checkpoint import make_state, state_values, train_steps

DEV = [5, 4, 3, 2.5, 2.4, 2.6, 2.2, 2.1, 2.3, 2.0, 2.05, 2.2]


def scores_for(epochs):
    return {e: {"dev_score": DEV[e - 1], "train_score": 10.0 - e, "dev_error": 0.5} for e in epochs}


def test_keep_policy_hand_computed():
    epochs = list(range(1, 13))
    kept = epochs_to_keep(epochs, scores_for(epochs))
    # pattern for 12 epochs: 5, 10; last 2: 11, 12; best 4 dev: 10, 11, 8, 7 (7 before 12 on a tie);
    # best 4 train: 9..12; dev_error is the same everywhere and says nothing
    assert kept == {5, 7, 8, 9, 10, 11, 12}
    assert default_keep_pattern(10) == {4, 8, 5, 10}
    assert default_keep_pattern(100) == {40, 80, 10, 20, 40, 80}
    assert default_keep_pattern(500) == {320} | {20, 40, 80, 160}  # every 80 * 4 (1 + 500 // 240 = 3 -> 4)


def test_never_newest_or_best_even_with_zero_options():
    epochs = list(range(1, 9))
    scores = {e: {"dev_score": float(e)} for e in epochs}  # epoch 1 best, epoch 8 newest and worst
    kept = epochs_to_keep(epochs, scores, keep_last_n=0, keep_best_n=0, keep=[])
    assert kept == {1, 8}


def test_nothing_removed_while_few_checkpoints():
    assert epochs_to_keep([1, 2, 3, 4], {e: {"dev_score": e} for e in range(1, 5)}, keep=[]) == {1, 2, 3, 4}


def test_cleanup_deletes_real_checkpoints_and_kept_ones_restore(tmp_path):
    model = str(tmp_path / "model")
    net, opt = make_state()
    manager = CheckpointManager(model, network=net, optimizer=opt)
    saved = {}
    for epoch in range(1, 13):
        train_steps(net, opt, 1)
        manager.save(epoch)
        saved[epoch] = state_values(net, opt)
    removed = cleanup_old_models(model, cleanup_options(True), scores_for(range(1, 13)))
    assert removed == [1, 2, 3, 4, 6]
    assert list_epoch_checkpoints(model) == [5, 7, 8, 9, 10, 11, 12]
    assert not any((tmp_path / name).exists() for name in ("model.001.index", "model.006.index"))
    assert not list(tmp_path.glob("model.001.*")) and not list(tmp_path.glob("model.006.*"))
    other_net, other_opt = make_state(seed=3)
    assert CheckpointManager(model, network=other_net, optimizer=other_opt).restore(model + ".010") == 10
    for a, b in zip(saved[10], state_values(other_net, other_opt)):
        assert (a == b).all()
    assert is_complete(model + ".012")


def test_options_validated():
    assert cleanup_options({"keep_last_n": 3, "keep": [1]}) == {"keep_last_n": 3, "keep": [1]}
    with pytest.raises(ConfigError, match="keep_lats_n"):
        cleanup_options({"keep_lats_n": 3})
    with pytest.raises(ConfigError, match="cleanup_old_models"):
        cleanup_options("yes please")


def test_cleanup_value_in_a_tuple_means_the_defaults():
    """A published config writes ``cleanup_old_models = {...},`` (a tuple): RETURNN reads any true
    non-dict value as 'on, with the default policy'; so do we, with a warning."""
    from returnn.tf.model_cleanup import cleanup_options
    assert cleanup_options(({"keep": [60, 90], "keep_best_n": 4},)) == {}
    assert cleanup_options({"keep_best_n": 2}) == {"keep_best_n": 2}


def test_cleanup_deletes_pretrain_checkpoints_by_their_returnn_name(tmp_path):
    """RETURNN names a pretrain epoch's model ``<model>.pretrain.NNN`` (and the initial model of a
    pretrain epoch 1 ``<model>.pretrain.000``); its cleanup deletes them by that name (get_existing_models)."""
    model = str(tmp_path / "model")
    net, opt = make_state()
    manager = CheckpointManager(model, network=net, optimizer=opt)
    manager.pretrain_epochs = 4
    assert manager.save(0) == model + ".pretrain.000" and manager.save(4) == model + ".pretrain.004"
    for epoch in range(1, 13):
        manager.save(epoch)
    assert sorted(p.name for p in tmp_path.glob("*.index"))[:2] == ["model.005.index", "model.006.index"]
    removed = cleanup_old_models(model, cleanup_options(True), scores_for(range(1, 13)))
    assert removed == [1, 2, 3, 4, 6]
    assert list_epoch_checkpoints(model) == [5, 7, 8, 9, 10, 11, 12]
    assert not list(tmp_path.glob("model.pretrain.00[1-4].*"))
    assert is_complete(model + ".pretrain.000")  # the initial model is no epoch checkpoint: kept (as RETURNN)
