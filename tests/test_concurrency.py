"""Two processes of each writing command on the same target, released together at the point just before they write:
both succeed with distinct results, or exactly one refuses; nothing is silently replaced, nothing is half written."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import TINY_METRICS, benchmark_args, write_interactions
from test_recommend import checkpoints  # noqa: F401 -- the module's tiny MGFormer and BPR checkpoints

# A barrier between the two processes: each marks that it is here (or, at exit, gone: it stopped before this point)
# and waits for the other, so both pass every check before either writes.
BARRIER = """
import atexit, os, sys, time
from pathlib import Path

BARRIER = Path(sys.argv[1])


def mark(kind):
    (BARRIER / f"{kind}-{os.getpid()}").touch()


def together():
    mark("here")
    deadline = time.monotonic() + 120
    while len({path.name.split("-", 1)[1] for path in BARRIER.iterdir()}) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)


atexit.register(mark, "gone")
"""

# ``main(argv)`` of a command module, its function ``module:attribute`` made to wait at the barrier first.
COMMAND = (
    BARRIER
    + """
import importlib

module_name, _, attribute = sys.argv[2].partition(":")
owner = importlib.import_module(module_name)
*path, name = attribute.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, name)


def synchronised(*args, **kwargs):
    together()
    return original(*args, **kwargs)


setattr(owner, name, synchronised)
sys.exit(importlib.import_module(module_name).main(sys.argv[3:]))
"""
)

# write_record of a record naming this process, as a new record or replacing (argv: barrier, path, overwrite).
RECORD = (
    BARRIER
    + """
from recbole_mgformer.records import write_record

together()
try:
    write_record(sys.argv[2], {"pid": os.getpid(), "rows": list(range(20000))}, overwrite=sys.argv[3] == "yes")
except FileExistsError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
print(f"wrote {os.getpid()}")
"""
)


def both(tmp_path, script, *argvs):
    """``[(exit status, stdout, stderr, pid)]`` of two processes of ``script``, one per argv, met at its barrier."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(barrier), *argv],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    finished = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        finished.append((process.returncode, out, err, process.pid))
    assert [path.name.split("-")[0] for path in barrier.iterdir()].count("here") == 2, "one never reached the write"
    return finished


def one_wrote_one_refused(outcomes, refusal):
    """The outcome that wrote; the other ended with ``error: ... refusal`` and exit status 2."""
    assert sorted(status for status, *_ in outcomes) == [0, 2], [err[-2000:] for *_, err, _ in outcomes]
    (winner,) = [outcome for outcome in outcomes if outcome[0] == 0]
    (loser,) = [outcome for outcome in outcomes if outcome[0] == 2]
    assert "wrote" in winner[1] and "wrote" not in loser[1]
    assert refusal in loser[2] and "Traceback" not in loser[2]
    return outcomes.index(winner)


def leftovers(folder, *expected):
    return sorted(path.name for path in folder.iterdir() if path.name not in ("barrier", *expected))


# Each process of a command imports torch and RecBole (about 6 CPU seconds): the cases beyond the issue's own (two
# --output runs without --overwrite) run with the slow tests.
SLOW = pytest.mark.slow


@pytest.mark.parametrize("overwrite", [False, pytest.param(True, marks=SLOW)])
def test_two_recommend_outputs_to_one_file(checkpoints, tmp_path, overwrite):  # noqa: F811
    output = tmp_path / "top.csv"
    argvs = [
        ["recbole_mgformer.recommend:rank", "--checkpoint", str(checkpoints["BPR"]), "--users", user, "--k", "7"]
        + ["--output", str(output)]
        + (["--overwrite"] if overwrite else [])
        for user in ("u1", "u2")
    ]
    outcomes = both(tmp_path, COMMAND, *argvs)
    rows = list(csv.DictReader(output.open()))
    users = {row["user"] for row in rows}
    assert len(rows) == 7 and len(users) == 1  # one run's rows, whole
    if overwrite:  # both asked to replace: both wrote, the file is the one written last
        assert [status for status, *_ in outcomes] == [0, 0], [err[-2000:] for *_, err, _ in outcomes]
    else:
        winner = one_wrote_one_refused(outcomes, f"--output {output}: the file exists (written by another run")
        assert users == {("u1", "u2")[winner]}
    assert leftovers(tmp_path, "top.csv") == []


