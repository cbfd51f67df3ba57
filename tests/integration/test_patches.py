"""recbole_mgformer.register(): every patch of RecBole from one declared list, applied once, by every entry point and
never by an import."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import recbole_mgformer
from recbole_mgformer.integration import compat, patches

ROOT = Path(__file__).resolve().parents[2]


def test_every_patch_names_what_it_patches_the_lines_it_replaces_and_its_versions():
    names = [patch.name for patch in patches.PATCHES]
    assert len(names) == len(set(names))
    for patch in patches.PATCHES:
        assert patch.patches and patch.versions and callable(patch.apply) and callable(patch.needed)
        assert re.search(r"\.py:\d+", patch.replaces), patch.name  # a RecBole file:line


def test_the_repairs_apply_only_where_their_breakage_is_and_everything_else_everywhere():
    applied = recbole_mgformer.register()
    repairs = set(compat.NEEDED)
    assert {name for name in applied if name in repairs} == {name for name, needed in compat.NEEDED.items() if needed}
    assert [name for name in applied if name not in repairs] == [
        patch.name for patch in patches.PATCHES if patch.name not in repairs
    ]


def test_register_applies_each_patch_once():
    assert recbole_mgformer.register() == recbole_mgformer.register() == patches.APPLIED


def test_importing_every_module_registers_nothing():
    code = """
import importlib, pkgutil, sys
import recbole_mgformer
from recbole_mgformer.integration import patches
for info in pkgutil.walk_packages(recbole_mgformer.__path__, "recbole_mgformer."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
import recbole.trainer
from recbole.config import Config
assert patches.APPLIED == [], patches.APPLIED
assert Config._load_internal_config_dict.__module__ == "recbole.config.configurator"
assert not hasattr(recbole.trainer, "CSATrainer")
assert "recbole.model.general_recommender.mgformer" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.fixture
def registrations(monkeypatch):
    """The entry points' calls to register, counted by a stand-in list of one patch."""
    calls = []
    spy = patches.Patch("spy", "nothing", "none.py:0", "every version", lambda: calls.append(True))
    monkeypatch.setattr(patches, "PATCHES", (spy,))
    monkeypatch.setattr(patches, "APPLIED", [])
    return calls


def entry_points(tmp_path):
    """Each entry point, called so that it stops at bad input right after registering."""
    from recbole_mgformer import cli, quick_start

    # the module, not the package's function of the same name (importing the module replaces that attribute)
    recommend = importlib.import_module("recbole_mgformer.recommend")
    from recbole_mgformer import tune as tuning
    from recbole_mgformer.benchmark import main as benchmark

    missing = str(tmp_path / "missing.pth")
    return {
        "run.py": lambda: cli.main(["--model=NoSuchModel", "--dataset=tiny"]),
        "run_recommender": lambda: quick_start.run_recommender("NoSuchModel", "tiny"),
        "build_config": lambda: quick_start.build_config("NoSuchModel", "tiny"),
        "recommend": lambda: recommend.recommend(missing, ["u1"]),
        "recommend command": lambda: recommend.main(["--checkpoint", missing, "--users", "u1"]),
        "tune": lambda: tuning.main(["--model", "NoSuchModel", "--dataset", "tiny"]),
        "benchmark": lambda: benchmark(["--models", "NoSuchModel", "--datasets", "tiny"]),
    }


@pytest.mark.parametrize(
    "name",
    [
        "run.py",
        "run_recommender",
        "build_config",
        "recommend",
        "recommend command",
        "tune",
        "benchmark",
    ],
)
def test_each_entry_point_registers(registrations, tmp_path, name):
    try:
        entry_points(tmp_path)[name]()
    except (SystemExit, ValueError, FileNotFoundError, OSError):
        pass  # the bad input, refused after registering
    assert registrations == [True]


def test_rendering_the_boards_registers_nothing(registrations, tmp_path):
    from recbole_mgformer.benchmark import main as benchmark

    benchmark(["--render-only", "--results", str(tmp_path / "results")])
    assert registrations == []
