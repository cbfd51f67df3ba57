"""Shared by the tests that run a script of experiments/ end to end on the toy dataset."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# two epochs of small models, scored as the boards score: enough to write every record a script writes
TINY_OPTIONS = (
    "--epochs=2",
    "--embedding_size=8",
    "--state=WARNING",
    "--metrics=[Recall,NDCG]",
    "--topk=[20]",
    "--valid_metric=NDCG@20",
)


@pytest.fixture
def run_script(tiny_data, tmp_path):
    """``run(name, **environment)``: runs ``experiments/<name>`` from a copy in tmp_path (a script works from the
    folder above its own, where RecBole's log/ lands) on the toy dataset, its results under tmp_path/results and its
    checkpoints under tmp_path/saved; asserts that it succeeded and returns the finished process."""

    def run(name, **environment):
        (tmp_path / "experiments").mkdir(exist_ok=True)
        shutil.copy(ROOT / "experiments" / name, tmp_path / "experiments")
        env = {
            **os.environ,
            "PYTHON": sys.executable,
            "PYTHONPATH": str(ROOT),
            "DATASET": "tiny",
            "RESULTS": str(tmp_path / "results"),
            "CHECKPOINTS": str(tmp_path / "saved"),
            **environment,
        }
        command = ["bash", str(tmp_path / "experiments" / name), "--data_path", str(tiny_data), *TINY_OPTIONS]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    return run
