"""The benchmark's equal-budget search: when it searches, resumes or skips, the chosen file, the runs' records."""

import json
import shutil

import pytest
import yaml
from conftest import TINY_METRICS, benchmark_args, held_elsewhere, search_budget_args

import recbole_mgformer.tune.search as tune_search
from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.runs import Run
from recbole_mgformer.benchmark.tuning import (
    TuneBudget,
    ensure_search,
    experiment_path,
    search_info,
    search_space,
    tuned_file_for,
)
from recbole_mgformer.tune.space import TuneSetupError

TINY = [*TINY_METRICS, "--embedding_size=8"]


def fake_search(calls, score=0.25, params=None, interrupted=False):
    """A stand-in for tune_recommender that writes the record a finished (or interrupted) search leaves."""

    def search(model, dataset, space, **kwargs):
        calls.append({"model": model, "space": space, **kwargs})
        request = {
            "model": model,
            "dataset": dataset,
            "samples": kwargs["samples"],
            "search": kwargs["search"],
            "grace_period": kwargs["grace_period"],
            "search_seed": kwargs["search_seed"],
            "metric": "ndcg@20",
            "overrides": kwargs["config_dict"],
            "space": space,
            "defaults_first": bool(kwargs.get("defaults_first")),
        }
        best = {"score": score, "trial": "t_00001", "params": params or {"embedding_size": 32, "learning_rate": 0.001}}
        record = {"request": request, "best": best, "interrupted": interrupted, "provenance": {"commit": "abc1234"}}
        folder = kwargs["results_dir"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{kwargs['stem']}.json").write_text(json.dumps(record))
        (folder / f"{kwargs['stem']}.md").write_text("# page\n")
        return {"interrupted": interrupted}

    return search


def faked_search(monkeypatch, calls=None, **options):
    """The benchmark's searches answered by ``fake_search(calls, **options)``: returns ``calls``."""
    calls = [] if calls is None else calls
    monkeypatch.setattr(tune_search, "tune_recommender", fake_search(calls, **options))
    return calls


def search_settings(tmp_path, log=lambda line: None, **more):
    """``ensure_search``'s folders under tmp_path; the data path is never read, the search being faked."""
    return {"results": tmp_path / "results", "data_path": "dataset", "folder": tmp_path / "tuned", "log": log, **more}


def test_a_search_runs_once_and_a_rerun_skips_it_unless_its_budget_or_space_changed(tmp_path, monkeypatch):
    calls = faked_search(monkeypatch)
    budget = TuneBudget(trials=4, epochs=3, grace=1, storage=str(tmp_path / "tune"))
    settings = search_settings(tmp_path, extra={"device": "cpu", "epochs": 50})
    chosen = ensure_search("MGFormer", {"attention": False}, "ml-100k", budget, **settings)
    assert chosen == str(tmp_path / "tuned" / "ml-100k" / "mgformer-attention-false.yaml")
    (call,) = calls
    # the same budget for every model, the entry's override fixed, the epoch cap over the command's epochs
    assert call["samples"] == 4 and call["grace_period"] == 1 and call["search"] == "random"
    assert call["scheduler"] == "asha" and call["search_seed"] == 0 and call["resume"] is False
    assert call["config_dict"] == {"device": "cpu", "epochs": 3, "attention": False}
    assert call["name"] == "benchmark-ml-100k-mgformer-attention-false-n4-e3-g1-s0"
    text = open(chosen).read()
    assert text.startswith("# MGFormer attention=False on ml-100k: the best of the benchmark's equal-budget search")
    assert "random search of 4 trials, search seed 0, ASHA grace 1 of at most 3 epochs" in text
    assert "valid ndcg@20 0.2500" in text and "commit abc1234" in text
    assert yaml.safe_load(text) == {"embedding_size": 32, "learning_rate": 0.001}
    info = search_info(chosen, tmp_path / "results")
    assert info["budget"] == 4 and info["epochs"] == 3 and info["best_valid"] == 0.25
    assert info["search"].endswith("tuning/ml-100k/mgformer-attention-false.md")

    assert ensure_search("MGFormer", {"attention": False}, "ml-100k", budget, **settings) == chosen
    assert len(calls) == 1  # finished: not searched again
    with pytest.raises(
        TuneSetupError, match="holds a finished search of MGFormer attention=False on ml-100k with another budget"
    ):
        ensure_search("MGFormer", {"attention": False}, "ml-100k", TuneBudget(trials=8, epochs=3, grace=1), **settings)
    record_file = tmp_path / "results" / "tuning" / "ml-100k" / "mgformer-attention-false.json"
    record = json.loads(record_file.read_text())
    record["request"]["space"] = {"embedding_size": {"choice": [32, 64]}}  # properties/hyper changed since
    record_file.write_text(json.dumps(record))
    with pytest.raises(
        TuneSetupError,
        match="holds a finished search of MGFormer attention=False on ml-100k over "
        "another space .*move its page and record away",
    ):
        ensure_search("MGFormer", {"attention": False}, "ml-100k", budget, **settings)
    open(chosen, "a").write("n_heads: 2\n")  # edited by hand: no longer the search's choice
    assert search_info(chosen, tmp_path / "results") is None


def started_request(budget, space, **changes):
    """The request file an interrupted search of ``budget`` over ``space`` left (the fields the benchmark checks)."""
    return {
        "samples": budget.trials,
        "overrides": {"epochs": budget.epochs},
        "grace_period": budget.grace,
        "max_t": budget.epochs,
        "search_seed": budget.seed,
        "search": "random",
        "defaults_first": budget.defaults_first,
        "space": space,
        **changes,
    }


def records_folder(tmp_path, dataset, stem):
    return tmp_path / "results" / "tuning" / dataset / f"{stem}.records"


def test_an_interrupted_search_resumes_from_its_records_beside_the_results(tmp_path, monkeypatch):
    calls = faked_search(monkeypatch, interrupted=True)
    budget = TuneBudget(trials=2, epochs=2, grace=1, storage=str(tmp_path / "tune"))
    settings = search_settings(tmp_path, log=print)
    with pytest.raises(KeyboardInterrupt, match="rerun the same command to resume it"):
        ensure_search("BPR", {}, "ml-100k", budget, **settings)
    records = records_folder(tmp_path, "ml-100k", "BPR")
    # the search's records go beside its page, Ray's folders to the storage
    assert calls[0]["records_dir"] == records.resolve() and calls[0]["storage_dir"] == str(tmp_path / "tune")
    records.mkdir(parents=True)
    space = search_space("BPR", {}, "ml-100k")
    (records / tune_search.REQUEST_FILE).write_text(json.dumps(started_request(budget, space)))
    faked_search(monkeypatch, calls)
    shutil.rmtree(tmp_path / "tune")  # Ray's storage lost with the machine: the records are enough
    ensure_search("BPR", {}, "ml-100k", budget, **settings)
    assert [c["resume"] for c in calls] == [False, True]
    assert (tmp_path / "tuned" / "ml-100k" / "BPR.yaml").is_file()


def test_an_interrupted_search_that_kept_its_records_in_rays_folder_continues_beside_the_results(tmp_path, monkeypatch):
    """A search interrupted before its records went beside the results: they are copied there, and it resumes."""
    calls, lines = faked_search(monkeypatch), []
    budget = TuneBudget(trials=2, epochs=2, grace=1, storage=str(tmp_path / "tune"))
    experiment = experiment_path("BPR", {}, "ml-100k", budget)
    (experiment / "trials").mkdir(parents=True)
    request = started_request(budget, search_space("BPR", {}, "ml-100k"))
    (experiment / tune_search.REQUEST_FILE).write_text(json.dumps(request))
    (experiment / "trials" / "0001.json").write_text('{"index": 1}')  # checked when the search reads it
    ensure_search("BPR", {}, "ml-100k", budget, **search_settings(tmp_path, log=lines.append))
    records = records_folder(tmp_path, "ml-100k", "BPR").resolve()
    assert json.loads((records / tune_search.REQUEST_FILE).read_text()) == request
    assert (records / "trials" / "0001.json").read_text() == '{"index": 1}'
    assert f"copied the records of the search in {experiment} to {records}, where it continues" in lines
    assert [(c["resume"], c["records_dir"]) for c in calls] == [(True, records)]


@pytest.mark.parametrize(
    "changes, started",
    [
        ({"search_seed": 3}, "random search of 2 trials, search seed 3, ASHA grace 1 of at most 2 epochs"),
        ({"samples": 4}, "random search of 4 trials, search seed 0"),
        ({"overrides": {"epochs": 5}}, "ASHA grace 1 of at most 5 epochs"),
        ({"defaults_first": True}, "first trial: each model's own defaults"),
        ({"samples": "two"}, "random search of two trials"),
        ({}, "a request this command did not write"),
    ],
)
def test_records_of_another_search_in_the_records_folder_are_refused_naming_it(tmp_path, monkeypatch, changes, started):
    calls = faked_search(monkeypatch)
    budget = TuneBudget(trials=2, epochs=2, grace=1, storage=str(tmp_path / "tune"))
    records = records_folder(tmp_path, "ml-100k", "BPR")
    records.mkdir(parents=True)
    request = started_request(budget, search_space("BPR", {}, "ml-100k"), **changes) if changes else ["not", "it"]
    (records / tune_search.REQUEST_FILE).write_text(json.dumps(request))
    with pytest.raises(TuneSetupError) as raised:
        ensure_search("BPR", {}, "ml-100k", budget, **search_settings(tmp_path))
    message = str(raised.value)
    if changes:
        assert f"{records.resolve()} holds the records of an interrupted search of BPR on ml-100k with another " in (
            message
        )
        assert started in message and "this command's: 2 trials, search seed 0" in message
        assert "rerun with that budget to finish it, or move that folder away to search again" in message
    else:
        assert "recbole_mgformer_tune.json: the search's request must be a JSON object" in message
    assert calls == []


def test_an_interrupted_search_over_another_space_is_an_error_not_resumed(tmp_path, monkeypatch):
    calls = faked_search(monkeypatch)
    budget = TuneBudget(trials=2, epochs=2, grace=1, storage=str(tmp_path / "tune"))
    records = records_folder(tmp_path, "amazon-beauty", "MGFormer")
    records.mkdir(parents=True)
    started = {**search_space("MGFormer", {}, "amazon-beauty"), "uniformity_weight": {"loguniform": [0.01, 5.0]}}
    (records / tune_search.REQUEST_FILE).write_text(json.dumps(started_request(budget, started)))
    settings = search_settings(tmp_path, log=print)
    with pytest.raises(
        TuneSetupError,
        match="interrupted search of MGFormer on amazon-beauty at .*MGFormer.records started over another space "
        ".*delete that folder",
    ):
        ensure_search("MGFormer", {}, "amazon-beauty", budget, **settings)
    assert calls == []
    shipped = search_space("MGFormer", {}, "amazon-beauty")
    (records / tune_search.REQUEST_FILE).write_text(json.dumps(started_request(budget, shipped)))
    ensure_search("MGFormer", {}, "amazon-beauty", budget, **settings)
    assert [c["resume"] for c in calls] == [True]


def test_an_entry_searches_the_keys_it_does_not_fix():
    space = search_space("MGFormer", {"embedding_size": 128})
    assert "embedding_size" not in space and "uniformity_weight" in space
    with pytest.raises(TuneSetupError, match="fixes every key"):
        search_space("BPR", {"embedding_size": 8, "learning_rate": 0.01, "weight_decay": 0.0})


def test_a_variant_uses_its_own_tuned_file_else_its_models(tmp_path):
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "MGFormer.yaml").write_text("embedding_size: 16\n")
    assert tuned_file_for("MGFormer", {"degree_mask": "none"}, "tiny", tmp_path).endswith("tiny/MGFormer.yaml")
    (tmp_path / "tiny" / "mgformer-attention-false.yaml").write_text("embedding_size: 8\n")
    assert tuned_file_for("MGFormer", {"attention": False}, "tiny", tmp_path).endswith("mgformer-attention-false.yaml")
    assert tuned_file_for("BPR", {}, "tiny", tmp_path) is None


