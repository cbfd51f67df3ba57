"""Tiny searches end to end (``recbole_mgformer.tune.search``): the best config, resume, failures, hyperopt."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import ray
import yaml
from conftest import tune_args

from recbole_mgformer.tune import TuneSetupError, main, make_request, parse_space, ray_space, tune_recommender, tuner
from recbole_mgformer.tune.search import check_address
from recbole_mgformer.tune.tuner import check_resources as _check_resources

ROOT = Path(__file__).resolve().parents[2]

TINY_YAML = (
    "eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
    "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\n"
    "train_batch_size: 64\nepochs: 2\nembedding_size: 8\n"
)


@pytest.fixture(scope="module")
def local_ray():
    """One small local Ray for the module's searches: 2 CPUs, no dashboard, a short temporary folder."""
    import ray

    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, _temp_dir=temp_dir, logging_level="WARNING")
    yield
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def tiny_yaml(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML)
    return path


def write_space(folder, text, name="space.yaml"):
    path = folder / name
    path.write_text(text)
    return path


def run_py(cwd, *args):
    cwd.mkdir()
    completed = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True, check=True, cwd=cwd
    )
    values = {}
    for split in ("valid", "test"):
        line = next(row for row in completed.stdout.splitlines() if row.strip().startswith(split))
        values[split] = dict(re.findall(r"(\S+@\d+) ([0-9.]+)", line))
    return values


