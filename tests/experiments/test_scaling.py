import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.scaling import matmul_throughput, measure, power_law_graph, render, slope, step_flops  # noqa: E402


def test_power_law_graph_has_the_requested_size_and_a_heavy_tail():
    n_users, n_items, users, items = power_law_graph(2000, 5, 1.0, seed=0)
    assert n_users + n_items == 2000 and len(users) == len(items) == 10000
    degrees = np.bincount(items, minlength=n_items)
    assert degrees.max() > 20 * np.median(degrees[degrees > 0])


def test_slope_recovers_a_known_power():
    records = [{"nodes": n, "t": 3 * n**1.5} for n in (10, 100, 1000)]
    assert slope(records, "t") == pytest.approx(1.5)


def test_measure_runs_the_linear_and_the_exact_attention():
    record = measure(600, 64, 8, exact_limit_gib=1.0, device="cpu", repeats=1)
    assert record["step_seconds"] > 0 and record["evaluation_seconds"] > 0
    assert record["exact_evaluation_seconds"] > 0 and record["peak_memory_bytes"] > 0
    text, fits = render([record, {**record, "nodes": 1200}], "provenance", "chart.png", peak_flops=1e12)
    assert "| 600 |" in text and "provenance" in text and "of 1000.0 GFLOP/s" in text


def test_step_flops_equal_torchs_count_of_the_step():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from recbole_mgformer.model.loss import directau_loss
    from recbole_mgformer.model.mgformer.attention import masked_kernel_attention
    from recbole_mgformer.model.mgformer.feature_maps import apply_feature_map, draw_projection

    n, width, batch = 500, 16, 24
    x = torch.randn(n, width, requires_grad=True)
    w_q, w_k = torch.randn(width, width, requires_grad=True), torch.randn(width, width, requires_grad=True)
    z, queries = torch.rand(n), torch.randint(0, n, (2 * batch,))
    projection = draw_projection("simrf", width, width, torch.Generator().manual_seed(0))[None]
    with FlopCounterMode(display=False) as counter:
        phi_q = apply_feature_map("simrf", (x[queries] @ w_q)[None], projection, is_query=True)
        phi_k = apply_feature_map("simrf", (x @ w_k)[None], projection, is_query=False)
        out = masked_kernel_attention(phi_q, phi_k, x[None], z[queries], z)[0]
        directau_loss(*out.split(batch), 0.3).backward()
    assert counter.get_total_flops() == step_flops(n, batch, width)


def test_matmul_throughput_is_a_plausible_rate():
    assert 1e8 < matmul_throughput("cpu", size=256, repeats=2) < 1e14