def test_a_variant_with_scoring_options_takes_the_tuned_file_of_the_entry_it_trains_as(tmp_path):
    """MGFormer's filter residual changes only the scores after training: the run trains as the entry without it."""
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "MGFormer.yaml").write_text("embedding_size: 16\n")
    (tmp_path / "tiny" / "mgformer-attention-false.yaml").write_text("embedding_size: 8\n")
    hybrid = {"attention": False, "filter_residual": "gfcf", "filter_residual_weight": 0.5}
    assert tuned_file_for("MGFormer", hybrid, "tiny", tmp_path).endswith("tiny/mgformer-attention-false.yaml")
    assert tuned_file_for("MGFormer", {"filter_residual": "gfcf"}, "tiny", tmp_path).endswith("tiny/MGFormer.yaml")
    assert tuned_file_for("MGFormer", {"degree_mask": "none", "filter_residual": "gfcf"}, "tiny", tmp_path).endswith(
        "tiny/MGFormer.yaml"
    )  # no file of its own entry: the model's
    own = tmp_path / "tiny" / "mgformer-attention-false-filter-residual-gfcf-filter-residual-weight-0-5.yaml"
    own.write_text("embedding_size: 32\n")  # a search of the variant itself wins
    assert tuned_file_for("MGFormer", hybrid, "tiny", tmp_path) == str(own)


