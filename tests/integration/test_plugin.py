"""RecBole's own functions (get_model, run_recbole, load_data_and_model, HyperTuning) on this project's models."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import TINY_CONFIG, write_interactions

import recbole_mgformer
from recbole_mgformer.integration.registry import get_model as project_get_model

ROOT = Path(__file__).resolve().parents[2]
PROJECT_MODELS = ["MGFormer", "SimGCL", "XSimGCL", "DirectAU", "EAGPS", "CSA", "GFCF", "BSPM", "TurboCF", "ChebyCF"]
# the training-free filters' singular vectors, fewer than the tiny dataset's 40 users
FILTER_SETTINGS = {"GFCF": {"k": 8}, "BSPM": {"factor_dim": 8}, "TurboCF": {}, "ChebyCF": {"eta": 8}}


def write_sequences(folder, name="tinyseq", n_users=24, n_items=30, length=9):
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    for user in range(n_users):
        lines += [f"u{user}\ti{(user + 2 * t) % n_items}\t{1000 * user + t}" for t in range(length)]
    (path / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


def write_context(folder, name="toyctx"):
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    users = ["user_id:token\tgender:token"] + [f"u{u}\t{'MF'[u % 2]}" for u in range(12)]
    items = ["item_id:token\tgenres:token_seq"] + [f"i{i}\t{'ab'[i % 2]} c" for i in range(10)]
    inter = ["user_id:token\titem_id:token\trating:float"]
    inter += [f"u{u}\ti{i}\t{1 + (u + 2 * i) % 5}" for u in range(12) for i in range(10)]
    for suffix, lines in (("user", users), ("item", items), ("inter", inter)):
        (path / f"{name}.{suffix}").write_text("\n".join(lines) + "\n")
    return folder


QUIET = {"show_progress": False, "state": "WARNING", "epochs": 1, "embedding_size": 8, "seed": 2020}
SEQUENTIAL = {"MAX_ITEM_LIST_LENGTH": 6, "n_heads": 2, "memory_size": 6, "prompt_size": 5, "train_batch_size": 32}
CONTEXT = {
    "load_col": {
        "inter": ["user_id", "item_id", "rating"],
        "user": ["user_id", "gender"],
        "item": ["item_id", "genres"],
    },
    "threshold": {"rating": 4},
    "normalize_all": False,
    "train_neg_sample_args": None,
    "eval_args": {"split": {"RS": [0.6, 0.2, 0.2]}, "order": "RO", "group_by": None, "mode": "labeled"},
    "metrics": ["AUC", "LogLoss"],
    "valid_metric": "AUC",
    "n_heads": 2,
    "d_ff": 16,
}


def settings_for(model, folder):
    """(dataset, config files, config dict) for a quick run of ``model`` on a small generated dataset."""
    if model == "EAGPS":
        return (
            "tinyseq",
            [str(ROOT / "properties/dataset/ml-100k-seq.yaml")],
            {  # the sequential protocol
                **QUIET,
                **SEQUENTIAL,
                "data_path": str(write_sequences(folder)),
            },
        )
    if model == "CSA":
        return "toyctx", [], {**QUIET, **CONTEXT, "data_path": str(write_context(folder))}
    return (
        "tiny",
        [],
        {**TINY_CONFIG, "epochs": 1, "data_path": str(write_interactions(folder)), **FILTER_SETTINGS.get(model, {})},
    )


@pytest.fixture(autouse=True)
def no_argv(monkeypatch):
    """RecBole's Config reads ``--key=value`` from sys.argv; pytest's own options must not leak in."""
    monkeypatch.setattr(sys, "argv", sys.argv[:1])


@pytest.mark.parametrize("name", PROJECT_MODELS)
def test_recbole_get_model_finds_every_project_model(name):
    from recbole.utils import get_model

    assert get_model(name) is project_get_model(name)
    assert get_model("BPR").__module__ == "recbole.model.general_recommender.bpr"  # RecBole's own still resolve


@pytest.mark.parametrize("name", ["SGL", "LightGCN"])
def test_recboles_model_keeps_its_name_quietly_beside_the_projects_refinement_of_it(name):
    # a fresh process: registration happens once; SGL subclasses RecBole's, LightGCN says it refines it
    code = (
        "import logging, sys; logging.basicConfig(stream=sys.stdout); import recbole_mgformer; "
        "recbole_mgformer.register(); "
        "from recbole.utils import get_model; from recbole_mgformer.integration.registry import get_model as ours; "
        f"print(get_model('{name}').__module__, ours('{name}').__module__)"
    )
    printed = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True).stdout
    assert printed.split() == [
        f"recbole.model.general_recommender.{name.lower()}",
        f"recbole_mgformer.model.general_recommender.{name.lower()}",
    ]
    assert "already has" not in printed


def test_registration_needs_neither_lightgbm_nor_xgboost_nor_ray():
    code = (
        "import sys; import recbole_mgformer; recbole_mgformer.register(); from recbole.utils import get_model; "
        f"[get_model(n) for n in {PROJECT_MODELS!r}]; "
        "bad = [m for m in ('lightgbm', 'xgboost', 'ray') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_register_is_idempotent():
    from recbole.config import Config

    hook, finders = Config._load_internal_config_dict, len(sys.meta_path)
    recbole_mgformer.register()
    recbole_mgformer.register()
    assert Config._load_internal_config_dict is hook and len(sys.meta_path) == finders


def test_recbole_config_loads_the_project_model_defaults(tiny_data):
    from recbole.config import Config

    defaults = yaml.safe_load((ROOT / "properties/model/MGFormer.yaml").read_text())
    config = Config(model="MGFormer", dataset="tiny", config_dict={"data_path": str(tiny_data), "n_layers": 3})
    assert config["uniformity_weight"] == defaults["uniformity_weight"] and config["feature_map"] == "simrf"
    assert config["n_layers"] == 3  # the user's settings still win


@pytest.mark.parametrize("name", PROJECT_MODELS)
def test_run_recbole_trains_and_load_data_and_model_reloads(tmp_path, name):
    from recbole.quick_start import load_data_and_model, run_recbole
    from recbole.utils import get_trainer

    dataset, files, settings = settings_for(name, tmp_path / "data")
    settings["checkpoint_dir"] = str(tmp_path / "saved")
    result = run_recbole(model=name, dataset=dataset, config_file_list=files, config_dict=settings)
    assert set(result) == {"best_valid_score", "valid_score_bigger", "best_valid_result", "test_result"}
    (checkpoint,) = (tmp_path / "saved").glob(f"{name}-*.pth")
    assert torch.load(checkpoint, weights_only=True)["config"]["model"] == name  # weights-only, like the runner's

    config, model, _, _, _, test_data = load_data_and_model(model_file=str(checkpoint))
    assert type(model) is project_get_model(name) and config["model"] == name
    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, model)
    reloaded = trainer.evaluate(test_data, load_best_model=False)
    assert reloaded == pytest.approx(result["test_result"])


def test_get_trainer_finds_the_project_trainer():
    from recbole.utils import ModelType, get_trainer

    from recbole_mgformer.training.trainer import CSATrainer

    assert get_trainer(ModelType.CONTEXT, "CSA") is CSATrainer


@pytest.mark.parametrize("name", PROJECT_MODELS)
def test_recbole_hyper_tuning_searches_a_project_model(tmp_path, name):
    pytest.importorskip("hyperopt")
    from recbole.quick_start import objective_function
    from recbole.trainer import HyperTuning

    dataset, files, settings = settings_for(name, tmp_path / "data")
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(
        yaml.safe_dump({**settings, "model": name, "dataset": dataset, "checkpoint_dir": str(tmp_path / "saved")})
    )
    tuner = HyperTuning(
        objective_function,
        params_dict={"choice": {"learning_rate": [0.001, 0.01]}},
        fixed_config_file_list=files + [str(fixed)],
        algo="exhaustive",
        max_evals=2,
    )
    tuner.run()
    assert len(tuner.params2result) == 2 and tuner.best_params["learning_rate"] in (0.001, 0.01)
    assert all(result["model"] == name for result in tuner.params2result.values())


def test_run_recboles_checkpoint_keeps_the_vocabularies_load_data_and_model_checks(tmp_path):
    # RecBole's own Trainer writes through this project's _save_checkpoint, and keeps the data's vocabularies too.
    from recbole.quick_start import run_recbole

    dataset, files, settings = settings_for("BPR", tmp_path / "data")
    settings["checkpoint_dir"] = str(tmp_path / "saved")
    run_recbole(model="BPR", dataset=dataset, config_file_list=files, config_dict=settings)
    (checkpoint,) = (tmp_path / "saved").glob("BPR-*.pth")
    state = torch.load(checkpoint, weights_only=True)
    assert state["model_class"] == "BPR" and len(state["vocabulary"]["users"]) > 1
