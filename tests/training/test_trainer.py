import threading
from pathlib import Path

import pytest
import torch

from recbole_mgformer.training.checkpoint_files import load_checkpoint, plain_value, save_atomically
from recbole_mgformer.training.trainer import claim_file


def full_scores(model, test):
    model.eval()
    model.restore_user_e = model.restore_item_e = None
    with torch.no_grad():
        return torch.cat([model.full_sort_predict(batch[0]) for batch in test])


@pytest.mark.parametrize("name", ["MGFormer", "SimGCL", "XSimGCL", "DirectAU"])
def test_checkpoint_loads_weights_only_and_reproduces_scores(tiny_setup, name):
    config, model, trainer, (train, valid, test) = tiny_setup(name, epochs=2)
    trainer.fit(train, valid, saved=True, show_progress=False)
    checkpoint = torch.load(trainer.saved_model_file, weights_only=True)
    assert checkpoint["config"]["model"] == name

    _, fresh, fresh_trainer, _ = tiny_setup(name, epochs=2)  # same data split, so the same graph
    with torch.no_grad():  # every saved float tensor scrambled: loading must restore all of them
        for tensor in fresh.state_dict().values():
            if tensor.is_floating_point():
                tensor.normal_()
    assert not torch.equal(full_scores(fresh, test), full_scores(model, test))
    fresh_trainer.evaluate(test, load_best_model=True, model_file=trainer.saved_model_file)
    model.load_state_dict(checkpoint["state_dict"])
    torch.testing.assert_close(full_scores(fresh, test), full_scores(model, test), rtol=0, atol=0)


def test_training_resumes_from_a_checkpoint(tiny_setup):
    _, _, trainer, (train, valid, _) = tiny_setup(epochs=1)
    trainer.fit(train, valid, saved=True, show_progress=False)
    checkpoint = load_checkpoint(trainer.saved_model_file)

    _, resumed_model, resumed, _ = tiny_setup(epochs=3)
    with torch.no_grad():
        for tensor in resumed_model.parameters():
            tensor.normal_()
    resumed.resume_checkpoint(trainer.saved_model_file)
    assert resumed.start_epoch == checkpoint["epoch"] + 1
    for name, tensor in checkpoint["state_dict"].items():
        torch.testing.assert_close(resumed_model.state_dict()[name], tensor)
    resumed.fit(train, valid, saved=True, show_progress=False)
    assert load_checkpoint(trainer.saved_model_file)["epoch"] >= checkpoint["epoch"]


def test_resuming_with_another_model_is_refused(tiny_setup):
    _, _, trainer, (train, valid, _) = tiny_setup(epochs=1)
    trainer.fit(train, valid, saved=True, show_progress=False)
    _, _, other, _ = tiny_setup("BPR", epochs=1, train_neg_sample_args={"distribution": "uniform", "sample_num": 1})
    with pytest.raises(ValueError, match="written by model 'MGFormer'"):
        other.resume_checkpoint(trainer.saved_model_file)


def test_resuming_with_other_training_settings_is_refused(tiny_setup):
    _, _, trainer, (train, valid, _) = tiny_setup(epochs=1)
    trainer.fit(train, valid, saved=True, show_progress=False)
    _, _, other, _ = tiny_setup(epochs=1, learning_rate=0.0123)
    with pytest.raises(ValueError, match="trained with other settings .learning_rate: .* there, 0.0123 here"):
        other.resume_checkpoint(trainer.saved_model_file)


def test_a_pickled_checkpoint_is_refused_with_a_clear_error(tmp_path):
    import argparse

    path = tmp_path / "pickled.pth"
    torch.save({"config": argparse.Namespace(model="BPR")}, path)  # like RecBole's pickled Config
    with pytest.raises(ValueError, match="weights_only=True"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda data: b"", r"is damaged: the file is empty \(0 bytes\)"),
        (lambda data: data[: len(data) // 2], r"is damaged: its \d+ bytes are not a complete torch.save archive"),
    ],
)
def test_a_damaged_checkpoint_is_called_damaged(tmp_path, damage, reason):
    whole = tmp_path / "whole.pth"
    save_atomically({"state_dict": {"w": torch.ones(64)}, "epoch": 3}, whole)
    path = tmp_path / "damaged.pth"
    path.write_bytes(damage(whole.read_bytes()))
    with pytest.raises(ValueError, match=reason) as raised:
        load_checkpoint(path)
    assert "RecBole" not in str(raised.value)  # not the hint about pickled checkpoints
    assert load_checkpoint(whole)["epoch"] == 3