def test_an_older_record_moves_to_exploration_when_a_search_chose_new_settings(
    tiny_data, tmp_path, monkeypatch, capsys
):
    results, tuned = tmp_path / "results", tmp_path / "tuned"
    args = benchmark_args("BPR", tiny_data, tmp_path, "--tuned-dir", str(tuned), "--epochs=1", *TINY)
    assert main(args) == 0  # an untuned run
    old = json.loads((results / "runs" / "tiny" / "bpr-seed0.json").read_text())
    calls = faked_search(monkeypatch, params={"learning_rate": 0.01, "embedding_size": 8})
    assert main(args + ["--tune-budget", "2", "--tune-epochs", "2", "--tune-storage", str(tmp_path / "tune")]) == 0
    out = capsys.readouterr().out
    assert "search of BPR on tiny: starting (2 trials, at most 2 epochs each" in out
    moved = results / "exploration" / "runs" / "tiny" / "bpr-seed0.json"
    assert f"moved {moved}: trained before" in out
    assert json.loads(moved.read_text()) == old and (moved.with_name("bpr-seed0.users.json.gz")).is_file()
    record = json.loads((results / "runs" / "tiny" / "bpr-seed0.json").read_text())
    assert record["config"]["learning_rate"] == 0.01 and record["tuning"]["budget"] == 2
    assert record["tuned_config"].endswith("tuned/tiny/BPR.yaml")
    assert list((tmp_path / "saved" / "tiny").glob("bpr-seed0-tuned-*.pth"))  # never the untuned checkpoint
    page = (results / "tiny" / "leaderboard.md").read_text()
    assert "### Tuned with the same budget: random search of 2 trials" in page
    assert main(args + ["--tune-budget", "2", "--tune-epochs", "2"]) == 0
    out = capsys.readouterr().out
    assert "not searched again" in out and "record exists, skipped" in out and len(calls) == 1
    run = Run("BPR", {}, "tiny", 0, runs_dir=results / "runs", data_path=tiny_data, tuned_dir=tuned)
    assert run.tuning == record["tuning"]


