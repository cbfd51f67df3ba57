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
import torch
import yaml
from conftest import tune_args

from recbole_mgformer.tune import TuneSetupError, main, make_request, parse_space, ray_space, tune_recommender
from recbole_mgformer.tune.search import check_address
from recbole_mgformer.tune.trials import STATES_DIR
from recbole_mgformer.tune.tuner import check_resources as _check_resources

ROOT = Path(__file__).resolve().parents[2]

TINY_YAML = (
    "eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
    "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\n"
    "train_batch_size: 64\nepochs: 2\nembedding_size: 8\n"
)


@pytest.fixture(scope="module")
def ray_session():
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


def test_search_writes_a_best_config_that_run_py_reproduces(ray_session, tiny_data, tiny_yaml, tmp_path, capsys):
    space = write_space(tmp_path, "learning_rate: {grid: [0.001, 0.01]}\nuniformity_weight: {choice: [0.5]}\n")
    results = tmp_path / "results" / "tuning"
    settings = ["--space", str(space), "--search", "grid", f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    more = ["--verbose", "0", "--stopping_step=5"]
    arguments = tune_args("MGFormer", tmp_path, *settings, *more, storage="saved/tune", results="results/tuning")
    assert main(arguments) == 0
    assert "best valid ndcg@20" in capsys.readouterr().out
    table = (results / "MGFormer-tiny.md").read_text()
    rows = [line for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 2 and all("| completed |" in row for row in rows)
    scores = [float(row.split("|")[4]) for row in rows]
    assert scores == sorted(scores, reverse=True)

    best_yaml = results / "MGFormer-tiny.yaml"
    best = yaml.safe_load(best_yaml.read_text())
    assert best["data_path"] == str(tiny_data) and best["epochs"] == 2 and best["stopping_step"] == 5
    assert best["learning_rate"] in (0.001, 0.01) and best["uniformity_weight"] == 0.5
    rerun = run_py(tmp_path / "rerun", "--model=MGFormer", "--dataset=tiny", f"--config_files={best_yaml}")
    assert f"{float(rerun['valid']['ndcg@20']):.4f}" == f"{scores[0]:.4f}"
    # the retrained best configuration's test metrics on the page are run.py's
    assert f"**test ndcg@20 {float(rerun['test']['ndcg@20']):.4f}**" in table
    assert f"**test recall@20 {float(rerun['test']['recall@20']):.4f}**" in table
    record = yaml.safe_load((results / "MGFormer-tiny.json").read_text())
    assert record["best"]["score"] == pytest.approx(scores[0])
    assert record["provenance"]["versions"]["ray"] == ray.__version__

    # the experiment is kept: starting it again is refused, --resume restores it without training again
    assert main(arguments) == 2
    assert "already holds a search; --resume continues it" in capsys.readouterr().err
    (results / "MGFormer-tiny.md").unlink()
    assert main(arguments + ["--resume", "--no-retrain"]) == 0
    resumed = (results / "MGFormer-tiny.md").read_text()
    assert [line for line in resumed.splitlines() if re.match(r"\| \d+ \|", line)] == rows
    # RecBole's logs and checkpoints stayed in Ray's folders, none in the current directory
    assert {p.name for p in tmp_path.iterdir()} == {"data", "tiny.yaml", "space.yaml", "results", "saved", "rerun"}


def saved_epochs(storage):
    """{trial id: epochs its state file holds}, for the trials a search is in the middle of; the files load with
    ``weights_only=True``, as every checkpoint this project writes."""
    states = storage.glob(f"*/{STATES_DIR}/*.pth")
    return {path.stem: torch.load(path, weights_only=True)["epoch"] + 1 for path in states}


def wait_until_settled(read, quiet=5.0, timeout=120.0):
    """``read()`` once it has returned the same value for ``quiet`` seconds."""
    value, since, deadline = read(), time.monotonic(), time.monotonic() + timeout
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the killed search's workers kept training"
        time.sleep(0.5)
        latest = read()
        if latest != value:
            value, since = latest, time.monotonic()
    return value


def epochs_since_last_start(storage, trial_id):
    """The epochs a trial reported since Ray last started it (Ray counts its iterations from 1 again)."""
    (path,) = storage.glob(f"*/train_trial_{trial_id}_*/result.json")
    results = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    last_start = max(i for i, result in enumerate(results) if result["training_iteration"] == 1)
    return [result["epoch"] for result in results[last_start:]]


def test_a_killed_search_resumes_its_trials_at_their_last_epoch(ray_session, tiny_data, tiny_yaml, tmp_path):
    space = write_space(tmp_path, "learning_rate: {grid: [0.001, 0.01]}\n")
    storage = tmp_path / "saved"
    settings = ["--space", str(space), "--search", "grid", f"--data_path={tiny_data}", f"--config_files={tiny_yaml}"]
    arguments = tune_args(
        "MGFormer",
        tmp_path,
        *settings,
        *["--verbose", "0", "--no-retrain", "--grace-period", "20", "--epochs=8", "--stopping_step=100"],
        storage="saved",
    )
    search = subprocess.Popen(
        [sys.executable, "-m", "recbole_mgformer.tune", *arguments, "--num-cpus", "2"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while max(saved_epochs(storage).values(), default=0) < 2 and search.poll() is None:
        assert time.monotonic() < deadline, "no trial saved its second epoch in 5 minutes"
        time.sleep(0.2)
    os.killpg(search.pid, signal.SIGKILL)  # the search with its Ray, as a session's end: nothing more is saved
    search.wait()
    saved = wait_until_settled(lambda: saved_epochs(storage))  # a Ray worker outside the group may finish an epoch
    assert max(saved.values()) >= 2 and max(saved.values()) < 8

    assert main(arguments + ["--resume"]) == 0
    for trial_id, epochs in saved.items():
        # started again by Ray, the trial went on from the epoch after its saved one, not from the first
        assert epochs_since_last_start(storage, trial_id) == list(range(epochs + 1, 9))
    assert not saved_epochs(storage)  # a finished trial's state is gone


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


def test_trials_cannot_ask_for_more_than_the_cluster_has(ray_session):
    too_many_gpus = (
        r"--gpus-per-trial 0.25 asks for more than the Ray cluster has \(0 GPUs\); "
        r"lower --gpus-per-trial \(the benchmark's --tune-gpus\) or set it to 0"
    )
    with pytest.raises(TuneSetupError, match=too_many_gpus):
        _check_resources(1, 0.25)
    with pytest.raises(TuneSetupError, match=r"--cpus-per-trial 3 asks for more"):
        _check_resources(3, 0)


def test_a_failing_trial_is_recorded_and_the_others_complete(ray_session, tiny_data, tiny_yaml, tmp_path):
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


def test_each_search_writes_its_own_report_and_never_another_searchs(
    ray_session, tiny_data, tiny_yaml, tmp_path, capsys
):
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
    ray_session, tiny_data, tiny_yaml, tmp_path, capsys
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


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("hyperopt") is None,
    reason="hyperopt is not installed (pip install hyperopt==0.2.5, or make test installs it)",
)
def test_hyperopt_search_draws_inside_the_space(ray_session, tiny_data, tiny_yaml, tmp_path):
    space = {"uniformity_weight": {"loguniform": [0.2, 2.0]}, "embedding_size": {"choice": [8, 16]}}
    summary = search_in_process(space, tiny_data, tiny_yaml, tmp_path, search="hyperopt", samples=3)
    rows = summary["rows"]
    assert len(rows) == 3 and all(r["status"] in ("completed", "stopped early") for r in rows)
    assert all(
        0.2 <= r["params"]["uniformity_weight"] <= 2.0 and r["params"]["embedding_size"] in (8, 16) for r in rows
    )
    assert "Search: hyperopt" in Path(summary["markdown"]).read_text()


@pytest.mark.parametrize(
    "model, dataset, metric", [("CSA", "ml-100k-ctx-0.8", "auc"), ("EAGPS", "ml-100k-seq", "ndcg@10")]
)
def test_spaces_of_the_other_papers_fit_their_models_under_their_protocols(model, dataset, metric, tmp_path):
    request = make_request(model, dataset, data_path=str(tmp_path / "data"), storage_dir=tmp_path / "tune")
    assert request["space_source"].endswith(f"properties/hyper/{model}.yaml")
    assert request["metric"] == metric and request["mode"] == "max"
    assert ray_space(parse_space(request["space"]), "random")


def test_a_resumed_searchs_stored_settings_are_checked_as_a_new_ones(tmp_path):
    """The search's stored request (recbole_mgformer_tune.json) feeds every resumed trial: code there is refused."""
    from conftest import eval_payload

    from recbole_mgformer.tune.resume import REQUEST_FILE
    from recbole_mgformer.tune.resume import prepare_experiment as _prepare_experiment

    marker = tmp_path / "pwned"
    experiment = tmp_path / "tune" / "BPR-tiny"
    experiment.mkdir(parents=True)
    request = {
        "experiment": str(experiment),
        "space": {"learning_rate": {"choice": [0.01]}},
        "overrides": {"epochs": 1, "learning_rate": eval_payload(marker)},
    }
    (experiment / REQUEST_FILE).write_text(json.dumps(request))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ray.tune.Tuner.can_restore", staticmethod(lambda path: True))
        with pytest.raises(TuneSetupError, match=rf"{REQUEST_FILE}: setting learning_rate: .*never run as Python"):
            _prepare_experiment(request, resume=True)
        request["overrides"]["learning_rate"] = 0.01
        request["space"] = {"learning_rate": {"choice": [eval_payload(marker)]}}
        (experiment / REQUEST_FILE).write_text(json.dumps(request))
        with pytest.raises(TuneSetupError, match="setting learning_rate: .*never run as Python"):
            _prepare_experiment(request, resume=True)
    assert not marker.exists()


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


def test_the_first_trial_is_the_point_and_the_others_are_drawn_as_without_it(ray_session, tmp_path):
    """Ray's random search with a first point: N trials in all, the point first (a list, None and a value outside
    the space passed as they are), then the draws of the same search without it."""
    from ray import air, tune

    from recbole_mgformer.tune.trials import _item
    from recbole_mgformer.tune.tuner import search_algorithm as _search_algorithm

    parsed = parse_space(
        {
            "mlp_hidden_size": {"choice": [[64], [128, 128]]},
            "size": {"choice": [None, 8]},
            "weight": {"loguniform": [1.0e-5, 0.1]},
            "layers": {"randint": [1, 4]},
        }
    )
    point = {"mlp_hidden_size": [256, 256], "size": None, "weight": 0.0, "layers": 2}

    def trials(first_trial, name):
        tuner = tune.Tuner(
            lambda config: {"score": 0.0},
            param_space=ray_space(parsed, "random"),
            tune_config=tune.TuneConfig(
                num_samples=3, metric="score", mode="max", search_alg=_search_algorithm("random", 0, first_trial)
            ),
            run_config=air.RunConfig(name=name, storage_path=str(tmp_path), verbose=0),
        )
        return [{key: _item(value) for key, value in result.config.items()} for result in tuner.fit()]

    with_point, drawn = trials(point, "first"), trials(None, "plain")
    assert len(with_point) == 3 and with_point[0] == point
    assert with_point[1:] == drawn[:2]


def test_a_defaults_first_search_runs_the_defaults_as_one_of_its_samples(
    ray_session, tiny_data, tiny_yaml, tmp_path, capsys
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