@pytest.mark.parametrize("content", [b"root:x:0:0:root:/root:/bin/bash\n", b"\x89PNG\r\n", b"x"])
def test_a_file_that_is_no_checkpoint_is_not_called_damaged(tmp_path, content):
    path = tmp_path / "passwd"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"passwd is not a checkpoint: torch.save writes a zip archive") as raised:
        load_checkpoint(path)
    assert "Delete" not in str(raised.value) and path.read_bytes() == content  # no advice to delete someone's file


def test_a_missing_checkpoint_is_named_as_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*absent.pth"):
        load_checkpoint(tmp_path / "absent.pth")


def test_a_checkpoint_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "model.pth"
    save_atomically({"epoch": 1}, path)
    assert load_checkpoint(path) == {"epoch": 1}
    real_save = torch.save

    def dies_halfway(state, file):
        real_save(state, file)
        with open(file, "r+b") as written:
            written.truncate(10)
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_halfway)
    with pytest.raises(OSError, match="disk full"):
        save_atomically({"epoch": 2}, path)
    assert load_checkpoint(path) == {"epoch": 1}  # the previous checkpoint, intact
    assert [p.name for p in tmp_path.iterdir()] == ["model.pth"]  # no temporary file left behind


def test_plain_value_keeps_plain_data_and_stringifies_objects():
    assert plain_value({"a": [1, 2.5, None, "x"], "b": (True,)}) == {"a": [1, 2.5, None, "x"], "b": [True]}
    assert plain_value({"device": torch.device("cpu")}) == {"device": "cpu"}


def test_plain_value_turns_numpy_numbers_into_builtins_that_load_weights_only(tmp_path):
    import numpy as np

    value = plain_value({"score": np.float64(0.25), "n": np.int64(3), "low": np.float32(0.5), "ok": np.bool_(True)})
    assert value == {"score": 0.25, "n": 3, "low": 0.5, "ok": True}
    assert {type(v) for v in value.values()} == {float, int, bool}
    torch.save(value, tmp_path / "state.pth")
    assert load_checkpoint(tmp_path / "state.pth") == value


def test_csa_trainer_decays_the_learning_rate_by_epoch_alone(monkeypatch):
    from recbole.trainer import Trainer

    from recbole_mgformer.integration.registry import get_trainer
    from recbole_mgformer.training.trainer import CSATrainer

    assert issubclass(get_trainer("CONTEXT", "CSA"), CSATrainer)
    trainer = object.__new__(CSATrainer)  # the schedule needs no data or model
    trainer.learning_rate, trainer.lr_decay_step, trainer.lr_decay_factor = 0.01, 2, 0.2
    trainer.optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    seen = []
    monkeypatch.setattr(
        Trainer, "_train_epoch", lambda self, *args, **kwargs: seen.append(self.optimizer.param_groups[0]["lr"])
    )
    for epoch in (0, 1, 2, 3, 4, 7):  # a resumed run starting at epoch 7 gets epoch 7's rate
        trainer._train_epoch(None, epoch)
    assert seen == pytest.approx([0.01, 0.01, 0.002, 0.002, 0.0004, 0.01 * 0.2**3])
    trainer.lr_decay_step = 0
    assert trainer.learning_rate_at(9) == 0.01


def test_changed_settings_names_training_keys_only():
    from recbole_mgformer.training.trainer import changed_settings

    recorded = {"learning_rate": 0.005, "embedding_size": 64, "device": "cpu", "epochs": 30, "old_key": 1}
    current = {"learning_rate": 0.001, "embedding_size": 64, "device": "cuda", "epochs": 300, "new_key": 2}
    assert changed_settings(recorded, current) == {"learning_rate": (0.005, 0.001)}


