import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from recbole_mgformer.training.heap import keep_freed_memory

ROOT = Path(__file__).resolve().parents[2]
CHILD = f"""
import resource, sys, torch
sys.path.insert(0, {str(ROOT)!r})
from recbole_mgformer.training.heap import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
x = torch.ones(2048, 2, 50, 50)  # 41 MB, above glibc's largest default mmap threshold
for _ in range(24):  # the first ones grow the heap
    torch.mul(x, 2.0)
faults = []
for _ in range(9):  # the median product's faults: a neighbour's memory pressure can fault a few in any one
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.mul(x, 2.0)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(faults)[4])
"""


def faults_per_product(setting):
    run = subprocess.run([sys.executable, "-c", CHILD, setting], capture_output=True, text=True, check=True)
    return float(run.stdout.split()[-1])


def test_a_kept_heap_reuses_a_large_block_instead_of_faulting_its_pages_again():
    assert faults_per_product("released") > 5000  # ~10,000 4 KiB pages, mapped anew each time
    assert faults_per_product("kept") < 100


@pytest.mark.parametrize("value", [False, 0])
def test_keep_freed_memory_false_leaves_the_c_library_alone(monkeypatch, value):
    def refuse(*args):
        raise AssertionError("the C library was loaded")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    assert keep_freed_memory({"keep_freed_memory": value}) is False