def test_search_writes_a_best_config_that_run_py_reproduces(local_ray, tiny_data, tiny_yaml, tmp_path, capsys):
    space = write_space(tmp_path, "learning_rate: {grid: [0.001, 0.01]}\nuniformity_weight: {choice: [0.5]}\n")
    settings = ["--space", str(space), "--search", "grid", f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    more = ["--verbose", "0", "--stopping_step=5", "--storage", str(tmp_path / "saved" / "tune")]
    arguments = ["--model", "MGFormer", "--dataset", "tiny", *settings, *more]  # no --results: ./tuning
    assert main(arguments) == 0
    assert "best valid ndcg@20" in capsys.readouterr().out
    results = tmp_path / "tuning"  # the current folder's, never the package's results/
    table = (results / "MGFormer-tiny.md").read_text()
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 2 and all("| completed |" in row for row in rows)
    scores = [float(row.split("|")[4]) for row in rows]
    assert scores == sorted(scores, reverse=True)

    # the best YAML holds the searched values only: not the search's 2-epoch cap, its files or fixed settings
    best_yaml = results / "MGFormer-tiny.yaml"
    text = best_yaml.read_text()
    best = yaml.safe_load(text)
    assert set(best) == {"learning_rate", "uniformity_weight"}
    assert best["learning_rate"] in (0.001, 0.01) and best["uniformity_weight"] == 0.5
    assert "# Searched settings only; the search trained at most 2 epochs a trial" in text
    assert "set epochs yourself" in text and "stopping_step=5" in text
    files = f"--config_files={tiny_yaml} {best_yaml}"
    fixed = [f"--data_path={tiny_data}", "--stopping_step=5"]  # the search's own settings the YAML names
    assert f"settings stopping_step=5, data_path={tiny_data}: add those you need" in text
    rerun = run_py(tmp_path / "rerun", "--model=MGFormer", "--dataset=tiny", files, *fixed)
    assert f"{float(rerun['valid']['ndcg@20']):.4f}" == f"{scores[0]:.4f}"
    # the retrained best configuration's test metrics on the page are those of the search's own settings
    assert f"**test ndcg@20 {float(rerun['test']['ndcg@20']):.4f}**" in table
    assert f"**test recall@20 {float(rerun['test']['recall@20']):.4f}**" in table
    record = yaml.safe_load((results / "MGFormer-tiny.json").read_text())
    assert record["best"]["score"] == pytest.approx(scores[0])
    assert record["provenance"]["versions"]["ray"] == ray.__version__

    # the search is kept: starting it again is refused, --resume reads its records without training again
    assert main(arguments) == 2
    assert "already holds a search; --resume continues it" in capsys.readouterr().err
    (results / "MGFormer-tiny.md").unlink()
    assert main(arguments + ["--resume", "--no-retrain"]) == 0
    assert (
        "resuming MGFormer-tiny: 2 of 2 trials finished (kept, not trained again); 0 to run" in capsys.readouterr().out
    )
    resumed = (results / "MGFormer-tiny.md").read_text()
    assert [line for line in resumed.splitlines() if re.match(r"\| \d+ \|", line)] == rows
    assert [p.name for p in (tmp_path / "saved" / "tune" / "MGFormer-tiny").glob("ray-*")] == ["ray-1"]
    # RecBole's logs and checkpoints stayed in Ray's folders, none in the current directory
    assert {p.name for p in tmp_path.iterdir()} == {"data", "tiny.yaml", "space.yaml", "tuning", "saved", "rerun"}


def trial_configs(summary):
    return sorted(json.dumps(row["params"], sort_keys=True) for row in summary["rows"])


@pytest.mark.slow
def test_a_search_resumed_after_losing_its_machine_runs_the_trials_an_uninterrupted_one_runs(
    local_ray, tiny_data, tiny_yaml, tmp_path
):
    """A search stopped after 2 of its 5 trials; only its folder's records reach a new machine, with pickles
    that would run code if loaded: the resumed search keeps the 2, runs the 3 others, and ends with the trials
    of the same search run without a stop."""
    from conftest import write_payload

    space = {"learning_rate": {"loguniform": [1.0e-4, 1.0e-1]}, "embedding_size": {"choice": [8, 16]}}
    whole = search_in_process(space, tiny_data, tiny_yaml, tmp_path, samples=5, config_dict={"epochs": 1})
    assert len(whole["rows"]) == 5 and not whole["interrupted"]

    old = Path(whole["request"]["experiment"])
    new = tmp_path / "new-machine" / "tune" / "MGFormer-tiny"
    (new / "trials").mkdir(parents=True)
    shutil.copy(old / "recbole_mgformer_tune.json", new)
    for index in (0, 3):  # finished; 1, 2 and 4 were running or not started when the machine went
        shutil.copy(old / "trials" / f"{index:04d}.json", new / "trials")
    marker = tmp_path / "pwned"
    for pickled in ("tuner.pkl", "ray-1/tuner.pkl", "ray-1/searcher-state-2026.pkl"):
        write_payload(new / pickled, marker)
    lines = []
    resumed = tune_recommender(
        "MGFormer",
        "tiny",
        config_files=[str(tiny_yaml)],
        data_path=str(tiny_data),
        results_dir=tmp_path / "new-machine" / "tuning",
        storage_dir=new.parent,
        retrain_best=False,
        verbose=0,
        resume=True,
        log=lines.append,
    )
    assert not marker.exists()
    assert lines == [
        "resuming MGFormer-tiny: 2 of 5 trials finished (kept, not trained again); 3 to run, those that were "
        f"running when the search stopped among them, each from its last epoch's checkpoint (0 in {new / 'unfinished'}"
        "), else from its first epoch"
    ]
    assert trial_configs(resumed) == trial_configs(whole) and not resumed["interrupted"]
    kept = {row["index"]: row for row in whole["rows"] if row["index"] in (0, 3)}
    assert {row["index"]: row for row in resumed["rows"] if row["index"] in (0, 3)} == kept
    trained = {json.loads(p.read_text())["trial"] for p in (new / "trials").glob("*.json")}
    assert len(trained) == 5 and {kept[0]["trial"], kept[3]["trial"]} < trained  # the 2 kept, 3 trained here
    # the same trial of the same draw trains the same way: its score equals the uninterrupted search's
    scores = {row["index"]: row["score"] for row in whole["rows"]}
    assert {row["index"]: row["score"] for row in resumed["rows"]} == pytest.approx(scores)


@pytest.mark.slow
def test_a_killed_search_resumes_with_the_draws_it_would_have_run(local_ray, tiny_data, tiny_yaml, tmp_path):
    """The search and its Ray killed (SIGKILL) once it has finished a trial: --resume finishes it, its trials the
    seed's draws, none run twice."""
    from recbole_mgformer.tune.draws import drawn_trials

    space = write_space(tmp_path, "learning_rate: {loguniform: [0.0001, 0.1]}\n")
    storage = tmp_path / "saved"
    settings = ["--space", str(space), "--samples", "6", f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    arguments = tune_args("BPR", tmp_path, *settings, "--verbose", "0", "--no-retrain", "--epochs=2", storage="saved")
    search = subprocess.Popen(
        [sys.executable, "-m", "recbole_mgformer.tune", *arguments, "--num-cpus", "1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    records = storage / "BPR-tiny" / "trials"
    deadline = time.monotonic() + 300
    while not list(records.glob("*.json")) and search.poll() is None:
        assert time.monotonic() < deadline, "no trial finished in 5 minutes"
        time.sleep(0.2)
    os.killpg(search.pid, signal.SIGKILL)  # the command with its Ray, as a lost machine: nothing more is written
    search.wait()
    finished = {p.name for p in records.glob("*.json")}
    assert 1 <= len(finished) < 6

    assert main(arguments + ["--resume"]) == 0
    record = json.loads((tmp_path / "results" / "BPR-tiny.json").read_text())
    assert sorted(json.dumps(row["params"]) for row in record["rows"]) == sorted(
        json.dumps(params) for params in drawn_trials(record["request"])
    )
    assert len({p.name for p in records.glob("*.json")}) == 6 and not record["interrupted"]


def search_in_process(space, tiny_data, tiny_yaml, tmp_path, **options):
    """``tune_recommender`` of MGFormer on the tiny data, report under tmp_path/results, no retraining of the best."""
    return tune_recommender(
        "MGFormer",
        "tiny",
        space,
        config_files=[str(tiny_yaml)],
        data_path=str(tiny_data),
        results_dir=tmp_path / "results",
        storage_dir=tmp_path / "tune",
        retrain_best=False,
        verbose=0,
        **options,
    )


def test_trials_cannot_ask_for_more_than_the_cluster_has(local_ray):
    too_many_gpus = (
        r"--gpus-per-trial 0.25 asks for more than the Ray cluster has \(0 GPUs\); "
        r"lower --gpus-per-trial \(the benchmark's --tune-gpus\) or set it to 0"
    )
    with pytest.raises(TuneSetupError, match=too_many_gpus):
        _check_resources(1, 0.25)
    with pytest.raises(TuneSetupError, match=r"--cpus-per-trial 3 asks for more"):
        _check_resources(3, 0)


@pytest.mark.slow  # a whole Ray search of several trials
def test_a_failing_trial_is_recorded_and_the_others_complete(local_ray, tiny_data, tiny_yaml, tmp_path):
    """One trial the model rejects at construction, one whose loss turns NaN, and one that trains."""
    space = {"feature_map": {"grid": ["simrf", "not_a_map"]}, "learning_rate": {"grid": [0.001, 1.0e30]}}
    summary = search_in_process(space, tiny_data, tiny_yaml, tmp_path, samples=1)
    rows = summary["rows"]
    assert [r["status"] for r in rows] == ["completed", "failed", "failed", "failed"]
    assert rows[0]["params"] == {"feature_map": "simrf", "learning_rate": 0.001} and summary["best"] == rows[0]
    errors = {(r["params"]["feature_map"], r["params"]["learning_rate"]): r["error"] for r in rows[1:]}
    assert errors[("simrf", 1.0e30)] == "ValueError: Training loss is nan"
    for learning_rate in (0.001, 1.0e30):
        assert errors[("not_a_map", learning_rate)].startswith("ValueError: MGFormer: unknown feature_map 'not_a_map'")
    table = Path(summary["markdown"]).read_text()
    assert "Trials: 1 completed, 3 failed." in table
    assert "| failed: ValueError: MGFormer: unknown feature_map 'not_a_map'" in table
    assert "| failed: ValueError: Training loss is nan |" in table
    assert summary["retrained"] is None and (tmp_path / "results" / "MGFormer-tiny.yaml").is_file()


def test_samples_below_one_is_an_error_and_leaves_nothing_behind(tiny_data, tiny_yaml, tmp_path, capsys):
    arguments = tune_args("BPR", tmp_path, f"--data_path={tiny_data}", f"--config_files={tiny_yaml}")
    for samples in ("0", "-2"):
        assert main(arguments + ["--samples", samples]) == 2
        assert f"--samples {samples}: a search draws at least 1 sample" in capsys.readouterr().err
    assert not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()


def test_a_bad_address_or_data_path_is_an_error_before_any_trial(tiny_data, tiny_yaml, tmp_path, capsys):
    # Both ended in tracebacks: Ray's "Port is not specified", and each trial's missing-dataset error inside Ray.
    (tmp_path / "a-file").write_text("")
    arguments = tune_args("BPR", tmp_path, f"--config_files={tiny_yaml}")
    assert main(arguments + [f"--data_path={tiny_data}", "--address", str(tmp_path / "a-file")]) == 2
    assert "give auto (a Ray started with `ray start` on this machine), host:port" in capsys.readouterr().err
    assert main(arguments + [f"--data_path={tmp_path / 'a-file' / 'sub'}"]) == 2
    err = capsys.readouterr().err
    assert "error: " in err and "does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()
    for address in ("auto", "local", "10.0.0.5:6379", "ray://head:10001", None):
        check_address(address)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--cpus-per-trial", "0", r"--cpus-per-trial 0.0: give a number above 0"),
        ("--cpus-per-trial", "nan", r"--cpus-per-trial nan: give a number above 0"),
        ("--gpus-per-trial", "-1", r"--gpus-per-trial -1.0: give a number of 0 or more"),
        ("--num-cpus", "0", r"--num-cpus 0: give a whole number of 1 or more"),
        ("--num-gpus", "-2", r"--num-gpus -2: give a whole number of 0 or more"),
    ],
)
def test_trial_resources_ray_cannot_take_are_errors_before_any_trial(
    tiny_data, tiny_yaml, tmp_path, capsys, option, value, message
):
    # Ray's own error for --cpus-per-trial 0 was a traceback: "Cannot initialize a ResourceRequest with an empty head"
    arguments = tune_args("BPR", tmp_path, f"--config_files={tiny_yaml}", f"--data_path={tiny_data}")
    assert main([*arguments, option, value]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("option", ["--storage", "--records", "--temp-dir"])
def test_a_folder_option_that_names_a_file_is_an_error_before_any_trial(tiny_data, tiny_yaml, tmp_path, capsys, option):
    # each was "[Errno 17] File exists", or for --records "already holds a search"
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    arguments = tune_args("BPR", tmp_path, f"--config_files={tiny_yaml}", f"--data_path={tiny_data}")
    assert main([*arguments, option, str(a_file)]) == 2
    err = capsys.readouterr().err
    assert f"error: {option} {a_file}: {a_file} is a file, not a folder; name a folder" in err
    assert "Traceback" not in err and not (tmp_path / "results").exists()


def test_a_name_too_long_for_a_file_name_is_an_error(tiny_data):
    # it was "[Errno 36] File name too long" once the search's folder was made
    with pytest.raises(TuneSetupError, match=r"--name x{40}\.\.\.: 300 bytes, above the 200 .* give a shorter name"):
        make_request("BPR", "tiny", {"learning_rate": {"choice": [0.01]}}, data_path=str(tiny_data), name="x" * 300)


def test_an_address_where_no_ray_answers_is_named(monkeypatch):
    import ray

    from recbole_mgformer.tune.tuner import init_ray

    def unreachable(**_):
        raise ConnectionError("Could not read 'session_name' from GCS. Did GCS start successfully?")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", unreachable)
    monkeypatch.setattr(tuner, "check_reachable", lambda address: None)  # a port that answers, and no Ray behind it
    with pytest.raises(TuneSetupError, match=r"--address 10.0.0.5:6379: no Ray cluster answered there .*ray start"):
        init_ray("10.0.0.5:6379", None, None, "unused")


def test_an_address_where_nothing_listens_is_named_at_once(monkeypatch):
    """Ray retried such a head for minutes (127.0.0.1:6379 with no Ray there: a warning every few seconds)."""
    import socket

    import ray

    from recbole_mgformer.tune.tuner import init_ray

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        tuner.check_reachable(f"127.0.0.1:{port}")  # something answers: left to Ray
        tuner.check_reachable(f"ray://127.0.0.1:{port}")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **_: pytest.fail("Ray was started"))
    with pytest.raises(TuneSetupError, match=rf"--address 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port} "):
        init_ray(f"127.0.0.1:{port}", None, None, "unused")


@pytest.mark.parametrize(
    "options, message",
    [
        (["--search", "grid", "--samples", "5"], "--samples sets the draws of a random or hyperopt search"),
        (["--scheduler", "fifo", "--grace-period", "3"], "--grace-period sets when ASHA may stop a trial"),
        (["--search-seed", "-5"], "--search-seed -5: give a whole number of 0 or more"),
    ],
)
def test_options_a_search_would_drop_or_fail_on_are_named_before_it_starts(
    tiny_data, tiny_yaml, tmp_path, capsys, options, message
):
    arguments = tune_args("BPR", tmp_path, f"--data_path={tiny_data}", f"--config_files={tiny_yaml}", *options)
    try:
        assert main(arguments) == 2
    except SystemExit as stop:  # argparse's usage error
        assert stop.code == 2
    assert message in capsys.readouterr().err and not (tmp_path / "tune").exists()


def test_a_name_that_is_a_path_is_an_error(tiny_data, tmp_path):
    with pytest.raises(TuneSetupError, match=r"--name '\.\./x': give a plain folder name"):
        make_request("BPR", "tiny", {"learning_rate": {"choice": [0.01]}}, data_path=str(tiny_data), name="../x")


def small_search(tmp_path, tiny_data, tiny_yaml, *extra, storage="tune", epochs=1):
    """``python -m recbole_mgformer.tune`` of BPR on the tiny data, ``epochs`` a trial: its exit status."""
    space = tmp_path / "bpr-space.yaml"
    if not space.exists():
        space.write_text("learning_rate: {choice: [0.01, 0.001]}\n")
    settings = ["--space", str(space), f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    return main(
        tune_args(
            "BPR", tmp_path, *settings, "--verbose", "0", "--no-retrain", f"--epochs={epochs}", *extra, storage=storage
        )
    )


@pytest.mark.slow  # a whole Ray search of several trials
def test_each_search_writes_its_own_report_and_never_another_searchs(local_ray, tiny_data, tiny_yaml, tmp_path, capsys):
    results = tmp_path / "results"
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "1") == 0
    first = {path.name: path.read_text() for path in results.iterdir()}
    assert set(first) == {"BPR-tiny.md", "BPR-tiny.json", "BPR-tiny.yaml"}
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "2", "--name", "BPR-tiny-wide") == 0
    assert {path.name for path in results.iterdir()} == set(first) | {
        "BPR-tiny-wide.md",
        "BPR-tiny-wide.json",
        "BPR-tiny-wide.yaml",
    }
    assert {name: (results / name).read_text() for name in first} == first  # the first search's report is intact
    assert "Search: random, 2 sample(s)" in (results / "BPR-tiny-wide.md").read_text()
    # a search of the same name kept elsewhere (another --storage) does not take over the report either
    capsys.readouterr()
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "1", storage="elsewhere") == 2
    error = capsys.readouterr().err
    assert f"{results / 'BPR-tiny.md'} is the report of another search ({tmp_path / 'tune' / 'BPR-tiny'})" in error
    assert "another --name (or --results folder)" in error and not (tmp_path / "elsewhere").exists()
    assert {name: (results / name).read_text() for name in first} == first


