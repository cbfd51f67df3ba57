"""One search trial (``recbole_mgformer.tune.trials``): a random or grid search's trial stopped between two
evaluations goes on from its last epoch's checkpoint, and reports what the uninterrupted trial reports."""

import pytest
from ray.air import session

from recbole_mgformer.tune import trials
from recbole_mgformer.tune.trials import INDEX, METRIC, UNFINISHED, train_trial, unfinished_checkpoint

TINY_YAML = (
    "eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
    "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\n"
    "train_batch_size: 64\nembedding_size: 8\n"
)
DRAWN = [{"learning_rate": 0.01}, {"learning_rate": 0.003}]  # a search's draws; the trial runs draw 1


class Stopped(Exception):
    """The machine going away between two evaluations."""


@pytest.fixture
def trial(tiny_data, tmp_path, monkeypatch):
    """``run(stop_after=None, model="BPR", **overrides)`` -> the results trial 1 reported (up to a stop after
    evaluation ``stop_after``, counted from 0), with the request it ran under."""
    (tmp_path / "tiny.yaml").write_text(TINY_YAML)
    monkeypatch.chdir(tmp_path)
    runs = []
    monkeypatch.setattr(trials, "_ray_gpu_ids", lambda: "")  # no Ray worker here: train on the CPU

    def run(stop_after=None, model="BPR", **overrides):
        request = {
            "model": model,
            "dataset": "tiny",
            "config_files": [str(tmp_path / "tiny.yaml")],
            "overrides": {"epochs": 4, "stopping_step": 10, **overrides},
            "data_path": str(tiny_data),
            "experiment": str(tmp_path / "experiment"),
        }
        reported = []
        trial_dir = tmp_path / f"ray-{len(runs) + 1}" / "trial"  # each run of the search gives a new folder, as Ray
        trial_dir.mkdir(parents=True)
        runs.append(trial_dir)
        monkeypatch.setattr(session, "get_trial_dir", lambda: str(trial_dir))

        def report(result):
            reported.append(dict(result))
            if stop_after is not None and len(reported) == stop_after + 1:
                raise Stopped

        monkeypatch.setattr(session, "report", report)
        try:
            train_trial({INDEX: 1}, request, drawn=DRAWN)
        except Stopped:
            pass
        return reported, request

    return run


@pytest.mark.parametrize("stop_after", [0, 2, 3])  # after the first evaluation, in the middle, after the last
@pytest.mark.parametrize("model", ["BPR", "MGFormer"])
def test_a_trial_stopped_between_evaluations_resumes_and_reports_what_an_uninterrupted_one_reports(
    trial, stop_after, model
):
    whole, request = trial(model=model)
    assert [r["epoch"] for r in whole] == [1, 2, 3, 4] and whole[-1]["finished"]
    folder = unfinished_checkpoint(request, 1, DRAWN[1]).parent
    assert not list(folder.glob("*.pth"))  # a finished trial leaves no checkpoint

    stopped, _ = trial(stop_after, model=model)
    assert stopped == whole[: stop_after + 1]
    assert list(folder.glob("trial-0001-*.latest.pth"))
    resumed, _ = trial(model=model)
    # the evaluations before the stop are reported again, as they were, then training goes on as it would have
    assert resumed == whole
    assert not list(folder.glob("*.pth"))


def test_a_trial_that_early_stopping_ended_before_the_stop_trains_no_further(trial):
    whole, _ = trial(epochs=30, stopping_step=1, learning_rate=1.0)  # a rate that stops improving at once
    assert whole[-1]["finished"] and whole[-1]["epoch"] < 30
    stopped, _ = trial(len(whole) - 1, epochs=30, stopping_step=1, learning_rate=1.0)
    assert stopped == whole
    resumed, _ = trial(epochs=30, stopping_step=1, learning_rate=1.0)
    assert resumed == whole


def test_another_searchs_trial_of_the_same_index_does_not_resume_from_its_checkpoint(trial, monkeypatch):
    trial(1)  # stopped after two evaluations: its checkpoint stays
    monkeypatch.setattr(trials, "trial_params", lambda config, drawn: {"learning_rate": 0.02})  # other values
    other, request = trial()
    assert [r["epoch"] for r in other] == [1, 2, 3, 4]  # from its first epoch, not the other trial's third
    kept = list((unfinished_checkpoint(request, 1, DRAWN[1]).parent).glob("*.latest.pth"))
    assert len(kept) == 1 and kept[0].name.startswith("trial-0001-")  # the first trial's, left alone


def test_the_reported_best_score_is_the_best_so_far_at_each_evaluation(trial):
    whole, _ = trial()
    best = None
    for result in whole:
        best = result["valid_score"] if best is None else max(best, result["valid_score"])
        assert result[METRIC] == pytest.approx(best)
    assert {key for key in whole[-1] if key.startswith("best_") and key != METRIC} == {
        "best_recall@20",
        "best_ndcg@20",
    }


def test_the_checkpoints_of_running_trials_live_in_the_experiments_unfinished_folder(tmp_path):
    path = unfinished_checkpoint({"experiment": str(tmp_path)}, 7, {"learning_rate": 0.1})
    assert path.parent == tmp_path / UNFINISHED and path.name.startswith("trial-0007-") and path.suffix == ".pth"
    assert path != unfinished_checkpoint({"experiment": str(tmp_path)}, 7, {"learning_rate": 0.2})


def test_a_trial_closes_its_tensorboard_writer_even_when_stopped(trial, monkeypatch):
    """RecBole's writer flushes from a thread to a path relative to the working folder, which an actor's next
    trial changes: each trial closes it before it returns, stopped or not."""
    trainers = []
    prepare = trials.prepare

    def recording_prepare(config):
        prepared = prepare(config)
        trainers.append(prepared[1])
        return prepared

    monkeypatch.setattr(trials, "prepare", recording_prepare)
    trial(stop_after=0)
    trial()
    assert len(trainers) == 2 and all(trainer.tensorboard.all_writers is None for trainer in trainers)
