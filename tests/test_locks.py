"""The advisory lock that claims (benchmark runs) and search locks (tuning) are both made of."""

import os

import pytest
from conftest import held_elsewhere

from recbole_mgformer.locks import lock_file

pytest.importorskip("fcntl")


class Taken(RuntimeError):
    pass


def test_the_lock_writes_its_holder_line_and_goes_with_its_file_when_the_block_ends(tmp_path):
    path = tmp_path / "deeper" / "search.lock"  # its folder is made
    with lock_file(path, "pid 7 on here", Taken):
        assert path.read_text() == "pid 7 on here\n"
    assert not path.exists()
    with lock_file(path, 8, Taken):  # free again; any holder becomes its line
        assert path.read_text() == "8\n"


def test_a_lock_held_by_another_process_raises_what_busy_makes_of_its_holder_line(tmp_path):
    path = tmp_path / "run.lock"
    with held_elsewhere(path) as holder:  # a claim: its line is the holder's pid
        with pytest.raises(Taken, match=f"^{holder.pid}$"):
            with lock_file(path, "me", Taken):
                pass
    with lock_file(path, "me", Taken):  # the holder was killed: the system dropped its lock
        assert path.read_text() == "me\n"


def test_a_lock_held_in_this_process_cannot_be_taken_twice(tmp_path):
    path = tmp_path / "run.lock"
    with lock_file(path, os.getpid(), Taken):
        with pytest.raises(Taken):
            with lock_file(path, os.getpid(), Taken):
                pass