def test_while_another_process_runs_a_search_its_entrys_runs_are_skipped_not_trained_untuned(
    tiny_data, tmp_path, monkeypatch, capsys
):
    calls = faked_search(monkeypatch, params={"learning_rate": 0.01})
    args = benchmark_args(
        "BPR,LightGCN", tiny_data, tmp_path, *search_budget_args(tmp_path), "--epochs=1", *TINY, seeds="0,1"
    )
    budget = TuneBudget(trials=2, epochs=2, grace=5, storage=str(tmp_path / "tune"))
    experiment = experiment_path("BPR", {}, "tiny", budget)
    assert experiment.name == "benchmark-tiny-BPR-n2-e2-g5-s0"
    with held_elsewhere(experiment.with_name(f"{experiment.name}.lock")) as holder:
        assert main(args) == 0
    out = capsys.readouterr().out
    for seed in (0, 1):
        assert f"BPR on tiny, seed {seed}: skipped, another process (pid {holder.pid}) holds" in out
    runs = tmp_path / "results" / "runs" / "tiny"
    assert not list(runs.glob("bpr-*.json")) and (runs / "lightgcn-seed1.json").is_file()
    assert [call["model"] for call in calls] == ["LightGCN"]  # BPR's search was left to its holder


@pytest.mark.slow
def test_a_real_two_trial_search_then_its_seed_runs(tiny_data, tmp_path, capsys):
    results, tuned = tmp_path / "results", tmp_path / "tuned"
    search = search_budget_args(tmp_path, "--tune-grace", "1", "--tune-cpus", "1")
    args = benchmark_args("BPR", tiny_data, tmp_path, *search, "--epochs=2", *TINY, seeds="0,1")
    assert main(args) == 0
    search = json.loads((results / "tuning" / "tiny" / "BPR.json").read_text())
    assert len(search["rows"]) == 2 and search["request"]["max_t"] == 2 and search["request"]["samples"] == 2
    chosen = yaml.safe_load((tuned / "tiny" / "BPR.yaml").read_text())
    # the command fixes embedding_size (--embedding_size=8), so the search leaves it out
    assert chosen == search["best"]["params"] and set(chosen) == {"learning_rate", "weight_decay"}
    for seed in (0, 1):
        record = json.loads((results / "runs" / "tiny" / f"bpr-seed{seed}.json").read_text())
        assert record["tuning"]["search"].endswith("tuning/tiny/BPR.md") and record["epochs"] == 2
        assert record["config"]["learning_rate"] == chosen["learning_rate"] and record["config"]["embedding_size"] == 8
    page = (results / "tiny" / "leaderboard.md").read_text()
    assert "### Tuned with the same budget: random search of 2 trials, search seed 0, ASHA grace 1 of at most 2" in page
    assert "| BPR | 2 |" in page
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "not searched again" in out and out.count("record exists, skipped") == 2