def test_resume_refuses_a_changed_space_sample_count_or_setting_and_names_it(
    local_ray, tiny_data, tiny_yaml, tmp_path, capsys
):
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "1") == 0
    capsys.readouterr()
    other_space = tmp_path / "other-space.yaml"
    other_space.write_text("learning_rate: {choice: [0.1]}\n")
    for extra, epochs, option, before, now in [
        (["--samples", "3"], 1, "--samples", "1", "3"),
        (
            ["--space", str(other_space)],
            1,
            "--space",
            "{'learning_rate': {'choice': [0.01, 0.001]}}",
            "{'learning_rate': {'choice': [0.1]}}",
        ),
        ([], 2, "--key=value settings", "{'epochs': 1}", "{'epochs': 2}"),
        (["--search-seed", "7"], 1, "--search-seed", "0", "7"),
        (["--defaults-first"], 1, "--defaults-first", "False", "True"),
    ]:
        assert small_search(tmp_path, tiny_data, tiny_yaml, "--resume", *extra, epochs=epochs) == 2
        error = capsys.readouterr().err
        assert f"cannot change on --resume ({option}: started with {before}, now {now})" in error
        assert f"Drop {option} to resume it as it started, or start a new search with another --name" in error
    # the same command, or one that leaves the settings out, resumes (the search is finished: nothing to train)
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "1", "--resume") == 0
    assert main(tune_args("BPR", tmp_path, "--verbose", "0", "--no-retrain", "--resume")) == 0


