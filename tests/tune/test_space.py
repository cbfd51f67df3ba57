"""Search spaces (``recbole_mgformer.tune.space``): distributions, validation, the shipped spaces."""

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import tune_args
from hypothesis import given, settings
from hypothesis import strategies as st

from recbole_mgformer.config.config_check import BOUNDS, check_sizes
from recbole_mgformer.config.defaults import properties_dir
from recbole_mgformer.tune import TuneSetupError, main, make_request, parse_space, ray_space
from recbole_mgformer.tune.search import default_temp_dir
from recbole_mgformer.tune.space import check_draws, in_space, load_space

ROOT = Path(__file__).resolve().parents[2]
MODELS = ["MGFormer", "SimGCL", "XSimGCL", "DirectAU", "LightGCN", "SGL", "BPR", "GFCF", "BSPM", "TurboCF", "ChebyCF"]


def write_space(folder, text, name="space.yaml"):
    path = folder / name
    path.write_text(text)
    return path


def test_space_distributions_become_ray_domains():
    from ray.tune.search.sample import Categorical, Float, Integer

    parsed = parse_space(
        {
            "embedding_size": {"choice": [32, 64, 128]},
            "uniformity_weight": {"loguniform": [0.1, 5.0]},
            "n_layers": {"grid": [1, 2]},
            "attention_weight": {"uniform": [0.5, 1.0]},
            "n_heads": {"randint": [1, 3]},
        }
    )
    space = ray_space(parsed, "random")
    assert isinstance(space["embedding_size"], Categorical) and space["embedding_size"].categories == [32, 64, 128]
    assert isinstance(space["uniformity_weight"], Float) and (
        space["uniformity_weight"].lower,
        space["uniformity_weight"].upper,
    ) == (0.1, 5.0)
    assert space["n_layers"] == {"grid_search": [1, 2]}
    assert isinstance(space["attention_weight"], Float) and isinstance(space["n_heads"], Integer)
    grid = ray_space(parse_space({"embedding_size": {"choice": [32, 64]}, "n_layers": {"grid": [1, 2]}}), "grid")
    assert grid == {"embedding_size": {"grid_search": [32, 64]}, "n_layers": {"grid_search": [1, 2]}}


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            {"uniformity_weight": {"normal": [0, 1]}},
            "unknown distribution 'normal'; choose one of choice, grid, uniform",
        ),
        ({"uniformity_weight": {"loguniform": [0.0, 5.0]}}, "loguniform takes [low, high] numbers with 0 < low < high"),
        ({"uniformity_weight": {"uniform": [5.0, 0.1]}}, "uniform takes [low, high] numbers with low < high"),
        ({"uniformity_weight": {"uniform": [0.1]}}, "uniform takes [low, high]"),
        ({"n_heads": {"randint": [1.5, 4]}}, "randint takes [low, high] integers"),
        ({"embedding_size": {"choice": []}}, "choice takes a non-empty list"),
        ({"embedding_size": 64}, "embedding_size must be one distribution, e.g. `embedding_size: {choice: [...]}`"),
        ({"embedding_size": {"choice": [32], "grid": [64]}}, "must be one distribution"),
        ({}, "must be a non-empty mapping"),
        ([1, 2], "must be a non-empty mapping"),
        ("x" * 500, "got '" + "x" * 79 + "... (502 characters)"),  # a long file that is no space, shortened
    ],
)
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


def test_mgformer_space_holds_the_papers_and_directaus_for_the_same_loss():
    space = yaml.safe_load((ROOT / "properties" / "hyper" / "MGFormer.yaml").read_text())
    directau = yaml.safe_load((ROOT / "properties" / "hyper" / "DirectAU.yaml").read_text())
    assert space["embedding_size"] == {"choice": [32, 64, 128]}
    low, high = space["uniformity_weight"]["loguniform"]
    assert low <= 0.1 and high >= 5.0  # the paper's lambda in 0.1..5.0
    assert space["uniformity_weight"] == directau["gamma"]