def test_a_search_takes_its_gpus_and_cluster_from_the_budget_and_keeps_the_same_name(tmp_path, monkeypatch):
    calls = faked_search(monkeypatch)
    settings = search_settings(tmp_path)
    budget = TuneBudget(trials=4, epochs=3, grace=1, gpus=0.25, address="auto", storage=str(tmp_path / "tune"))
    ensure_search("BPR", {}, "ml-100k", budget, **settings)
    (call,) = calls
    assert call["gpus_per_trial"] == 0.25 and call["address"] == "auto"
    # where it runs is not part of the budget: the same search as on CPUs, and its record satisfies a CPU budget
    assert call["name"] == "benchmark-ml-100k-BPR-n4-e3-g1-s0"
    ensure_search("BPR", {}, "ml-100k", TuneBudget(trials=4, epochs=3, grace=1), **settings)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--tune-gpus", "-1"], "--tune-gpus -1.0: a trial's share of a GPU is 0"),
        (["--tune-address", "auto", "--tune-cpus", "2"], "with --tune-address the cluster's own CPUs count"),
    ],
)
def test_impossible_tuning_resources_are_an_error_before_any_run(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        main(["--models", "BPR", "--datasets", "ml-100k", "--results", str(tmp_path), "--tune-budget", "2", *flags])
    assert message in capsys.readouterr().err


def test_a_budget_matches_its_record_where_the_search_capped_the_grace_at_its_evaluations():
    request = {
        "samples": 2,
        "overrides": {"epochs": 2},
        "grace_period": 2,
        "max_t": 2,
        "search_seed": 0,
        "search": "random",
    }
    assert TuneBudget(trials=2, epochs=2, grace=5).matches(request)
    assert not TuneBudget(trials=3, epochs=2, grace=5).matches(request)
    assert not TuneBudget(trials=2, epochs=4, grace=5).matches(request)


def test_a_closed_form_models_search_states_the_budget_asked_so_its_rows_share_the_others_section():
    from recbole_mgformer.benchmark.tuning import budget_text

    ease = {
        "samples": 16,
        "overrides": {"epochs": 30},
        "grace_period": 1,
        "max_t": 1,
        "grace_asked": 5,
        "search_seed": 0,
        "search": "random",
    }
    mgformer = {**ease, "grace_period": 5, "max_t": 30}
    assert (
        budget_text(ease)
        == budget_text(mgformer)
        == ("random search of 16 trials, search seed 0, ASHA grace 5 of at most 30 epochs")
    )
    assert TuneBudget(trials=16, epochs=30, grace=5).matches(ease)
    older = {key: value for key, value in ease.items() if key != "grace_asked"}  # records before grace_asked
    assert "ASHA grace 1 of at most 30 epochs" in budget_text(older)


def test_a_defaults_first_budget_is_its_own_search_and_its_record_and_rows_say_so(tmp_path, monkeypatch):
    calls = faked_search(monkeypatch)
    settings = search_settings(tmp_path)
    budget = TuneBudget(trials=4, epochs=3, grace=1, storage=str(tmp_path / "tune"), defaults_first=True)
    chosen = ensure_search("BPR", {}, "ml-100k", budget, **settings)
    (call,) = calls
    # the same N trials, the first of them the defaults: one flag to the search, a Ray folder of its own
    assert call["defaults_first"] is True and call["samples"] == 4
    assert call["name"] == "benchmark-ml-100k-BPR-n4-e3-g1-s0-d"
    text = (
        "random search of 4 trials, search seed 0, ASHA grace 1 of at most 3 epochs, first trial: each model's "
        "own defaults"
    )
    assert text in open(chosen).read()
    info = search_info(chosen, tmp_path / "results")
    assert info["defaults_first"] is True and info["text"] == text
    # a search that drew every trial is another budget, on record and in the rows' sections
    with pytest.raises(TuneSetupError, match="with another budget .*first trial: each model's own defaults"):
        ensure_search("BPR", {}, "ml-100k", TuneBudget(trials=4, epochs=3, grace=1), **settings)
    ensure_search(
        "LightGCN", {}, "ml-100k", TuneBudget(trials=4, epochs=3, grace=1, storage=str(tmp_path / "tune")), **settings
    )
    assert calls[-1]["defaults_first"] is False and calls[-1]["name"] == "benchmark-ml-100k-LightGCN-n4-e3-g1-s0"
    drawn = search_info(tmp_path / "tuned" / "ml-100k" / "LightGCN.yaml", tmp_path / "results")
    assert "defaults_first" not in drawn and "defaults" not in drawn["text"]  # as a search before the option


def test_defaults_first_without_a_budget_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--models", "BPR", "--datasets", "ml-100k", "--results", str(tmp_path), "--tune-defaults-first"])
    assert (
        "--tune-defaults-first makes the first trial of each model's search its defaults; it needs a search: "
        "add --tune-budget N" in capsys.readouterr().err
    )


def test_a_page_says_plainly_when_its_rows_were_tuned_with_and_without_the_defaults_first():
    from recbole_mgformer.benchmark.general import defaults_first_note

    first = {"text": "budget, first trial: each model's own defaults", "defaults_first": True}
    rows = [
        {"variant": "EAGPS", "tuning": first},
        {"variant": "SASRec", "tuning": first},
        {"variant": "GRU4Rec", "tuning": {"text": "budget"}},
        {"variant": "Pop", "tuning": None},
    ]
    note = defaults_first_note(rows)
    assert note.startswith(
        "Not one protocol: the searches of EAGPS, SASRec ran each model's own defaults as their "
        "first trial (--tune-defaults-first), those of GRU4Rec drew every trial"
    )
    assert "not at equal budget" in note
    assert defaults_first_note(rows[:2]) is None and defaults_first_note(rows[2:]) is None


@pytest.mark.slow
def test_a_search_continues_on_a_new_machine_from_its_records_in_the_results(tiny_data, tmp_path, capsys):
    """A search of 4 trials runs whole on one machine. Another machine gets only the results folder, as committed
    when the search stopped after trials 0 and 2 (its interrupted page and record, its records folder with those
    two trials), and an empty saved/: the same command keeps the two, runs 1 and 3 with the draws of the whole
    search, and ends with its scores and best."""
    from recbole_mgformer.tune.records import REQUEST_FILE

    def command(machine):
        budget = ["--tune-budget", "4", "--tune-epochs", "1", "--tune-grace", "1", "--tune-cpus", "1"]
        return benchmark_args("BPR", tiny_data, machine, *search_budget_args(machine, *budget), "--epochs=1", *TINY)

    old, new = tmp_path / "old-machine", tmp_path / "new-machine"
    assert main(command(old)) == 0
    folder = old / "results" / "tuning" / "tiny"
    records = folder / "BPR.records"
    whole = json.loads((folder / "BPR.json").read_text())
    assert sorted(p.name for p in records.iterdir()) == [REQUEST_FILE, "trials"]  # none of Ray's files
    assert sorted(p.name for p in (records / "trials").iterdir()) == [f"000{i}.json" for i in range(4)]
    ray_folder = old / "tune" / "benchmark-tiny-BPR-n4-e1-g1-s0"
    assert [p.name for p in ray_folder.iterdir()] == ["ray-1"]  # Ray's scratch, the records elsewhere

    copied = new / "results" / "tuning" / "tiny"
    shutil.copytree(records, copied / "BPR.records")
    for index in (1, 3):  # running, or not started, when the machine was lost
        (copied / "BPR.records" / "trials" / f"000{index}.json").unlink()
    stopped = {**whole, "interrupted": True, "rows": [r for r in whole["rows"] if r["index"] in (0, 2)]}
    (copied / "BPR.json").write_text(json.dumps(stopped))  # its paths the old machine's
    (copied / "BPR.md").write_text((folder / "BPR.md").read_text())
    capsys.readouterr()
    assert main(command(new)) == 0
    assert "search of BPR on tiny: resuming (4 trials" in capsys.readouterr().out
    assert not (new / "tune" / "benchmark-tiny-BPR-n4-e1-g1-s0" / REQUEST_FILE).exists()

    resumed = json.loads((copied / "BPR.json").read_text())
    assert not resumed["interrupted"] and len(resumed["rows"]) == 4
    trial = {
        place: {json.loads(p.read_text())["index"]: json.loads(p.read_text()) for p in (base / "trials").iterdir()}
        for place, base in (("old", records), ("new", copied / "BPR.records"))
    }
    for index in (0, 2):  # kept as they were, not trained again
        assert trial["new"][index] == trial["old"][index]
    for index in (1, 3):  # trained again: the same draw, the same training, the same scores
        assert trial["new"][index]["trial"] != trial["old"][index]["trial"]
        assert trial["new"][index]["params"] == trial["old"][index]["params"]
        assert trial["new"][index]["score"] == pytest.approx(trial["old"][index]["score"])
    assert resumed["best"]["params"] == whole["best"]["params"]
    assert resumed["best"]["score"] == pytest.approx(whole["best"]["score"])
    chosen = {
        place: yaml.safe_load((base / "tuned" / "tiny" / "BPR.yaml").read_text())
        for place, base in (("old", old), ("new", new))
    }
    assert chosen["new"] == chosen["old"] == whole["best"]["params"]


def test_a_search_of_an_entry_with_many_settings_has_a_folder_and_claim_the_system_can_create(tmp_path):
    budget = TuneBudget(trials=2, epochs=2, grace=1, storage=str(tmp_path / "tune"))
    overrides = {f"setting_number_{i}": f"value_{i}" for i in range(20)}
    dataset = "a-dataset-with-a-long-name-" * 3
    experiment = experiment_path("MGFormer", overrides, dataset, budget)
    (experiment / "trials").mkdir(parents=True)
    experiment.with_name(f"{experiment.name}.lock").touch()
    other = experiment_path("MGFormer", {**overrides, "setting_number_19": "value_x"}, dataset, budget)
    assert other != experiment
