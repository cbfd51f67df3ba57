"""A finished run's checkpoint is its result: a resume of it is refused before anything trains, and the file is kept
byte for byte; a killed run still resumes (tests/test_quick_start.py: exactly as the uninterrupted run)."""

import collections
import hashlib
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN_CONFIG

from recbole_mgformer import run_recommender
from recbole_mgformer.cli import main
from recbole_mgformer.training.checkpoint_files import load_checkpoint, save_atomically
from recbole_mgformer.training.resume import FINISHED_KEY, FinishedRunError, check_resumable, finished_run


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def finished(tiny_data, tmp_path):
    """A tiny BPR run of 2 epochs, trained and tested: (its settings, its checkpoint)."""
    settings = {"data_path": str(tiny_data), "epochs": 2, "checkpoint_dir": str(tmp_path / "saved"), **TINY_RUN_CONFIG}
    result = run_recommender("BPR", "tiny", config_dict=settings)
    return settings, Path(result["checkpoint"])


def written_before_the_mark(checkpoint):
    """The checkpoint as a run that ended before runs marked their end left it (no .latest.pth, no mark)."""
    state = load_checkpoint(checkpoint)
    del state[FINISHED_KEY]
    save_atomically(state, checkpoint)


def test_a_finished_run_records_its_end_in_its_checkpoint(finished):
    _, checkpoint = finished
    state = load_checkpoint(checkpoint)
    assert state[FINISHED_KEY] == {"epochs": 2, "best_epoch": state["epoch"]}
    assert not checkpoint.with_suffix(".latest.pth").exists()


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "before-the-mark"])
@pytest.mark.parametrize("named_as", ["best", "latest"])
def test_resuming_a_finished_run_is_refused_before_training_and_its_checkpoint_kept(
    finished, monkeypatch, marked, named_as
):
    from recbole.trainer import Trainer

    settings, checkpoint = finished
    if not marked:
        written_before_the_mark(checkpoint)
    before = digest(checkpoint)
    trained = []
    monkeypatch.setattr(Trainer, "_train_epoch", lambda *args, **kwargs: trained.append(args) or 0.0)
    resume_file = checkpoint if named_as == "best" else checkpoint.with_suffix(".latest.pth")
    kept = "it has no .*latest.pth beside it, which a run keeps until it ends"
    expected = "it finished at epoch 1 and was tested" if marked else kept
    message = f"finished run \\({expected}\\).*recommend --checkpoint .*larger --epochs"
    with pytest.raises(FinishedRunError, match=message):
        run_recommender("BPR", "tiny", config_dict={**settings, "epochs": 4}, resume_file=str(resume_file))
    assert trained == [] and digest(checkpoint) == before
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == [checkpoint.name]