@pytest.mark.slow  # a whole Ray search of several trials
@pytest.mark.skipif(
    __import__("importlib").util.find_spec("hyperopt") is None,
    reason="hyperopt is not installed (pip install hyperopt==0.2.5, or make test installs it)",
)
def test_hyperopt_search_draws_inside_the_space(local_ray, tiny_data, tiny_yaml, tmp_path):
    space = {"uniformity_weight": {"loguniform": [0.2, 2.0]}, "embedding_size": {"choice": [8, 16]}}
    summary = search_in_process(space, tiny_data, tiny_yaml, tmp_path, search="hyperopt", samples=3)
    rows = summary["rows"]
    assert len(rows) == 3 and all(r["status"] in ("completed", "stopped early") for r in rows)
    assert all(
        0.2 <= r["params"]["uniformity_weight"] <= 2.0 and r["params"]["embedding_size"] in (8, 16) for r in rows
    )
    assert "Search: hyperopt" in Path(summary["markdown"]).read_text()
    # resumed from its records (its trials all finished): the same rows, nothing trained again
    resumed = search_in_process(space, tiny_data, tiny_yaml, tmp_path, search="hyperopt", samples=3, resume=True)
    assert resumed["rows"] == rows


@pytest.mark.parametrize(
    "model, dataset, metric", [("CSA", "ml-100k-ctx-0.8", "auc"), ("EAGPS", "ml-100k-seq", "ndcg@10")]
)
def test_spaces_of_the_other_papers_fit_their_models_under_their_protocols(model, dataset, metric, tmp_path):
    request = make_request(model, dataset, data_path=str(tmp_path / "data"), storage_dir=tmp_path / "tune")
    assert request["space_source"].endswith(f"properties/hyper/{model}.yaml")
    assert request["metric"] == metric and request["mode"] == "max"
    assert ray_space(parse_space(request["space"]), "random")


