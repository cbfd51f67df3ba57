"""A search's plain-data records (``recbole_mgformer.tune.records``): what a record must be to be read back, the
request claimed by one search only, and one command at a time on a search."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recbole_mgformer.tune.records import (
    REQUEST_FILE,
    claim_request,
    lock_path,
    read_trial_records,
    search_digest,
    search_lock,
    write_trial_record,
)
from recbole_mgformer.tune.space import TuneSetupError

SPACE = {"learning_rate": {"choice": [0.01, 0.001]}, "embedding_size": {"choice": [8, 16]}}


@pytest.fixture
def search(tmp_path):
    return {"experiment": str(tmp_path / "tune" / "BPR-tiny"), "model": "BPR", "dataset": "tiny", "space": SPACE}


def good_record(request, index=0, **changes):
    return {
        "index": index,
        "trial": f"abc_{index:05d}",
        "search": search_digest(request),
        "status": "completed",
        "score": 0.12,
        "epochs": 1,
        "valid": {"ndcg@20": 0.12},
        "params": {"learning_rate": 0.01, "embedding_size": 8},
        "error": None,
        "results": [[1, 0.12]],
        "defaults": False,
        **changes,
    }


def test_a_written_record_reads_back_as_it_was_and_is_never_replaced(search):
    written = write_trial_record(search["experiment"], good_record(search, 3))
    assert written.name == "0003.json"
    assert read_trial_records(search["experiment"], search) == {3: good_record(search, 3)}
    with pytest.raises(FileExistsError):
        write_trial_record(search["experiment"], good_record(search, 3, score=0.5))
    assert read_trial_records(search["experiment"], search)[3]["score"] == 0.12


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: {**r, "search": "0" * 16}, "belongs to another search"),
        (lambda r: {**r, "index": 4}, "its index 4 does not match its file name"),
        (lambda r: {**r, "status": "running"}, "status 'running' is none of completed, stopped early, failed"),
        (lambda r: {**r, "params": {"learning_rate": 0.01}}, "are not one value for each searched key"),
        (lambda r: {**r, "score": "0.9"}, "score '0.9' is not a finite number"),
        (lambda r: {**r, "results": [[1, "x"]]}, "results must be"),
        (lambda r: {**r, "valid": {"ndcg@20": None}}, "valid must map metric names to finite numbers"),
        (
            lambda r: {**r, "params": {"learning_rate": "__import__('os').getcwd() and 0.01", "embedding_size": 8}},
            "setting learning_rate: .*never run as Python",
        ),
    ],
)
def test_an_edited_record_is_refused_naming_its_file(search, edit, message):
    path = write_trial_record(search["experiment"], good_record(search))
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    with pytest.raises(TuneSetupError, match=rf"0000.json: .*{message}.*(move the file away|another --name)"):
        read_trial_records(search["experiment"], search)


@pytest.mark.parametrize("text", ['{"index": 0, "score": NaN}', "[1, 2]", "{not json", ""])
def test_a_record_that_is_not_a_json_object_is_refused(search, text):
    path = write_trial_record(search["experiment"], good_record(search))
    path.write_text(text)
    with pytest.raises(TuneSetupError, match=r"0000.json: (cannot read a trial record|a trial record must be)"):
        read_trial_records(search["experiment"], search)


def test_only_one_search_claims_a_folder(search):
    claim_request(search)
    stored = Path(search["experiment"]) / REQUEST_FILE
    assert json.loads(stored.read_text())["model"] == "BPR"
    with pytest.raises(TuneSetupError, match="already holds a search; --resume continues it"):
        claim_request({**search, "model": "LightGCN"})
    assert json.loads(stored.read_text())["model"] == "BPR"
    assert [p.name for p in stored.parent.iterdir()] == [REQUEST_FILE]  # no temporary left behind


def test_a_second_claim_on_a_search_is_refused_until_the_first_ends(search):
    with search_lock(search["experiment"]):
        with pytest.raises(TuneSetupError, match=r"another tune command \(pid \d+ on .*\) is running the search at"):
            with search_lock(search["experiment"]):
                pass
    with search_lock(search["experiment"]):  # released: taken again
        pass
    assert not lock_path(search["experiment"]).exists()


HOLD = """
import sys, time
from recbole_mgformer.tune.records import search_lock
with search_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_search_held_by_another_process_is_refused_and_free_once_it_is_killed(search):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, search["experiment"]], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TuneSetupError, match=rf"\(pid {holder.pid} on .*\) is running the search"):
            with search_lock(search["experiment"]):
                pass
    finally:
        holder.kill()  # as a lost machine: its lock file stays behind, its lock does not
        holder.wait()
    assert lock_path(search["experiment"]).exists()
    with search_lock(search["experiment"]):
        pass
