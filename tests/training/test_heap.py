import ctypes

import pytest
from conftest import faults_per_large_product

from recbole_mgformer.training.heap import keep_freed_memory

KEEP = "from recbole_mgformer.training.heap import keep_freed_memory\nassert keep_freed_memory()"


def test_a_kept_heap_reuses_a_large_block_instead_of_faulting_its_pages_again():
    assert faults_per_large_product("") > 5000  # ~10,000 4 KiB pages, mapped anew each time
    assert faults_per_large_product(KEEP) < 100


@pytest.mark.parametrize("value", [False, 0])
def test_keep_freed_memory_false_leaves_the_c_library_alone(monkeypatch, value):
    def refuse(*args):
        raise AssertionError("the C library was loaded")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    assert keep_freed_memory({"keep_freed_memory": value}) is False