@pytest.mark.parametrize("model", ["EASE", "SLIMElastic", "ItemKNN"])
def test_a_closed_form_models_trial_is_one_fit_and_its_shipped_space_fits_it(model, tiny_data, tmp_path):
    request = make_request(
        model,
        "tiny",
        data_path=str(tiny_data),
        storage_dir=tmp_path / "tune",
        config_dict={"epochs": 30},
        grace_period=5,
    )
    # RecBole's traditional trainer fits once whatever epochs says: one evaluation, and ASHA's grace shrinks to it
    assert request["max_t"] == 1 and request["grace_period"] == 1 and request["grace_asked"] == 5
    assert request["space_source"].endswith(f"properties/hyper/{model}.yaml")
    assert ray_space(parse_space(request["space"]), "random")


def test_defaults_first_takes_the_searched_keys_values_a_plain_run_merges(tiny_data, tiny_yaml, tmp_path):
    from recbole_mgformer.quick_start import build_config

    space = {
        "learning_rate": {"choice": [0.01, 0.05]},
        "embedding_size": {"choice": [16, 32]},
        "uniformity_weight": {"loguniform": [0.1, 1.0]},
        "structural_size": {"choice": [None, 8]},
    }
    request = make_request(
        "MGFormer",
        "tiny",
        space,
        config_files=[str(tiny_yaml)],
        data_path=str(tiny_data),
        config_dict={"uniformity_weight": 0.7},
        storage_dir=tmp_path / "tune",
        defaults_first=True,
    )
    config, _ = build_config(
        "MGFormer", "tiny", [str(tiny_yaml)], {"uniformity_weight": 0.7, "data_path": str(tiny_data)}
    )
    assert request["defaults_first"] is True
    assert request["first_trial"] == {key: config[key] for key in space}
    # RecBole's learning rate, the config file's d (over MGFormer.yaml's 64), the fixed setting's weight, the YAML's ~
    assert request["first_trial"] == {
        "learning_rate": 0.001,
        "embedding_size": 8,
        "uniformity_weight": 0.7,
        "structural_size": None,
    }
    assert request["first_trial_outside"] == ["learning_rate", "embedding_size"]  # run anyway by a random search
    plain = make_request(
        "MGFormer",
        "tiny",
        space,
        config_files=[str(tiny_yaml)],
        data_path=str(tiny_data),
        storage_dir=tmp_path / "tune",
    )
    assert plain["defaults_first"] is False and "first_trial" not in plain