def test_two_runs_started_in_the_same_second_keep_both_checkpoints(tiny_setup, monkeypatch):
    # RecBole named both <model>-<time>.pth: the second run's weights replaced the first's.
    import recbole.trainer.trainer as recbole_trainer

    import recbole_mgformer.training.trainer as trainer_module

    for module in (recbole_trainer, trainer_module):
        monkeypatch.setattr(module, "get_local_time", lambda: "Nov-28-2026_04-00-00")
    trainers = [tiny_setup("BPR", seed=seed)[2] for seed in (1, 2)]
    for trainer in trainers:
        trainer._save_checkpoint(0, verbose=False)
    first, second = (Path(trainer.saved_model_file) for trainer in trainers)
    assert first != second and first.name.startswith("BPR-Nov-28-2026_04-00-00-")
    for trainer, path in zip(trainers, (first, second)):
        assert torch.equal(
            load_checkpoint(str(path))["state_dict"]["user_embedding.weight"], trainer.model.user_embedding.weight
        )


def test_a_taken_run_name_is_never_replaced(tiny_setup, tmp_path):
    trainer = tiny_setup("BPR")[2]
    Path(trainer.saved_model_file).write_bytes(b"another run's weights")  # took the name in the same instant
    taken = trainer.saved_model_file
    trainer._save_checkpoint(0, verbose=False)
    assert Path(taken).read_bytes() == b"another run's weights"
    assert trainer.saved_model_file != taken and load_checkpoint(trainer.saved_model_file)["epoch"] == 0
    trainer._save_checkpoint(1, verbose=False)  # its own file from then on
    assert load_checkpoint(trainer.saved_model_file)["epoch"] == 1


def test_a_claimed_name_gets_a_suffix_beside_it(tmp_path):
    path = tmp_path / "BPR-x.pth"
    assert claim_file(str(path)) == str(path) and path.exists()
    other = Path(claim_file(str(path)))
    assert other != path and other.parent == tmp_path and other.name.startswith("BPR-x-") and other.suffix == ".pth"


def test_resuming_on_data_whose_rows_were_reordered_is_refused(tiny_setup, tiny_data):
    # The old code continued training the checkpoint's rows as if they were the reordered data's users and items.
    _, _, trainer, (train, valid, _) = tiny_setup("BPR", epochs=1)
    trainer.fit(train, valid, saved=True, show_progress=False)
    inter = tiny_data / "tiny" / "tiny.inter"
    header, *rows = inter.read_text().splitlines()
    inter.write_text("\n".join([header, *reversed(rows)]) + "\n")
    _, _, resumed, (train, valid, _) = tiny_setup("BPR", epochs=3)
    resumed.resume_checkpoint(trainer.saved_model_file)
    with pytest.raises(ValueError, match=r"was trained on other data .* users renumbered"):
        resumed.fit(train, valid, saved=True, show_progress=False)


def _ranked(model, test):
    model.eval()
    with torch.no_grad():
        return torch.cat([model.full_sort_predict(batch[0]).reshape(-1) for batch in test]).float()


@pytest.mark.parametrize("name", ["EASE", "ItemKNN", "SLIMElastic"])
def test_a_closed_form_checkpoint_loads_weights_only_and_the_rebuilt_model_scores_the_same(tiny_setup, name):
    from recbole_mgformer.integration.checkpoints import load_data_and_model

    config, model, trainer, (train, valid, test) = tiny_setup(name)
    trainer.fit(train, valid, saved=True, show_progress=False)
    # RecBole's other_parameter() holds its numpy and scipy matrices, which weights_only refuses: left out, since
    # the constructor computes them from the config and the training set
    assert torch.load(trainer.saved_model_file, weights_only=True)["other_parameter"] == {}
    trainer.evaluate(test, load_best_model=True)  # the trainer's own model keeps its matrices
    *_, rebuilt, _, _, _, rebuilt_test = load_data_and_model(trainer.saved_model_file, log=False)[:6]
    torch.testing.assert_close(_ranked(rebuilt, rebuilt_test), _ranked(model, test))


