"""docs/adding-a-model.md followed as written: its files, each put where the page says in a copy of the checkout,
pass their own tests, and the page's commands (on a generated dataset instead of ml-100k) train the model, search it
and render its row."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_interactions

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "adding-a-model.md"
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", re.S)
COMMANDS_BLOCK = re.compile(r"<!-- commands -->\n```bash\n(.*?)```", re.S)
MODEL_FILE = "recbole_mgformer/model/general_recommender/uniformmf.py"
MODEL_TESTS = "tests/model/general_recommender/test_uniformmf.py"
PAGE_FILES = {
    MODEL_FILE,
    "properties/model/UniformMF.yaml",
    "properties/hyper/UniformMF.yaml",
    MODEL_TESTS,
}
# what the copy of the checkout needs: the package, its YAML files, the entry point, the test settings and fixtures
CHECKOUT = ("recbole_mgformer", "properties", "run.py", "pyproject.toml", "tests/conftest.py")


def page_files():
    """``{path in the checkout: text}``: each fenced block the page marks with ``<!-- file: path -->``."""
    return dict(FILE_BLOCK.findall(PAGE.read_text()))


def page_commands():
    return [shlex.split(line) for line in COMMANDS_BLOCK.search(PAGE.read_text()).group(1).splitlines() if line]


def test_the_page_gives_the_model_its_defaults_space_and_tests_and_four_commands():
    files = page_files()
    assert set(files) == PAGE_FILES
    assert len(files[MODEL_FILE].splitlines()) < 60
    for path in files:  # the example is the page's, not one of the package's models
        assert not (ROOT / path).exists(), path
    commands = [" ".join(argv) for argv in page_commands()]
    assert len(commands) == 4
    for command, word in zip(commands, ["run.py", "recbole_mgformer.tune", "--models", "--render-only"]):
        assert word in command


def checkout_with_the_pages_files(folder):
    """A copy of the checkout with the page's files written where it says."""
    for name in CHECKOUT:
        source, target = ROOT / name, folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("log", "saved"))
        else:
            shutil.copy2(source, target)
    for path, text in page_files().items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def on_generated_data(argv, checkout, data):
    """A page's command as run here: this interpreter, the copy's run.py, and the generated dataset for ml-100k."""
    command = [sys.executable if arg == ".venv/bin/python" else arg for arg in argv]
    command = [str(checkout / "run.py") if arg == "run.py" else arg for arg in command]
    command = [re.sub(r"^(--dataset=)?ml-100k$", r"\1tiny", arg) for arg in command]
    return [*command, f"--data_path={data}"]


@pytest.mark.slow
def test_the_pages_model_added_as_written_passes_its_tests_trains_searches_and_renders_its_row(tmp_path):
    checkout = checkout_with_the_pages_files(tmp_path / "checkout")
    data = write_interactions(tmp_path / "data")  # data/tiny/tiny.inter: 40 users, 60 items
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(checkout)}

    def run(argv, cwd):
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(argv)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr

    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", MODEL_TESTS], checkout)
    assert "3 passed" in tests

    work = tmp_path / "work"
    work.mkdir()
    outputs = [run(on_generated_data(argv, checkout, data), work) for argv in page_commands()]
    assert "ndcg@20" in outputs[0]
    search = (work / "tuning" / "UniformMF-tiny.md").read_text()
    assert len([line for line in search.splitlines() if re.match(r"\| \d+ \|.*\| completed \|", line)]) == 2
    assert (work / "try" / "runs" / "tiny" / "uniformmf-seed0.json").is_file()
    board = (work / "try" / "tiny" / "leaderboard.md").read_text()
    assert re.search(r"^\| UniformMF \|.*\[record\]\(\.\./runs/tiny/uniformmf-seed0\.json\) \|$", board, re.M), board
    assert not any((ROOT / path).exists() for path in PAGE_FILES)  # nothing written into the repository