def test_defaults_first_names_a_key_without_a_default_or_one_the_search_cannot_take(tiny_data, tmp_path):
    def request(space, **settings):
        return make_request(
            "BPR",
            "tiny",
            space,
            data_path=str(tiny_data),
            storage_dir=tmp_path / "tune",
            defaults_first=True,
            **settings,
        )

    with pytest.raises(
        TuneSetupError,
        match=r"the space: BPR has no default for 'double_tower' .*set double_tower "
        r"in a --config_files file, or drop --defaults-first",
    ):
        request({"double_tower": {"choice": [True, False]}})
    with pytest.raises(TuneSetupError, match="--defaults-first needs --search random or hyperopt"):
        request({"learning_rate": {"choice": [0.01]}}, search="grid")
    if __import__("importlib").util.find_spec("hyperopt") is not None:
        with pytest.raises(
            TuneSetupError,
            match=r"BPR's default learning_rate=0.001 lies outside learning_rate: "
            r"\{choice: \[0.01, 0.05\]\}, and --search hyperopt cannot",
        ):
            request({"learning_rate": {"choice": [0.01, 0.05]}}, search="hyperopt")
        assert request({"learning_rate": {"choice": [0.01, 0.001]}}, search="hyperopt")["first_trial"] == {
            "learning_rate": 0.001
        }


