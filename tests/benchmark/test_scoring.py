"""benchmark/scoring.py: a scoring-only variant (MGFormer's filter residual) scored from its trained entry's
checkpoint gives the metrics of training it end to end (weight 0) and of loading that checkpoint by hand (weight
> 0); a missing, damaged or foreign checkpoint is a clear error, or retrained when asked."""

import json
import re

import pytest
import torch
from conftest import TINY_METRICS, benchmark_args, held_elsewhere

from recbole_mgformer.benchmark import main, slug
from recbole_mgformer.benchmark.general import scored_lines
from recbole_mgformer.benchmark.runs import Run, setup_run
from recbole_mgformer.benchmark.stats import read_per_user
from recbole_mgformer.training.checkpoint_files import load_checkpoint

TRAINED = "MGFormer[attention=False; embedding_size=8]"
# the residual's GF-CF for a 40 x 60 toy graph; passed to every run, as experiments/hybrid_grid.sh does
FILTER = ["--filter_residual_k=8", "--filter_residual_alpha=0.3"]
SETTINGS = ["--epochs=3", *TINY_METRICS, "--precision=fp32", "--train_batch_size=64"]


def variant(weight):
    return f"MGFormer[attention=False; embedding_size=8; filter_residual=gfcf; filter_residual_weight={weight}]"


def args(models, tiny_data, tmp_path, *more, results="results"):
    return benchmark_args(models, tiny_data, tmp_path, *SETTINGS, *FILTER, *more, results=results)


def record(tmp_path, name, results="results"):
    return json.loads((tmp_path / results / "runs" / "tiny" / f"{name}-seed0.json").read_text())


TRAINED_NAME = "mgformer-attention-false-embedding-size-8"


def scored_name(weight):
    return slug(f"{TRAINED_NAME}-filter-residual-gfcf-filter-residual-weight-{weight}")


def test_weight_zero_scores_as_the_variant_trained_end_to_end(tiny_data, tmp_path, capsys):
    assert main(args(variant(0.0), tiny_data, tmp_path)) == 0  # trains the entry first, then scores from it
    out = capsys.readouterr().out
    assert "scored from MGFormer attention=False embedding_size=8, which has no record yet" in out
    trained, scored = record(tmp_path, TRAINED_NAME), record(tmp_path, scored_name("0.0"))
    checkpoint = tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.pth"
    assert load_checkpoint(checkpoint)["epoch"] == trained["best_epoch"]  # the best epoch is kept, not the last
    assert trained["config"]["filter_residual"] == "none" and "filter_residual_k" not in trained["settings"]
    # the same variant trained end to end: the residual at weight 0 changes neither training nor scores
    end_to_end = Run(
        "MGFormer",
        scored["overrides"],
        "tiny",
        0,
        runs_dir=tmp_path / "e2e" / "runs",
        data_path=tiny_data,
        checkpoint_dir=tmp_path / "e2e-saved",
        score_trained=False,
        extra=dict(scored["settings"]),
    ).execute()
    assert "scored_from" not in end_to_end
    assert scored["test"] == end_to_end["test"] and scored["valid"] == end_to_end["valid"]
    assert scored["best_epoch"] == end_to_end["best_epoch"] == trained["best_epoch"]
    # its record: the trained entry's training and selection, its own scoring, and where they came from
    assert scored["scored_from"]["checkpoint"] == str(checkpoint)
    assert scored["scored_from"]["epoch"] == trained["best_epoch"] and len(scored["scored_from"]["sha256"]) == 64
    assert scored["scored_from"]["record"].endswith(f"runs/tiny/{TRAINED_NAME}-seed0.json")
    for key in ("fit_seconds", "epochs", "train_seconds_per_epoch", "valid_history", "epoch_cap"):
        assert scored[key] == trained[key]
    assert scored["seconds"] == pytest.approx(trained["seconds"] + scored["scoring_seconds"], abs=0.11)
    assert scored["build_seconds"] > 0 and scored["test_seconds"] > 0 and scored["parameters"] == trained["parameters"]
    assert "selected on its validation ndcg@20 without the scoring options" in scored["protocol"]
    per_user = read_per_user(tmp_path / "results" / "runs" / "tiny" / f"{scored_name('0.0')}-seed0.json")
    assert sum(per_user.values()) / len(per_user) == pytest.approx(scored["test"]["ndcg@20"], abs=1e-4)
    page = (tmp_path / "results" / "tiny" / "leaderboard.md").read_text()
    assert "Scored from a trained entry's best-epoch checkpoint, not trained again" in page


