"""Claims: two benchmark processes sharing one folder never train the same run, and a killed holder frees it."""

import json
import os
import re
from pathlib import Path
from subprocess import run

import pytest
from conftest import TINY_METRICS, benchmark_args, held_elsewhere

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.claims import Busy, claim
from recbole_mgformer.benchmark.runs import Run
from recbole_mgformer.tune.records import lock_path

pytest.importorskip("fcntl")


def test_a_claim_held_elsewhere_is_busy_until_its_process_dies(tmp_path):
    path = tmp_path / "saved" / "run.lock"
    with held_elsewhere(path) as holder:
        with pytest.raises(Busy, match=re.escape(f"another process (pid {holder.pid}) holds {path}")):
            with claim(path):
                pass
    assert path.exists()  # killed, not released: its file stays, but the system dropped its lock
    with claim(path):
        assert path.read_text() == f"{os.getpid()}\n"
    assert not path.exists()  # released on leaving the block, file and all
    with claim(path):
        pass


def test_a_claim_whose_file_is_removed_by_the_holder_before_it_is_locked_takes_the_new_file(tmp_path, monkeypatch):
    # the race that removing the file opens: the next process opens the old file, the holder releases and removes it,
    # then the next process locks the removed file and a third creates and locks a new one; both would run
    path = tmp_path / "run.lock"
    path.write_text("")
    real_open = open
    raced = []

    def open_then_lose_the_race(file, *args, **kwargs):
        handle = real_open(file, *args, **kwargs)
        if not raced:
            raced.append(file)
            os.unlink(path)  # the holder's release, between this open and this lock
            path.write_text("")  # and the third process's new file
        return handle

    monkeypatch.setattr("builtins.open", open_then_lose_the_race)
    with claim(path):
        assert raced
        assert path.read_text() == f"{os.getpid()}\n"  # written to the file at the path, not the removed one
    assert not path.exists()


def test_the_benchmark_skips_a_run_another_process_trains_and_trains_it_once_free(tiny_data, tmp_path, capsys):
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS, seeds="0,1")
    runs = tmp_path / "results" / "runs" / "tiny"
    with held_elsewhere(tmp_path / "saved" / "tiny" / "bpr-seed0.lock") as holder:
        assert main(args) == 0
    out = capsys.readouterr().out
    assert f"[1/2] BPR on tiny, seed 0: skipped, another process (pid {holder.pid}) holds" in out
    assert "[1/2] BPR on tiny, seed 0: running" not in out and "[2/2] BPR on tiny, seed 1: running" in out
    assert not (runs / "bpr-seed0.json").exists() and not list((tmp_path / "saved" / "tiny").glob("bpr-seed0*.pth"))
    assert json.loads((runs / "bpr-seed1.json").read_text())["seed"] == 1  # the next run went on
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "[1/2] BPR on tiny, seed 0: test recall@20" in out and "[2/2] BPR on tiny, seed 1: record exists" in out
    assert "[2/2] BPR on tiny, seed 1: running" not in out  # a record there is no run


def test_the_claims_a_killed_run_leaves_in_the_results_folder_are_ignored_by_git():
    # a killed holder leaves its .lock file behind (harmless: flock); `git status` should not offer it for commit
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    hybrid = Run(
        "MGFormer",
        {"attention": False, "filter_residual": "bspm"},
        "yelp2018",
        0,
        runs_dir="results/runs",
        data_path=".",
    )
    left = [hybrid.record_claim_path, lock_path(Path("results/tuning/amazon-beauty/MGFormer"))]
    ignored = run(["git", "check-ignore", "--no-index", *map(str, left)], cwd=root, capture_output=True, text=True)
    assert ignored.stdout.split() == [str(path) for path in left]
