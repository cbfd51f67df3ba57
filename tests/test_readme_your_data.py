"""README's "Bring your own data" commands, run exactly as written (the interpreter and run.py's path aside) on a
generated CSV: header, extra columns, ISO dates, shuffled rows."""

import csv
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Bring your own data") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line) for line in block.splitlines() if line.strip()]


def write_interactions(path, users=30, items=40, per_user=12, seed=0):
    """Users prefer the items of their own group, so a model learns; rows shuffled, with a rating, an ISO date and
    two extra columns."""
    rng = random.Random(seed)
    rows = []
    for user in range(1, users + 1):
        liked = [item for item in range(items) if item % 3 == user % 3]
        for item in rng.sample(liked, per_user):
            day = rng.randrange(1, 28)
            rows.append([f"u{user}", f"i{item}", rng.choice([3, 4, 5]), f"2024-03-{day:02d}T12:00:00", "web", 0.5])
    rng.shuffle(rows)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user", "item", "rating", "timestamp", "channel", "price"])
        writer.writerows(rows)


def as_run_here(argv):
    """The README's ``.venv/bin/python`` is this interpreter; ``run.py`` is the checkout's."""
    command = [sys.executable if arg == ".venv/bin/python" else arg for arg in argv]
    return [str(ROOT / "run.py") if arg == "run.py" else arg for arg in command]


def test_the_readme_names_five_commands_import_train_tune_recommend_export():
    commands = [" ".join(argv) for argv in readme_commands()]
    assert len(commands) == 5
    for command, word in zip(commands, ["importer", "run.py", "tune", "--users", "--export-embeddings"]):
        assert word in command


@pytest.mark.slow
def test_the_readmes_own_data_commands_run_as_written_on_a_generated_csv(tmp_path):
    write_interactions(tmp_path / "interactions.csv")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    outputs = []
    for argv in readme_commands():
        done = subprocess.run(as_run_here(argv), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{' '.join(argv)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout + done.stderr)
    imported = (tmp_path / "dataset" / "mine" / "mine.inter").read_text().splitlines()
    assert imported[0].split("\t")[:4] == ["user_id:token", "item_id:token", "rating:float", "timestamp:float"]
    assert len(imported) == 1 + 30 * 12
    assert "ndcg@20" in outputs[1] and "checkpoint" in outputs[1]  # the protocol's metrics, and where it saved
    assert list((tmp_path / "tuning").glob("MGFormer-mine.*"))
    best = yaml.safe_load((tmp_path / "tuning" / "MGFormer-mine.yaml").read_text())
    assert best and "epochs" not in best  # the searched settings only, never the search's epoch cap
    assert outputs[3].count("u1 ") + outputs[3].count("u2 ") >= 10  # five items for each of the two users
    assert sorted(p.name for p in (tmp_path / "vectors").iterdir())
