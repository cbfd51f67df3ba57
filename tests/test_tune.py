"""Hyperparameter search with Ray Tune (``recbole_mgformer.tune``): spaces, validation, tiny searches end to end."""

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import ray
import yaml

from recbole_mgformer import tune as tuning
from recbole_mgformer.tune import TuneSetupError, make_request, parse_space, ray_space, tune_recommender

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["MGFormer", "SimGCL", "XSimGCL", "DirectAU", "LightGCN", "SGL", "BPR"]
TINY_YAML = ("eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
             "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\n"
             "train_batch_size: 64\nepochs: 2\nembedding_size: 8\n")


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


# ---------------------------------------------------------------------------------------------------- spaces


def test_space_distributions_become_ray_domains():
    from ray.tune.search.sample import Categorical, Float, Integer

    parsed = parse_space({"embedding_size": {"choice": [32, 64, 128]}, "uniformity_weight": {"loguniform": [0.1, 5.0]},
                          "n_layers": {"grid": [1, 2]}, "attention_weight": {"uniform": [0.5, 1.0]},
                          "n_heads": {"randint": [1, 3]}})
    space = ray_space(parsed, "random")
    assert isinstance(space["embedding_size"], Categorical) and space["embedding_size"].categories == [32, 64, 128]
    assert isinstance(space["uniformity_weight"], Float) and (space["uniformity_weight"].lower,
                                                              space["uniformity_weight"].upper) == (0.1, 5.0)
    assert space["n_layers"] == {"grid_search": [1, 2]}
    assert isinstance(space["attention_weight"], Float) and isinstance(space["n_heads"], Integer)
    grid = ray_space(parse_space({"embedding_size": {"choice": [32, 64]}, "n_layers": {"grid": [1, 2]}}), "grid")
    assert grid == {"embedding_size": {"grid_search": [32, 64]}, "n_layers": {"grid_search": [1, 2]}}


@pytest.mark.parametrize("raw, message", [
    ({"uniformity_weight": {"normal": [0, 1]}}, "unknown distribution 'normal'; choose one of choice, grid, uniform"),
    ({"uniformity_weight": {"loguniform": [0.0, 5.0]}}, "loguniform takes [low, high] numbers with 0 < low < high"),
    ({"uniformity_weight": {"uniform": [5.0, 0.1]}}, "uniform takes [low, high] numbers with low < high"),
    ({"uniformity_weight": {"uniform": [0.1]}}, "uniform takes [low, high]"),
    ({"n_heads": {"randint": [1.5, 4]}}, "randint takes [low, high] integers"),
    ({"embedding_size": {"choice": []}}, "choice takes a non-empty list"),
    ({"embedding_size": 64}, "embedding_size must be one distribution, e.g. `embedding_size: {choice: [...]}`"),
    ({"embedding_size": {"choice": [32], "grid": [64]}}, "must be one distribution"),
    ({}, "must be a non-empty mapping"),
    ([1, 2], "must be a non-empty mapping"),
])
def test_malformed_spaces_are_rejected_with_what_is_allowed(raw, message):
    with pytest.raises(TuneSetupError, match=re.escape(message)):
        parse_space(raw, "space.yaml")


def test_a_search_algorithm_rejects_what_it_cannot_search():
    with pytest.raises(TuneSetupError, match=r"--search grid needs finite values, but uniformity_weight is loguniform"):
        ray_space(parse_space({"uniformity_weight": {"loguniform": [0.1, 5.0]}}), "grid")
    with pytest.raises(TuneSetupError, match=r"--search hyperopt cannot enumerate n_layers"):
        ray_space(parse_space({"n_layers": {"grid": [1, 2]}}), "hyperopt")
    with pytest.raises(TuneSetupError, match="unknown search 'bayes'"):
        ray_space(parse_space({"n_layers": {"grid": [1, 2]}}), "bayes")


@pytest.mark.parametrize("model", MODELS)
def test_every_shipped_space_fits_its_model(model, tmp_path):
    request = make_request(model, "ml-100k", storage_dir=tmp_path / "tune")
    assert request["space_source"].endswith(f"properties/hyper/{model}.yaml")
    assert request["metric"] == "ndcg@20" and request["mode"] == "max"
    assert ray_space(parse_space(request["space"]), "random")


def test_mgformer_space_is_the_papers():
    space = yaml.safe_load((ROOT / "properties" / "hyper" / "MGFormer.yaml").read_text())
    assert space["embedding_size"] == {"choice": [32, 64, 128]}
    assert space["uniformity_weight"] == {"loguniform": [0.1, 5.0]}