def test_a_variant_whose_trained_entry_another_process_trains_is_skipped_unannounced(tiny_data, tmp_path, capsys):
    # it said "running" and then "skipped", as if it had started
    label = "[1/1] MGFormer attention=False embedding_size=8 filter_residual=gfcf filter_residual_weight=0.5"
    label += " on tiny, seed 0"
    with held_elsewhere(tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.lock") as holder:
        assert main(args(variant(0.5), tiny_data, tmp_path)) == 0
    out = capsys.readouterr().out
    assert f"{label}: skipped, another process (pid {holder.pid}) holds" in out and f"{label}: running" not in out
    assert main(args(variant(0.5), tiny_data, tmp_path)) == 0  # free now: the entry trains, then the variant scores
    out = capsys.readouterr().out
    assert out.index("which has no record yet: training it first") < out.index(f"{label}: running")


def test_a_positive_weight_scores_as_the_checkpoint_loaded_by_hand(tiny_data, tmp_path):
    assert main(args(f"{TRAINED},{variant(4.0)}", tiny_data, tmp_path)) == 0
    trained, scored = record(tmp_path, TRAINED_NAME), record(tmp_path, scored_name("4.0"))
    # by hand: the variant built as the benchmark builds it, the trained weights loaded, the trainer's evaluator
    config_dict = {
        "seed": 0,
        "data_path": str(tiny_data),
        "checkpoint_dir": str(tmp_path / "hand"),
        "show_progress": False,
        **scored["settings"],
        **scored["overrides"],
    }
    _, model, trainer, (_, valid_data, test_data) = setup_run("MGFormer", "tiny", [], config_dict)
    state = torch.load(tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.pth", weights_only=True)
    loaded = model.load_state_dict(state["state_dict"], strict=False)
    assert loaded.missing_keys == ["residual_filter.fake_loss"] and not loaded.unexpected_keys
    assert scored["valid"] == trainer.evaluate(valid_data, load_best_model=False)
    assert scored["test"] == trainer.evaluate(test_data, load_best_model=False)
    assert scored["test"] != trained["test"]  # the residual moves the metrics
    assert scored["best_epoch"] == trained["best_epoch"] and scored["fit_seconds"] == trained["fit_seconds"]


def test_a_missing_checkpoint_is_an_error_naming_the_fix_or_retrained_when_asked(tiny_data, tmp_path, capsys):
    assert main(args(TRAINED, tiny_data, tmp_path)) == 0
    checkpoint = tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.pth"
    checkpoint.unlink()
    with pytest.raises(SystemExit):
        main(args(variant(1.0), tiny_data, tmp_path))
    err = capsys.readouterr().err
    assert f"checkpoint {checkpoint} does not" in err and "--retrain-missing-checkpoints" in err
    assert not (tmp_path / "results" / "runs" / "tiny" / f"{scored_name('1.0')}-seed0.json").exists()
    assert main(args(variant(1.0), tiny_data, tmp_path, "--retrain-missing-checkpoints")) == 0
    assert (tmp_path / "results" / "exploration" / "runs" / "tiny" / f"{TRAINED_NAME}-seed0.json").exists()
    assert (
        checkpoint.exists()
        and record(tmp_path, scored_name("1.0"))["scored_from"]["epoch"] == record(tmp_path, TRAINED_NAME)["best_epoch"]
    )


def tamper_truncated(path):
    path.write_bytes(path.read_bytes()[:1000])


def tamper_epoch(path):
    state = torch.load(path, weights_only=True)
    state["epoch"] += 1
    torch.save(state, path)


def tamper_settings(path):
    state = torch.load(path, weights_only=True)
    state["config"]["uniformity_weight"] = 7.5
    torch.save(state, path)


def tamper_weights(path):
    state = torch.load(path, weights_only=True)
    state["state_dict"]["user_embedding.weight"] = torch.zeros(3, 8)
    torch.save(state, path)


@pytest.mark.parametrize(
    "tamper, message",
    [
        (tamper_truncated, "is damaged"),
        (tamper_epoch, "they come from different trainings"),
        (tamper_settings, r"trained with other settings than this variant trains with \(uniformity_weight: 7.5 there"),
        (tamper_weights, r"does not hold MGFormer's parameters \(other shapes: user_embedding.weight"),
    ],
)
def test_a_checkpoint_that_is_not_the_records_model_is_refused(tiny_data, tmp_path, capsys, tamper, message):
    assert main(args(TRAINED, tiny_data, tmp_path)) == 0
    tamper(tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.pth")
    with pytest.raises(SystemExit):
        main(args(variant(1.0), tiny_data, tmp_path))
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "results" / "runs" / "tiny" / f"{scored_name('1.0')}-seed0.json").exists()


def test_only_a_variant_with_scoring_options_and_the_entrys_tuned_file_is_scored(tmp_path):
    folder = tmp_path / "tuned"
    (folder / "tiny").mkdir(parents=True)
    (folder / "tiny" / "mgformer-attention-false.yaml").write_text("embedding_size: 16\n")
    settings = {
        "runs_dir": tmp_path / "runs",
        "data_path": tmp_path,
        "tuned_dir": folder,
        "extra": {"filter_residual_k": 8, "precision": "fp32"},
    }
    hybrid = Run("MGFormer", {"attention": False, "filter_residual": "gfcf"}, "tiny", 0, **settings)
    assert hybrid.trained.overrides == {"attention": False} and hybrid.trained.extra == {"precision": "fp32"}
    assert hybrid.trained.tuned_file == hybrid.tuned_file
    assert Run("MGFormer", {"attention": False}, "tiny", 0, **settings).trained is None
    assert (
        Run(
            "MGFormer", {"attention": False, "filter_residual": "gfcf"}, "tiny", 0, score_trained=False, **settings
        ).trained
        is None
    )
    # searched as itself: it trains with its own settings, so it is trained, not scored
    (folder / "tiny" / "mgformer-attention-false-filter-residual-gfcf.yaml").write_text("embedding_size: 32\n")
    assert hybrid.trained is None


def test_the_page_note_names_the_scored_rows_and_what_they_came_from():
    records = [{"variant": "M w=1", "scored_from": {"variant": "M"}}, {"variant": "M"}]
    assert "M w=1 from M" in scored_lines(records)[1] and scored_lines([{"variant": "M"}]) == []


def test_the_scored_checkpoint_is_the_best_epoch_not_the_last(tiny_data, tmp_path, monkeypatch):
    """Validation scores that peak at the middle epoch: the trained entry's checkpoint, and so the variant's
    scores, are that epoch's model."""
    from recbole.trainer import Trainer

    scores = iter([0.2, 0.9, 0.1])

    def valid_epoch(self, valid_data, show_progress=False):
        score = next(scores)
        return score, {"ndcg@20": score}

    monkeypatch.setattr(Trainer, "_valid_epoch", valid_epoch)
    assert main(args(variant(0.5), tiny_data, tmp_path, "--stopping_step=10")) == 0
    trained, scored = record(tmp_path, TRAINED_NAME), record(tmp_path, scored_name("0.5"))
    assert (trained["best_epoch"], trained["epochs"]) == (1, 3)
    assert load_checkpoint(tmp_path / "saved" / "tiny" / f"{TRAINED_NAME}-seed0.pth")["epoch"] == 1
    assert scored["scored_from"]["epoch"] == 1 and scored["best_epoch"] == 1
    assert scored["valid"]["ndcg@20"] != 0.9  # scored by the evaluator, with the residual, not copied


def test_with_a_search_budget_a_scored_variant_searches_the_entry_it_trains_as(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from recbole_mgformer.benchmark import cli, tuning

    searched = []
    monkeypatch.setattr(tuning, "ensure_search", lambda model, overrides, *_, **__: searched.append((model, overrides)))
    run = Run(
        "MGFormer",
        {"attention": False, "filter_residual": "gfcf"},
        "tiny",
        0,
        runs_dir=tmp_path / "runs",
        data_path=tmp_path,
    )
    options = SimpleNamespace(results=tmp_path, data_path=tmp_path, config_files="", tuned_dir=None)
    cli.search_before(run, None, options, {}, {})
    assert searched == [("MGFormer", {"attention": False})]


def test_a_trained_record_with_other_settings_stops_the_plan_unless_it_is_retrained(tiny_data, tmp_path):
    runs = tmp_path / "runs" / "tiny"
    runs.mkdir(parents=True)
    (runs / f"{TRAINED_NAME}-seed0.json").write_text(json.dumps({"config": {"uniformity_weight": 9.0}}))
    settings = {"runs_dir": tmp_path / "runs", "data_path": tiny_data, "checkpoint_dir": tmp_path / "saved"}
    overrides = {"attention": False, "embedding_size": 8, "filter_residual": "gfcf"}
    with pytest.raises(ValueError, match=r"seed0.json records .* trained with other settings \(uniformity_weight"):
        Run("MGFormer", overrides, "tiny", 0, **settings).check_config()
    Run("MGFormer", overrides, "tiny", 0, retrain_missing=True, **settings).check_config()  # moves aside, retrains


def test_a_weight_chosen_elsewhere_replaces_a_test_picked_record_of_the_same_name(tiny_data, tmp_path, capsys):
    """A weight carried from another split's validation set names its row as the test-picked weight did: the
    carried run retires that record to exploration/ and writes its own, where skipping it kept the test-picked
    row on the board; a rerun that states no choice, or the same one, keeps the record."""
    runs = tmp_path / "results" / "runs" / "tiny"
    full_name = "MGFormer attention=False embedding_size=8 filter_residual=gfcf filter_residual_weight=0.5"
    names = tmp_path / "results" / "names.yaml"
    names.parent.mkdir(parents=True)
    names.write_text(f'folders:\n  runs/tiny:\n    "{full_name}": tokens + GF-CF (test-picked)\n')
    picked = ["--choice-made-on", "test"]
    assert main(args(variant(0.5), tiny_data, tmp_path, *picked)) == 0
    assert record(tmp_path, scored_name("0.5"))["choice_made_on"] == "test"
    capsys.readouterr()
    for same in ([], picked):
        assert main(args(variant(0.5), tiny_data, tmp_path, *same)) == 0
        assert "moved" not in capsys.readouterr().out
        assert record(tmp_path, scored_name("0.5"))["choice_made_on"] == "test"
    carried = ["--choice-made-on", "validation", "--choice-dataset", "other"]
    with pytest.raises(SystemExit):  # run and recorded, then the page refuses the stale name
        main(args(variant(0.5), tiny_data, tmp_path, *carried))
    out, err = capsys.readouterr()
    assert "its name 'tokens + GF-CF (test-picked)' says 'test-picked'" in err
    names.write_text(  # the retired record keeps its test-picked name where it went
        f'folders:\n  runs/tiny:\n    "{full_name}": tokens + GF-CF (0.5)\n'
        f'  exploration/runs/tiny:\n    "{full_name}": tokens + GF-CF (test-picked)\n'
    )
    assert main(["--render-only", "--results", str(tmp_path / "results")]) == 0
    name = f"{scored_name('0.5')}-seed0.json"
    assert re.search(rf"moved \S*exploration/runs/tiny/{name}: its weight was chosen as .*'test'.*, this run's", out)
    now = record(tmp_path, scored_name("0.5"))
    assert (now["choice_made_on"], now["choice_dataset"]) == ("validation", "other")
    retired = json.loads((tmp_path / "results" / "exploration" / "runs" / "tiny" / name).read_text())
    assert retired["choice_made_on"] == "test" and retired["test"] == now["test"]  # the same weights and scores
    assert (runs / f"{scored_name('0.5')}-seed0.users.json.gz").exists()
    assert record(tmp_path, TRAINED_NAME)["commit"]  # the trained entry stays: only the hybrid's choice changed