@pytest.mark.slow  # a whole Ray search of several trials
def test_a_defaults_first_search_runs_the_defaults_as_one_of_its_samples(
    local_ray, tiny_data, tiny_yaml, tmp_path, capsys
):
    (tmp_path / "bpr-space.yaml").write_text("learning_rate: {choice: [0.01, 0.05]}\n")  # RecBole's 0.001 is not
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "2", "--defaults-first") == 0
    record = json.loads((tmp_path / "results" / "BPR-tiny.json").read_text())
    assert record["request"]["defaults_first"] is True and len(record["rows"]) == 2
    (first,) = [row for row in record["rows"] if row.get("defaults")]
    assert first["params"] == {"learning_rate": 0.001} and first["status"] in ("completed", "stopped early")
    (other,) = [row for row in record["rows"] if not row.get("defaults")]
    assert other["params"]["learning_rate"] in (0.01, 0.05)
    page = (tmp_path / "results" / "BPR-tiny.md").read_text()
    rank = 1 + record["rows"].index(first)
    assert (
        f"First trial: the model's defaults (`learning_rate=0.001`), one of the 2 trials; outside the space, "
        f"run anyway: `learning_rate`; it ranked {rank} of 2."
    ) in page
    assert "| completed (the defaults) |" in page or "| stopped early (the defaults) |" in page
    # resumed as it started; a resume that would drop the first trial is refused
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--resume") == 0
    capsys.readouterr()
    (tmp_path / "results" / "BPR-tiny.md").unlink()
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--resume", "--name", "BPR-tiny") == 0
    assert "First trial: the model's defaults" in (tmp_path / "results" / "BPR-tiny.md").read_text()