def test_a_key_the_model_lacks_fails_before_any_trial_with_close_matches(tiny_data, tmp_path):
    space = write_space(tmp_path, "uniformty_weight: {loguniform: [0.1, 5.0]}\n")
    with pytest.raises(
        TuneSetupError,
        match=r"MGFormer has no config key 'uniformty_weight'; did you mean "
        r"uniformity_weight",
    ):
        make_request("MGFormer", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")
    with pytest.raises(TuneSetupError, match=r"BPR has no config key 'uniformity_weight'"):
        make_request("BPR", "tiny", {"uniformity_weight": {"choice": [1.0]}}, data_path=str(tiny_data))


def test_a_setting_both_searched_and_fixed_is_named(tiny_data, tmp_path):
    space = write_space(tmp_path, "learning_rate: {choice: [0.01, 0.1]}\n")
    with pytest.raises(TuneSetupError, match=r"learning_rate is searched there and fixed .*--learning_rate=0.5"):
        make_request("BPR", "tiny", space, config_dict={"learning_rate": 0.5}, data_path=str(tiny_data))
    # with --defaults-first the fixed value is the first trial's
    request = make_request(
        "BPR", "tiny", space, config_dict={"learning_rate": 0.5}, data_path=str(tiny_data), defaults_first=True
    )
    assert request["first_trial"] == {"learning_rate": 0.5}


@pytest.mark.parametrize(
    "text, message",
    [
        ("learner: {choice: [adam, sgdx]}\n", r"learner: the listed value 'sgdx': setting learner takes one of adam"),
        ("shuffle: {grid: [maybe, true]}\n", r"shuffle: the listed value 'maybe': setting shuffle takes True or False"),
        ("topk: {choice: [[10], [0]]}\n", r"topk: the listed value \[0\]: setting topk takes whole numbers above 0"),
        ("learning_rate: {choice: [0.01, fast]}\n", r"learning_rate: the listed value 'fast': .*takes a number"),
        # what the search runs on: model: {grid: [BPR, LightGCN, Pop]} trained BPR three times, ranked by name
        ("model: {grid: [BPR, LightGCN]}\n", r"model is the search's --model, not a hyperparameter .*from the space"),
        ("dataset: {choice: [tiny, ml-100k]}\n", r"dataset is the search's --dataset"),
        ("data_path: {choice: [/etc, /tmp]}\n", r"data_path is where the data lives"),
        ("checkpoint_dir: {choice: [/tmp/a]}\n", r"checkpoint_dir is where the trials write"),
    ],
)
def test_a_space_no_run_can_use_fails_before_any_trial(tiny_data, tmp_path, text, message):
    """Each trial that drew a value no run takes would fail alone, and the search would spend its budget on them;
    a searched model or dataset would train the search's own under each drawn name."""
    space = write_space(tmp_path, text)
    with pytest.raises(TuneSetupError, match=message):
        make_request("BPR", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")
    assert make_request("BPR", "tiny", {"learner": {"choice": ["adam", "SGD"]}}, data_path=str(tiny_data))


@pytest.mark.parametrize(
    "space, message",
    [
        # each value a single run's check_sizes refuses: every trial that drew it failed inside Ray
        (
            {"embedding_size": {"choice": [32, 32.5]}},
            r"embedding_size: the listed value 32.5: setting embedding_size must be a whole number of at least 1 "
            r"\(e.g. 10\); remove it from embedding_size's choice list",
        ),
        (
            {"weight_decay": {"uniform": [-1, -0.5]}},
            r"weight_decay: \{uniform: \[-1, -0.5\]\} draws -1.0: setting weight_decay must be a number of at least 0 "
            r"\(e.g. 1e-6\); draw only values setting weight_decay takes",
        ),
        (
            {"learning_rate": {"choice": [0.01, 0]}},
            r"learning_rate: the listed value 0: setting learning_rate must be a number above 0 \(e.g. 0.001\)",
        ),
        # a float range over an int setting: its draws are never rounded
        (
            {"embedding_size": {"uniform": [16, 64]}},
            r"embedding_size: \{uniform: \[16, 64\]\} draws 16.0: .*whole number.*; uniform draws fractional numbers, "
            r"never rounded, .* search them with \{randint: \[16, 65\]\} \(high excluded\) or \{choice: \[...\]\}",
        ),
        ({"epochs": {"randint": [0, 5]}}, r"epochs: \{randint: \[0, 5\]\} draws 0: setting epochs must be a whole"),
        # a flag takes 0 and 1, never what a uniform draws between them
        ({"shuffle": {"uniform": [0, 1]}}, r"shuffle: \{uniform: \[0, 1\]\} draws 0.5: setting shuffle takes True or"),
    ],
)
def test_a_value_a_run_refuses_fails_before_any_trial_naming_it(tiny_data, tmp_path, space, message):
    """The space is checked by the rules a single run applies (config_check.check_sizes and its BOUNDS), for every
    listed value and both ends of a range, not only against RecBole's general types."""
    with pytest.raises(TuneSetupError, match=r"the space: " + message):
        make_request("BPR", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")


@pytest.mark.parametrize(
    "space, message",
    [
        # typed by properties/model/MGFormer.yaml (embedding_size: 64, n_heads: 1), as build_config types a run
        ({"embedding_size": {"choice": [[8]]}}, r"the listed value \[8\]: setting embedding_size takes a number"),
        ({"n_heads": {"grid": [1, None]}}, r"n_heads: the listed value None: .*not an empty value"),
    ],
)
def test_values_are_typed_by_the_models_own_defaults(tiny_data, tmp_path, space, message):
    with pytest.raises(TuneSetupError, match=message):
        make_request("MGFormer", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")


def test_spaces_within_what_a_run_takes_still_pass(tiny_data, tmp_path):
    space = {
        "embedding_size": {"randint": [1, 2]},  # draws 1 only: high is excluded
        "weight_decay": {"uniform": [0, 0.1]},  # 0 is allowed
        "learning_rate": {"loguniform": [1e-4, 1e-2]},
        "stopping_step": {"choice": [5, "10"]},  # a string read as a trial's config reads it
    }
    assert make_request("BPR", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")["space"] == space
    mgformer = {"residual_scale": {"choice": ["learned", "fixed"]}, "structural_size": {"choice": [None, 8]}}
    assert make_request("MGFormer", "tiny", mgformer, data_path=str(tiny_data), storage_dir=tmp_path / "tune")


def _run_refuses(key, value):
    """The single run's own check of ``key: value`` (check_sizes), the oracle of the property below."""
    try:
        check_sizes(SimpleNamespace(final_config_dict={key: value}))
    except ValueError:
        return True
    return False


_NUMBER = st.integers(-3, 200) | st.floats(-3, 200, allow_nan=False, allow_subnormal=False)  # a run flushes them


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from(sorted(BOUNDS)),
    name=st.sampled_from(["choice", "grid", "uniform", "loguniform", "randint"]),
    values=st.lists(_NUMBER, min_size=1, max_size=4),
    ends=st.tuples(st.integers(-3, 200), st.integers(1, 50)),
    fractional=st.booleans(),
)
def test_a_space_passes_exactly_when_every_draw_is_one_a_run_takes(key, name, values, ends, fractional):
    """Refused: the error names a value the space draws and the run refuses. Passed: every value Ray draws from it
    passes the run's check."""
    low, width = ends
    if name in ("choice", "grid"):
        args = values
    elif name == "randint":
        args = [low, low + width]
    else:
        args = [low + (0.5 if fractional else 0), low + width]
    try:
        parsed = parse_space({key: {name: args}})
    except TuneSetupError:  # not a distribution at all (loguniform's low <= 0)
        return
    try:
        check_draws(parsed, {})
    except TuneSetupError as error:
        drawn = re.search(r"(?:draws|the listed value) (.+?): setting", str(error)).group(1)
        value = ast.literal_eval(drawn)
        assert in_space(value, name, args) and _run_refuses(key, value)
        return
    domain = ray_space(parsed, "random")[key]
    draws = domain["grid_search"] if name == "grid" else domain.sample(size=50, random_state=np.random.default_rng(0))
    assert not any(_run_refuses(key, draw.item() if hasattr(draw, "item") else draw) for draw in draws)


@pytest.mark.parametrize(
    "content, message",
    [
        (
            b"learning_rate: {choice: [0.1]}\nlearning_rate: {choice: [0.2]}\n",
            r"space.yaml:2:1: key 'learning_rate' is set twice \(also on line 1\)",
        ),
        (b"learning_rate: {choice: [0.1]}  # caf\xe9\n", r"space.yaml:1: byte b'\\xe9' is not UTF-8; save the search"),
        (b"learning_rate: {choice: [0.1]\n", r"space.yaml:2:1: not valid YAML \(expected ',' or '}'"),
    ],
)
def test_a_space_file_yaml_would_misread_is_named_with_its_line(tmp_path, content, message):
    path = tmp_path / "space.yaml"
    path.write_bytes(content)
    with pytest.raises(TuneSetupError, match=rf"search space .*{message}"):
        load_space(str(path), "BPR")
    with pytest.raises(TuneSetupError, match=r"search space .* is a folder; name a YAML file in it"):
        load_space(str(tmp_path), "BPR")


def test_the_command_reports_an_invalid_space_and_starts_nothing(tiny_data, tmp_path, capsys):
    space = write_space(tmp_path, "embedding_size: {normal: [64, 8]}\n")
    code = main(tune_args("MGFormer", tmp_path, "--space", str(space), f"--data_path={tiny_data}"))
    assert code == 2
    err = capsys.readouterr().err
    assert "error: " in err and "embedding_size uses unknown distribution 'normal'" in err
    assert not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()
    assert main(["--model", "NoSuchNet", "--dataset", "tiny", f"--data_path={tiny_data}"]) == 2
    assert "unknown model 'NoSuchNet'" in capsys.readouterr().err
    assert main(["--model", "MGFormer", "--dataset", "tiny", "--space", str(tmp_path / "none.yaml")]) == 2
    assert re.search(
        r"does not exist; --space takes a YAML file's path .*without --space, a model's shipped space is searched: "
        r".*BPR, .*DirectAU, .*MGFormer",
        capsys.readouterr().err,
    )


@pytest.mark.skipif(__import__("importlib").util.find_spec("hyperopt") is not None, reason="hyperopt is installed")
def test_hyperopt_without_the_package_names_the_pip_command(tiny_data, tmp_path):
    with pytest.raises(TuneSetupError, match=re.escape("pip install hyperopt==0.2.5")):
        make_request(
            "MGFormer",
            "tiny",
            {"uniformity_weight": {"loguniform": [0.1, 5.0]}},
            data_path=str(tiny_data),
            search="hyperopt",
        )


def test_ray_temp_dir_stays_short_enough_for_its_sockets(tmp_path):
    assert default_temp_dir("/work/saved/tune") == Path("/work/saved/tune/ray-tmp")
    long_dir = default_temp_dir("/" + "x" * 80)
    assert long_dir.name == "ray-recbole-mgformer" and len(str(long_dir)) <= 40


@pytest.mark.parametrize("dataset", ["ml-100k", "amazon-beauty"])
@pytest.mark.parametrize("model", ["MGFormer", "DirectAU", "SimGCL", "XSimGCL", "SGL", "LightGCN", "BPR"])
def test_every_general_models_space_searches_d_and_stays_small(model, dataset):
    from recbole_mgformer.tune.space import load_space

    raw, _ = load_space(None, model, dataset)
    assert raw["embedding_size"] == {"choice": [32, 64, 128]} and len(raw) <= 4
    parse_space(raw)


def test_a_dataset_with_its_own_space_searches_it_and_the_others_the_common_one():
    from recbole_mgformer.tune.space import load_space, space_file

    # sparse Beauty ranks best with the SVD rank q above d (untrained valid NDCG@20 0.0409 at q 128, d 64)
    beauty, source = load_space(None, "MGFormer", "amazon-beauty")
    assert source == str(properties_dir() / "hyper" / "amazon-beauty" / "MGFormer.yaml")
    assert max(q for q in beauty["structural_size"]["choice"] if q is not None) == 128
    common, _ = load_space(None, "MGFormer", "ml-100k")
    assert max(q for q in common["structural_size"]["choice"] if q is not None) == 32
    assert space_file("BPR", "amazon-beauty") == space_file("BPR") == properties_dir() / "hyper" / "BPR.yaml"


@pytest.mark.parametrize(
    "model, key, floor",
    [
        ("MGFormer", "uniformity_weight", 0.1),
        ("DirectAU", "gamma", 0.1),
        ("SimGCL", "lambda", 0.01),
        ("XSimGCL", "lambda", 0.01),
        ("SGL", "ssl_weight", 0.005),
    ],
)
def test_sparse_beauty_keeps_each_loss_weights_floor_from_before_the_dense_widening(model, key, floor):
    # on Beauty MGFormer's draws below 0.1 failed (valid NDCG@20 0.013); every weight keeps its earlier floor alike,
    # the rest of each space is the common one
    from recbole_mgformer.tune.space import load_space

    beauty, _ = load_space(None, model, "amazon-beauty")
    common, _ = load_space(None, model)
    assert beauty[key]["loguniform"][0] == floor and common[key]["loguniform"][0] < floor
    assert list(beauty) == list(common)
    assert {k: v for k, v in beauty.items() if k not in (key, "structural_size")} == {
        k: v for k, v in common.items() if k not in (key, "structural_size")
    }


@pytest.mark.parametrize(
    "model, key, floor",
    [
        ("DirectAU", "gamma", 0.01),
        ("SimGCL", "lambda", 0.001),
        ("XSimGCL", "lambda", 0.001),
        ("SGL", "ssl_weight", 0.001),
    ],
)
def test_spaces_reach_the_weak_regularisation_dense_data_needs(model, key, floor):
    # the contrastive weights' first ml-100k searches chose values at a floor of 0.01 or 0.005
    # (results/exploration/tuning-narrow/ml-100k/): a space that ends there decides the search, not the model
    from recbole_mgformer.tune.space import load_space

    raw, _ = load_space(None, model)
    assert raw[key]["loguniform"][0] <= floor


@pytest.mark.parametrize(
    "text",
    [
        "uniformity_weight: {uniform: [0.1, .inf]}\n",
        "uniformity_weight: {loguniform: [0.1, .inf]}\n",
        "uniformity_weight: {uniform: [-.inf, 1.0]}\n",
        "uniformity_weight: {uniform: [.nan, 1.0]}\n",
        "n_heads: {randint: [1, .inf]}\n",
    ],
)
def test_a_non_finite_bound_is_an_error_naming_the_key(text, tmp_path):
    from recbole_mgformer.tune.space import load_space

    raw, source = load_space(write_space(tmp_path, text), "MGFormer")
    key = next(iter(raw))
    with pytest.raises(TuneSetupError, match=rf"{re.escape(source)}: {key}: .* takes .*; the bounds must be finite"):
        parse_space(raw, source)


def test_a_listed_value_that_is_not_finite_is_an_error_naming_the_key():
    with pytest.raises(TuneSetupError, match=r"space.yaml: uniformity_weight: inf is not a finite number"):
        parse_space({"uniformity_weight": {"choice": [0.5, float("inf")]}}, "space.yaml")


def test_a_space_value_that_is_code_fails_before_any_trial_and_never_runs(tiny_data, tmp_path, capsys):
    """A trial's values reach RecBole's Config as settings; it evaluated this one, and the trial 'succeeded'."""
    from conftest import eval_payload

    marker = tmp_path / "pwned"
    space = write_space(tmp_path, yaml.safe_dump({"learning_rate": {"choice": [eval_payload(marker)]}}))
    with pytest.raises(TuneSetupError, match=rf"{re.escape(str(space))}: setting learning_rate: .*never run as Python"):
        make_request("MGFormer", "tiny", space, data_path=str(tiny_data), storage_dir=tmp_path / "tune")
    assert main(tune_args("MGFormer", tmp_path, "--space", str(space), f"--data_path={tiny_data}")) == 2
    assert "never run as Python" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "tune").exists() and not (tmp_path / "results").exists()
    # legitimate strings (RecBole's own values, a list written as a string) still search
    assert parse_space({"feature_map": {"choice": ["elu", "relu"]}, "mlp": {"grid": ["[64,64]", "none"]}})


def test_a_default_is_in_a_space_only_as_a_value_the_distribution_draws():
    from recbole_mgformer.tune.space import in_space

    assert in_space(0.001, "choice", [0.001, 0.01]) and in_space(64, "choice", [32, 64.0])
    assert not in_space(True, "choice", [1, 2]) and not in_space(1, "choice", [True])  # a flag is no number
    assert in_space(None, "choice", [None, 8]) and in_space([128, 128], "grid", [[64], [128, 128]])
    assert not in_space([256], "choice", [[64], [128, 128]]) and not in_space("d", "choice", ["head"])
    assert in_space(0.5, "uniform", [0.1, 0.5]) and not in_space(0.0, "loguniform", [1.0e-5, 0.1])
    assert in_space(3, "randint", [1, 4]) and not in_space(4, "randint", [1, 4])
    assert not in_space(2.5, "randint", [1, 4]) and not in_space("x", "uniform", [0.0, 1.0])


@pytest.mark.parametrize(
    "listed, form",
    [
        ({"eval": "PAYLOAD"}, "eval"),  # Ray's variant generator ran it as Python when the choice drew it
        ([1, {"split": {"eval": "PAYLOAD"}}], "eval"),  # nested anywhere in the value
        ({"grid_search": [8, 16]}, "grid_search"),  # would have turned one trial into several
    ],
)
def test_a_listed_mapping_ray_would_resolve_again_is_an_error_and_never_runs(listed, form, tmp_path, capsys):
    marker = tmp_path / "pwned"
    listed = yaml.safe_load(yaml.safe_dump(listed).replace("PAYLOAD", f"__import__('builtins').open('{marker}', 'w')"))
    space = write_space(tmp_path, yaml.safe_dump({"embedding_size": {"choice": [8, listed]}}))
    with pytest.raises(TuneSetupError, match=rf"{re.escape(str(space))}: embedding_size: .*single key '{form}'"):
        parse_space(yaml.safe_load(space.read_text()), str(space))
    with pytest.raises(TuneSetupError, match="list plain values"):
        parse_space({"embedding_size": {"grid": [listed]}})
    assert not marker.exists()
    # a mapping RecBole takes as a setting is still a value to search
    assert parse_space({"eval_args": {"choice": [{"split": {"RS": [0.8, 0.1, 0.1]}, "order": "RO"}]}})