def test_a_key_the_model_lacks_fails_before_any_trial_with_close_matches(tiny_data, tmp_path):
    space = write_space(tmp_path, "uniformty_weight: {loguniform: [0.1, 5.0]}\n")
    with pytest.raises(TuneSetupError, match=r"MGFormer has no config key 'uniformty_weight'; did you mean "
                                             r"uniformity_weight"):
        make_request("MGFormer", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")
    with pytest.raises(TuneSetupError, match=r"BPR has no config key 'uniformity_weight'"):
        make_request("BPR", "tiny", {"uniformity_weight": {"choice": [1.0]}}, data_path=str(tiny_data))


def test_the_command_reports_an_invalid_space_and_starts_nothing(tiny_data, tmp_path, capsys):
    space = write_space(tmp_path, "embedding_size: {normal: [64, 8]}\n")
    code = tuning.main(["--model", "MGFormer", "--dataset", "tiny", "--space", str(space), f"--data_path={tiny_data}",
                        "--storage", str(tmp_path / "tune"), "--results", str(tmp_path / "results")])
    assert code == 2
    err = capsys.readouterr().err
    assert "error: " in err and "embedding_size uses unknown distribution 'normal'" in err
    assert not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()
    assert tuning.main(["--model", "NoSuchNet", "--dataset", "tiny", f"--data_path={tiny_data}"]) == 2
    assert "unknown model 'NoSuchNet'" in capsys.readouterr().err
    assert tuning.main(["--model", "MGFormer", "--dataset", "tiny", "--space", str(tmp_path / "none.yaml")]) == 2
    assert "does not exist; spaces ship for BPR, CSA, DirectAU, EAGPS, LightGCN, MGFormer" in capsys.readouterr().err


@pytest.mark.skipif(__import__("importlib").util.find_spec("hyperopt") is not None, reason="hyperopt is installed")
def test_hyperopt_without_the_package_names_the_pip_command(tiny_data, tmp_path):
    with pytest.raises(TuneSetupError, match=re.escape("pip install hyperopt==0.2.5")):
        make_request("MGFormer", "tiny", {"uniformity_weight": {"loguniform": [0.1, 5.0]}}, data_path=str(tiny_data),
                     search="hyperopt")


def test_ray_temp_dir_stays_short_enough_for_its_sockets(tmp_path):
    assert tuning.default_temp_dir("/work/saved/tune") == Path("/work/saved/tune/ray-tmp")
    long_dir = tuning.default_temp_dir("/" + "x" * 80)
    assert long_dir.name == "ray-recbole-mgformer" and len(str(long_dir)) <= 40


# ---------------------------------------------------------------------------------------------------- results


def fake_result(trial, metrics=None, error=None, config=None):
    metrics = {"trial_id": trial, **(metrics or {})}
    return SimpleNamespace(metrics=metrics, error=error, config=config, _local_path=None)


def test_rows_sort_by_the_metric_with_failed_and_unfinished_trials_last():
    results = [
        fake_result("a", {"best_valid_score": 0.2, "epoch": 4, "done": True, "finished": True}, config={"d": 32}),
        fake_result("b", error=RuntimeError("ray::train()\n  File x\nValueError: Training loss is nan"),
                    config={"d": 64}),
        fake_result("c", {"best_valid_score": 0.3, "best_ndcg@20": 0.3, "epoch": 2, "done": True, "finished": False},
                    config={"d": 128}),
        fake_result("d", {"best_valid_score": 0.1, "epoch": 1, "done": False}, config={"d": 16}),
    ]
    rows = tuning.sort_rows(tuning.trial_rows(results, ["d"]))
    assert [(r["trial"], r["status"]) for r in rows] == [
        ("c", "stopped early"), ("a", "completed"), ("d", "unfinished"), ("b", "failed")]
    assert rows[-1]["error"] == "ValueError: Training loss is nan" and rows[-1]["params"] == {"d": 64}
    assert rows[0]["valid"] == {"ndcg@20": 0.3}
    assert [r["trial"] for r in tuning.sort_rows(tuning.trial_rows(results, ["d"]), bigger=False)][:2] == ["a", "c"]


# ---------------------------------------------------------------------------------------------------- searches


def run_py(cwd, *args):
    cwd.mkdir()
    completed = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True,
                               check=True, cwd=cwd)
    values = {}
    for split in ("valid", "test"):
        line = next(l for l in completed.stdout.splitlines() if l.strip().startswith(split))
        values[split] = dict(re.findall(r"(\S+@\d+) ([0-9.]+)", line))
    return values