def test_a_trained_model_with_state_that_is_not_a_tensor_is_refused_at_saving(tiny_setup):
    import numpy

    from recbole_mgformer.training.checkpoint_files import checkpoint_other_parameter

    _, model, trainer, (train, valid, _) = tiny_setup("MGFormer", epochs=1)
    assert set(checkpoint_other_parameter(model)) == {"restore_user_e", "restore_item_e", "training_steps"}
    model.restore_item_e = numpy.zeros(3)  # a general model's state would be lost at loading: an error instead
    with pytest.raises(TypeError, match=r"MGFormer.other_parameter\(\) holds restore_item_e, numpy or scipy arrays"):
        checkpoint_other_parameter(model)


def test_every_recbole_trainer_has_its_written_out_version():
    import recbole.trainer as recbole_trainers

    from recbole_mgformer.training.trainer import TRAINERS, RunnerTrainerMixin

    chosen = {  # what RecBole's get_trainer can return: its trainers but the two abstract ones
        cls
        for name, cls in vars(recbole_trainers).items()
        if isinstance(cls, type)
        and name.endswith("Trainer")
        and cls.__module__ == "recbole.trainer.trainer"
        and name not in ("AbstractTrainer", "DecisionTreeTrainer")
    }
    assert set(TRAINERS) == chosen
    for recbole_class, project_class in TRAINERS.items():
        assert project_class.__bases__ == (RunnerTrainerMixin, recbole_class)
        assert project_class.__name__ == recbole_class.__name__


def test_a_trainer_says_whether_its_epoch_is_recboles():
    from recbole.trainer import Trainer

    from recbole_mgformer.training.trainer import TRAINERS, CSATrainer

    for recbole_class, project_class in TRAINERS.items():
        own_epoch = getattr(recbole_class, "_train_epoch", None)  # the decision trees have none
        assert project_class.recbole_epoch == (own_epoch is Trainer._train_epoch), project_class
    assert not CSATrainer.recbole_epoch  # its step decay wraps RecBole's own loop, as it always did


def tensorboard_threads():
    return [thread for thread in threading.enumerate() if type(thread).__name__ == "_AsyncWriterThread"]


@pytest.mark.parametrize("name", ["MGFormer", "Pop"])
def test_the_tensorboard_writer_is_open_only_while_fitting(tiny_setup, tmp_path, monkeypatch, name):
    """RecBole's writer stayed open after the trainer was built: its thread later wrote to a relative path that a
    change of folder, or a deleted folder, had invalidated."""
    threads_before = len(tensorboard_threads())
    _, _, trainer, (train, valid, _) = tiny_setup(name, epochs=2)
    assert trainer.tensorboard.all_writers is None  # built, not fitting: closed
    assert len(tensorboard_threads()) == threads_before
    board = Path(trainer.tensorboard.log_dir)
    assert board.is_absolute() and board.is_relative_to(tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # as a tuning trial's actor does between trials
    trainer.fit(train, valid, saved=False, show_progress=False)
    assert trainer.tensorboard.all_writers is None
    assert len(tensorboard_threads()) == threads_before
    assert not (elsewhere / "log_tensorboard").exists()
    if name == "MGFormer":  # a model with a training loss writes it, into the folder the writer was given
        largest = max(path.stat().st_size for path in board.glob("events.out.tfevents.*"))
        assert largest > 200


def test_the_tensorboard_writer_closes_when_fitting_fails(tiny_setup, monkeypatch):
    _, _, trainer, (train, valid, _) = tiny_setup(epochs=2)
    threads_before = len(tensorboard_threads())

    def fail(*args, **kwargs):
        trainer.tensorboard.add_scalar("probe", 1.0, 0)  # reopened inside fit
        assert len(tensorboard_threads()) == threads_before + 1
        raise RuntimeError("a failing epoch")

    monkeypatch.setattr(trainer, "_train_epoch", fail)
    with pytest.raises(RuntimeError, match="a failing epoch"):
        trainer.fit(train, valid, saved=False, show_progress=False)
    assert trainer.tensorboard.all_writers is None
    assert len(tensorboard_threads()) == threads_before