@SLOW
@pytest.mark.parametrize("overwrite", [False, True])
def test_two_embedding_exports_to_one_folder(checkpoints, tmp_path, overwrite):  # noqa: F811
    folder = tmp_path / "vectors"
    if overwrite:
        folder.mkdir()
        (folder / "README.md").write_text("my notes\n")
    models = ("MGFormer", "BPR")  # of other widths: a mix of the two runs' files shows
    argvs = [
        ["recbole_mgformer.recommend:representations", "--checkpoint", str(checkpoints[model])]
        + ["--export-embeddings", str(folder)]
        + (["--overwrite"] if overwrite else [])
        for model in models
    ]
    outcomes = both(tmp_path, COMMAND, *argvs)
    meta = json.loads((folder / "meta.json").read_text())
    users, items = np.load(folder / "users.npy"), np.load(folder / "items.npy")
    assert users.shape[1] == items.shape[1] == meta["dimension"] and meta["dot_product_scores"] is True
    if overwrite:
        assert [status for status, *_ in outcomes] == [0, 0], [err[-2000:] for *_, err, _ in outcomes]
        assert (folder / "README.md").read_text() == "my notes\n"
    else:
        winner = one_wrote_one_refused(outcomes, f"--export-embeddings {folder}: the folder is not empty")
        assert meta["model"] == models[winner]
    assert leftovers(tmp_path, "vectors") == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_two_records_of_one_name(tmp_path, overwrite):
    path = tmp_path / "runs" / "bpr-seed0.json"
    outcomes = both(tmp_path, RECORD, *[[str(path), "yes" if overwrite else "no"]] * 2)
    record = json.loads(path.read_text())  # whole, one writer's
    if overwrite:  # a run updating its own record: the last write stands
        assert [status for status, *_ in outcomes] == [0, 0] and record["pid"] in [pid for *_, pid in outcomes]
    else:
        winner = one_wrote_one_refused(outcomes, f"{path}: another process wrote this record while this one ran")
        assert record["pid"] == outcomes[winner][3]
    assert leftovers(path.parent, "bpr-seed0.json") == []


@SLOW
def test_two_benchmarks_into_one_results_folder_train_a_run_once(tmp_path):
    # each with its own checkpoint folder: the claim beside the checkpoints alone let both train
    data = write_interactions(tmp_path / "data")
    argvs = []
    for name in ("first", "second"):
        args = benchmark_args("BPR", data, tmp_path, "--epochs=1", *TINY_METRICS)
        args[args.index("--checkpoint_dir") + 1] = str(tmp_path / name)
        argvs.append(["recbole_mgformer.benchmark.runs:Run.execute", *args])
    script = COMMAND.replace(
        "importlib.import_module(module_name).main", "importlib.import_module('recbole_mgformer.benchmark').main"
    )
    outcomes = both(tmp_path, script, *argvs)
    assert [status for status, *_ in outcomes] == [0, 0], [err[-2000:] for *_, err, _ in outcomes]
    skipped = ["BPR on tiny, seed 0: skipped, another process" in out for _, out, *_ in outcomes]
    assert sorted(skipped) == [False, True]
    trained = ("first", "second")[skipped.index(False)]
    assert [bool(list((tmp_path / name).rglob("*.pth"))) for name in ("first", "second")] == [
        name == trained for name in ("first", "second")
    ]
    runs = tmp_path / "results" / "runs" / "tiny"
    assert sorted(path.name for path in runs.iterdir()) == ["bpr-seed0.json", "bpr-seed0.users.json.gz"]