def test_search_writes_a_best_config_that_run_py_reproduces(ray_session, tiny_data, tiny_yaml, tmp_path, capsys):
    space = write_space(tmp_path, "learning_rate: {grid: [0.001, 0.01]}\nuniformity_weight: {choice: [0.5]}\n")
    results = tmp_path / "results" / "tuning"
    arguments = ["--model", "MGFormer", "--dataset", "tiny", "--space", str(space), "--search", "grid",
                 f"--data_path={tiny_data}", f"--config_files={tiny_yaml}", "--results", str(results),
                 "--storage", str(tmp_path / "saved" / "tune"), "--verbose", "0", "--stopping_step=5"]
    assert tuning.main(arguments) == 0
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
    assert record["best"]["score"] == pytest.approx(scores[0]) and record["provenance"]["versions"]["ray"] == ray.__version__

    # the experiment is kept: starting it again is refused, --resume restores it without training again
    assert tuning.main(arguments) == 2
    assert "already holds a search; --resume continues it" in capsys.readouterr().err
    (results / "MGFormer-tiny.md").unlink()
    assert tuning.main(arguments + ["--resume", "--no-retrain"]) == 0
    resumed = (results / "MGFormer-tiny.md").read_text()
    assert [line for line in resumed.splitlines() if re.match(r"\| \d+ \|", line)] == rows
    # RecBole's logs and checkpoints stayed in Ray's folders, none in the current directory
    assert {p.name for p in tmp_path.iterdir()} == {"data", "tiny.yaml", "space.yaml", "results", "saved", "rerun"}


def test_trials_cannot_ask_for_more_than_the_cluster_has(ray_session):
    with pytest.raises(TuneSetupError, match=r"--gpus-per-trial 0.25 asks for more than the Ray cluster has \(0 GPUs\)"):
        tuning._check_resources(1, 0.25)
    with pytest.raises(TuneSetupError, match=r"--cpus-per-trial 3 asks for more"):
        tuning._check_resources(3, 0)


def test_a_failing_trial_is_recorded_and_the_others_complete(ray_session, tiny_data, tiny_yaml, tmp_path):
    """One trial the model rejects at construction, one whose loss turns NaN, and one that trains."""
    space = {"feature_map": {"grid": ["simrf", "not_a_map"]}, "learning_rate": {"grid": [0.001, 1.0e30]}}
    summary = tune_recommender("MGFormer", "tiny", space, config_files=[str(tiny_yaml)], data_path=str(tiny_data),
                               samples=1, results_dir=tmp_path / "results", storage_dir=tmp_path / "tune",
                               retrain_best=False, verbose=0)
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


@pytest.mark.skipif(__import__("importlib").util.find_spec("hyperopt") is None,
                    reason="hyperopt is not installed (pip install hyperopt==0.2.5, or make test installs it)")
def test_hyperopt_search_draws_inside_the_space(ray_session, tiny_data, tiny_yaml, tmp_path):
    space = {"uniformity_weight": {"loguniform": [0.2, 2.0]}, "embedding_size": {"choice": [8, 16]}}
    summary = tune_recommender("MGFormer", "tiny", space, config_files=[str(tiny_yaml)], data_path=str(tiny_data),
                               search="hyperopt", samples=3, results_dir=tmp_path / "results",
                               storage_dir=tmp_path / "tune", retrain_best=False, verbose=0)
    rows = summary["rows"]
    assert len(rows) == 3 and all(r["status"] in ("completed", "stopped early") for r in rows)
    assert all(0.2 <= r["params"]["uniformity_weight"] <= 2.0 and r["params"]["embedding_size"] in (8, 16)
               for r in rows)
    assert "Search: hyperopt" in Path(summary["markdown"]).read_text()


@pytest.mark.parametrize("model, protocol, metric", [
    ("CSA", ["context/ml-100k.yaml", "context/rho-0.8.yaml"], "auc"),
    ("EAGPS", ["sequential/ml-100k.yaml"], "ndcg@10"),
])
def test_spaces_of_the_other_papers_fit_their_models_under_their_protocols(model, protocol, metric, tmp_path):
    files = [str(ROOT / "properties" / p) for p in protocol]
    request = make_request(model, "ml-100k", config_files=files, storage_dir=tmp_path / "tune")
    assert request["space_source"].endswith(f"properties/hyper/{model}.yaml")
    assert request["metric"] == metric and request["mode"] == "max"
    assert ray_space(parse_space(request["space"]), "random")
