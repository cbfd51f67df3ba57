import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.scaling import measure, power_law_graph, render, slope  # noqa: E402


def test_power_law_graph_has_the_requested_size_and_a_heavy_tail():
    n_users, n_items, users, items = power_law_graph(2000, 5, 1.0, seed=0)
    assert n_users + n_items == 2000 and len(users) == len(items) == 10000
    degrees = np.bincount(items, minlength=n_items)
    assert degrees.max() > 20 * np.median(degrees[degrees > 0])


def test_slope_recovers_a_known_power():
    records = [{"nodes": n, "t": 3 * n ** 1.5} for n in (10, 100, 1000)]
    assert slope(records, "t") == pytest.approx(1.5)


def test_measure_runs_the_linear_and_the_exact_attention():
    record = measure(600, 64, 8, exact_limit_gib=1.0, device="cpu", repeats=1)
    assert record["step_seconds"] > 0 and record["evaluation_seconds"] > 0
    assert record["exact_evaluation_seconds"] > 0 and record["peak_memory_bytes"] > 0
    text, fits = render([record, {**record, "nodes": 1200}], "provenance", "chart.png")
    assert "| 600 |" in text and "provenance" in text
