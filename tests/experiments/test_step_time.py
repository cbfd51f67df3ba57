import functools
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.step_time import step_flops, train_step  # noqa: E402


def first_batch(trainer, train_data):
    return next(iter(train_data)).to(trainer.device)


@pytest.mark.parametrize(
    "options", [{}, {"value_projection": True}, {"degree_gate": True, "n_layers": 2}, {"degree_mask": "adjacency"}]
)
def test_step_flops_count_the_eager_step_of_every_layer_kind(tiny_setup, options):
    # value_projection and degree_gate wrap each layer in an AttentionBlock: its inner layer is the one to count
    _, model, trainer, (train_data, _, _) = tiny_setup(compile=False, **options)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0)  # lr 0: both counts see the same weights
    batch = first_batch(trainer, train_data)
    inner = [getattr(layer, "attention", layer) for layer in model.layers]
    for layer in inner:  # stand-ins for compiled functions: step_flops swaps in the eager ones, then puts these back
        layer.mix, layer.mix_edges = functools.partial(layer._mix), functools.partial(layer._mix_edges)
    kept = [(layer.mix, layer.mix_edges, layer.chunk_functions) for layer in inner]
    counted = step_flops(model, optimizer, batch)
    assert all(
        layer.mix is mix and layer.mix_edges is mix_edges and layer.chunk_functions is functions
        for layer, (mix, mix_edges, functions) in zip(inner, kept)
    )
    with FlopCounterMode(display=False) as counter:
        train_step(model, optimizer, batch)
    assert counted == counter.get_total_flops() > 0


def test_the_value_projection_adds_its_matmuls_to_the_count(tiny_setup):
    counts = {}
    for value_projection in (False, True):
        _, model, trainer, (train_data, _, _) = tiny_setup(compile=False, value_projection=value_projection)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.0)
        counts[value_projection] = step_flops(model, optimizer, first_batch(trainer, train_data))
    assert counts[True] > counts[False]