HOLD = """
import sys, time
from recbole_mgformer.tune.records import search_lock
with search_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_command_on_a_search_that_runs_stops_with_an_error(tiny_data, tiny_yaml, tmp_path, capsys):
    from recbole_mgformer.tune.records import REQUEST_FILE, claim_request

    experiment = tmp_path / "tune" / "BPR-tiny"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(experiment)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # a tune command running this search
        for extra in ([], ["--resume"]):
            if extra:  # the running search has claimed its folder by now
                space = tmp_path / "bpr-space.yaml"
                claim_request(
                    make_request(
                        "BPR",
                        "tiny",
                        str(space),
                        config_files=[str(tiny_yaml)],
                        config_dict={"epochs": 1},
                        data_path=str(tiny_data),
                        samples=1,
                        storage_dir=tmp_path / "tune",
                    )
                )
            assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "1", *extra) == 2
            error = capsys.readouterr().err
            assert f"error: another tune command (pid {holder.pid} on " in error
            assert f"is running the search at {experiment}; wait for it to end, or give this one another --name" in (
                error
            )
    finally:
        holder.kill()
        holder.wait()
    assert [p.name for p in experiment.iterdir()] == [REQUEST_FILE]  # neither ran a trial or wrote a report
    assert not (tmp_path / "results").exists()


def test_an_unwritable_results_folder_fails_before_ray_starts(tiny_data, tiny_yaml, tmp_path, capsys, monkeypatch):
    def no_ray(*args, **kwargs):
        raise AssertionError("Ray started")

    monkeypatch.setattr("recbole_mgformer.tune.search.init_ray", no_ray)
    (tmp_path / "a-file").write_text("")
    base = ["BPR", tmp_path, f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    assert main(tune_args(*base, results="a-file/tuning")) == 2
    assert f"--results {tmp_path / 'a-file' / 'tuning' / 'BPR-tiny.md'}: {tmp_path / 'a-file'} is a file" in (
        capsys.readouterr().err
    )
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    real = tempfile.TemporaryFile

    def refused_there(*args, dir=None, **kwargs):  # a folder this user cannot write (root writes anywhere)
        if dir is not None and Path(dir) == read_only:
            raise PermissionError(13, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr("recbole_mgformer.config.input_checks.tempfile.TemporaryFile", refused_there)
    assert main(tune_args(*base, results="read-only")) == 2
    assert f"--results {read_only / 'BPR-tiny.md'}: cannot write in {read_only} (Permission denied)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "tune").exists()  # no search folder, no lock: it stopped before them


def test_a_report_file_another_search_wrote_meanwhile_is_never_replaced(tmp_path):
    from recbole_mgformer.tune.search import write_report

    request = {
        "model": "BPR",
        "dataset": "tiny",
        "metric": "ndcg@20",
        "mode": "max",
        "search": "random",
        "samples": 1,
        "scheduler": "fifo",
        "space": {"learning_rate": {"choice": [0.01]}},
        "space_source": "the space",
        "overrides": {},
        "config_files": [],
        "experiment": str(tmp_path / "tune" / "BPR-tiny"),
        "name": "BPR-tiny",
    }
    summary = {
        "request": request,
        "rows": [],
        "best": None,
        "retrained": None,
        "provenance": {"machine": "cpu", "commit": "abc", "date": "today", "versions": {}},
    }
    paths = {suffix: tmp_path / "results" / f"BPR-tiny.{suffix}" for suffix in ("md", "json", "yaml")}
    write_report(paths, set(), summary, request)  # new files: claimed
    assert json.loads(paths["json"].read_text())["request"]["name"] == "BPR-tiny"
    paths["json"].unlink()
    paths["md"].write_text("another search's page\n")  # written by another search after this one started
    with pytest.raises(TuneSetupError, match=r"BPR-tiny.md: another search wrote this file while this one ran"):
        write_report(paths, set(), summary, request)
    assert paths["md"].read_text() == "another search's page\n"
    write_report(paths, {"md"}, summary, request)  # this search's own page, there when it started: replaced
    assert paths["md"].read_text().startswith("# Hyperparameter search: BPR on tiny")
    assert sorted(p.name for p in paths["md"].parent.iterdir()) == ["BPR-tiny.json", "BPR-tiny.md"]


def test_records_kept_apart_from_rays_folder_continue_the_search_with_a_new_storage(
    local_ray, tiny_data, tiny_yaml, tmp_path, capsys
):
    """``--records``: the request and trial records there, Ray's folders under --storage; with the storage gone
    (a new machine) and a trial's record missing, --resume with a fresh storage runs that trial alone, its draw."""
    from recbole_mgformer.tune.records import REQUEST_FILE

    records = tmp_path / "results" / "BPR-tiny.records"
    (tmp_path / "bpr-space.yaml").write_text("learning_rate: {loguniform: [0.0001, 0.1]}\n")
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--samples", "2", "--records", str(records)) == 0
    assert sorted(p.name for p in records.iterdir()) == [REQUEST_FILE, "trials"]
    assert [p.name for p in (tmp_path / "tune" / "BPR-tiny").iterdir()] == ["ray-1"]
    before = {p.name: json.loads(p.read_text()) for p in (records / "trials").iterdir()}
    assert sorted(before) == ["0000.json", "0001.json"]
    shutil.rmtree(tmp_path / "tune")
    (records / "trials" / "0001.json").unlink()
    capsys.readouterr()
    extra = ("--resume", "--records", str(records))
    assert small_search(tmp_path, tiny_data, tiny_yaml, *extra, storage="new-storage") == 0
    assert "resuming BPR-tiny: 1 of 2 trials finished (kept, not trained again); 1 to run" in capsys.readouterr().out
    after = {p.name: json.loads(p.read_text()) for p in (records / "trials").iterdir()}
    assert after["0000.json"] == before["0000.json"] and after["0001.json"]["trial"] != before["0001.json"]["trial"]
    assert after["0001.json"]["params"] == before["0001.json"]["params"]
    assert [p.name for p in (tmp_path / "new-storage" / "BPR-tiny").iterdir()] == ["ray-1"]
    assert "BPR-tiny`, its records `" in (tmp_path / "results" / "BPR-tiny.md").read_text()  # both named
    # without --records the search is not found where Ray's folders are: nothing to resume there
    assert small_search(tmp_path, tiny_data, tiny_yaml, "--resume", storage="new-storage") == 2
    assert "nothing to resume at" in capsys.readouterr().err
