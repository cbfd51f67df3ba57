"""The package works from a non-editable install: properties/ ships inside the wheel."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("recbole_mgformer-*.whl"))


def test_wheel_ships_every_package_and_property_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for source in (ROOT / "recbole_mgformer").rglob("*.py"):
        assert f"recbole_mgformer/{source.relative_to(ROOT / 'recbole_mgformer').as_posix()}" in names
    for yaml_file in (ROOT / "properties").rglob("*.yaml"):
        assert f"recbole_mgformer/properties/{yaml_file.relative_to(ROOT / 'properties').as_posix()}" in names


def install(wheel, target):
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)]
    subprocess.run(command, check=True, capture_output=True)
    return target


def test_installed_copy_finds_its_own_properties(wheel, tmp_path):
    target = install(wheel, tmp_path / "site")
    code = (
        "from recbole_mgformer.config.defaults import model_config_file, properties_dir; "
        "import recbole_mgformer; print(recbole_mgformer.__file__); print(properties_dir()); "
        "print(model_config_file('MGFormer'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    assert all(line.startswith(str(target)) for line in out), out
    assert out[2].endswith("recbole_mgformer/properties/model/MGFormer.yaml")


@pytest.mark.slow
def test_installed_copy_renders_every_board_from_outside_the_checkout(wheel, tmp_path):
    """Nothing the benchmark reads or names comes from the source checkout: the installed copy, run elsewhere on a
    copy of results/, renders every page as committed."""
    target = install(wheel, tmp_path / "site")
    results = tmp_path / "elsewhere" / "results"
    shutil.copytree(ROOT / "results", results)
    tables = sorted(results.rglob("leaderboard.md")) + sorted(results.rglob("popularity.md"))
    for table in tables:
        table.write_text("stale\n")
    code = (
        "import runpy, sys, recbole_mgformer; "
        f"assert recbole_mgformer.__file__.startswith({str(target)!r}), recbole_mgformer.__file__; "
        f"sys.argv = ['recbole-mgformer-benchmark', '--render-only', '--results', {str(results)!r}]; "
        "runpy.run_module('recbole_mgformer.benchmark', run_name='__main__')"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "MPLCONFIGDIR": str(tmp_path / "mpl")},
    )
    assert tables
    for table in tables:
        assert table.read_text() == (ROOT / "results" / table.relative_to(results)).read_text(), table