def test_run_py_ends_a_resume_of_a_finished_run_with_its_message(finished, capsys):
    settings, checkpoint = finished
    before = digest(checkpoint)
    arguments = [f"--{key}={value}".replace("'", "") for key, value in settings.items()]
    with pytest.raises(SystemExit) as stop:
        main(["--model=BPR", "--dataset=tiny", f"--resume_file={checkpoint}", *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"error: {checkpoint} is the checkpoint of a finished run" in err
    assert digest(checkpoint) == before


def save(path, **state):
    torch.save({"config": {"model": "BPR", "eval_step": 1}, "epoch": 3, **state}, path)
    return path


@pytest.mark.parametrize(
    "files, resumable",
    [
        ({"best": {}, "latest": {}}, True),  # killed: the last epoch beside the best one
        ({"latest": {}}, True),  # killed before its best epoch was written
        ({"best": {"config": {"model": "BPR", "eval_step": 0}}}, True),  # never validates: never has a .latest.pth
        ({"best": {}}, False),  # ended before runs marked their end
        ({"best": {FINISHED_KEY: {"epochs": 5, "best_epoch": 3}}}, False),
        ({"best": {FINISHED_KEY: {"epochs": 5, "best_epoch": 3}}, "latest": {}}, False),  # killed while forgetting it
    ],
)
def test_a_run_counts_as_finished_by_its_mark_or_by_its_missing_last_epoch(tmp_path, files, resumable):
    best, latest = tmp_path / "BPR-1.pth", tmp_path / "BPR-1.latest.pth"
    for name, path in (("best", best), ("latest", latest)):
        if name in files:
            save(path, **files[name])
    assert (finished_run(best, latest) is None) == resumable
    if resumable:
        check_resumable(best)
    else:
        with pytest.raises(FinishedRunError, match="BPR-1.pth is the checkpoint of a finished run"):
            check_resumable(latest)


def test_a_damaged_best_checkpoint_beside_a_last_epoch_resumes_as_before(tmp_path):
    best, latest = tmp_path / "BPR-1.pth", save(tmp_path / "BPR-1.latest.pth")
    best.write_bytes(b"")
    assert finished_run(best, latest) is None
    best.unlink()
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*absent.pth"):
        check_resumable(tmp_path / "absent.pth")


@pytest.mark.parametrize("epochs_on_resume", [3, 2])
def test_a_run_killed_after_its_last_epoch_resumes_to_the_test_of_its_best_checkpoint(
    tiny_data, tmp_path, monkeypatch, epochs_on_resume
):
    """Killed between its last epoch and its test, the run resumes with nothing left to train (the same --epochs, or
    fewer): its best checkpoint is tested as the uninterrupted run's, never replaced by the last epoch's weights."""
    from recbole.trainer import Trainer

    from recbole_mgformer.training.resume import RunTimer

    validations = collections.Counter()

    def declining(trainer, *args, **kwargs):  # each run's first epoch validates best, on any machine
        validations[id(trainer)] += 1
        score = 1.0 / validations[id(trainer)]
        return score, {"ndcg@20": score}

    monkeypatch.setattr(Trainer, "_valid_epoch", declining)
    settings = {"data_path": str(tiny_data), "epochs": 3, "stopping_step": 50, **TINY_RUN_CONFIG}
    whole = run_recommender("BPR", "tiny", config_dict={**settings, "checkpoint_dir": str(tmp_path / "whole")})
    assert whole["best_epoch"] == 0

    def killed(*_):
        raise KeyboardInterrupt  # the machine goes away after the last epoch, before the test

    best_epoch = RunTimer.best_epoch
    monkeypatch.setattr(RunTimer, "best_epoch", killed)
    killed_settings = {**settings, "checkpoint_dir": str(tmp_path / "killed")}
    with pytest.raises(KeyboardInterrupt):
        run_recommender("BPR", "tiny", config_dict=killed_settings)
    monkeypatch.setattr(RunTimer, "best_epoch", best_epoch)
    (best,) = (tmp_path / "killed").glob("BPR-*[0-9].pth")
    weights = load_checkpoint(best)["state_dict"]

    resumed = run_recommender(
        "BPR",
        "tiny",
        config_dict={**killed_settings, "epochs": epochs_on_resume},
        resume_file=str(best.with_suffix(".latest.pth")),
    )
    kept = load_checkpoint(best)
    assert kept["epoch"] == 0 and kept[FINISHED_KEY]["best_epoch"] == 0 and resumed["best_epoch"] == 0
    for name, tensor in weights.items():
        torch.testing.assert_close(kept["state_dict"][name], tensor, rtol=0, atol=0)
    assert resumed["test_result"] == whole["test_result"]


def test_a_folder_given_as_the_resume_file_is_named_with_its_newest_checkpoint(finished, tmp_path):
    _, checkpoint = finished
    with pytest.raises(FileNotFoundError, match=rf"is a folder; .*, e.g. its newest: {checkpoint}$"):
        check_resumable(checkpoint.parent)
    with pytest.raises(FileNotFoundError, match=r"is a folder; .*\(it holds no .pth file\)"):
        check_resumable(tmp_path / "data")
