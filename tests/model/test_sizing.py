import logging

import pytest
import torch

from recbole_mgformer.model.loss import UNIFORMITY_BLOCK_ROWS
from recbole_mgformer.model.sizing import GPU_ROW_MULTIPLE, auto_rows, block_size


def test_auto_keeps_the_cpu_size_without_a_budget_and_takes_one_block_on_a_gpu_while_it_fits():
    assert auto_rows(34464, 1000, 2048, None) == 2048
    assert auto_rows(34464, 1000, 2048, 34464 * 1000) == 34464  # exactly fits: one block
    fitting = auto_rows(34464, 1000, 2048, 34464 * 1000 - 1)  # one byte short: the whole tiles that fit
    assert fitting % GPU_ROW_MULTIPLE == 0 and fitting * 1000 <= 34464 * 1000 and fitting >= 34464 - GPU_ROW_MULTIPLE
    assert auto_rows(34464, 1000, 2048, 10) == GPU_ROW_MULTIPLE  # never less than one tile


class Config(dict):
    def __getitem__(self, key):
        return self.get(key)


def test_block_size_reads_integers_and_resolves_auto_by_device_and_logs(caplog):
    assert block_size(Config(size=0), "size", "M", 100, 8, 16, zero_means="off") == 0
    assert block_size(Config(size=5), "size", "M", 100, 8, 16) == 5
    with caplog.at_level(logging.INFO):
        assert block_size(Config(size="auto", device=torch.device("cpu")), "size", "M", 100, 8, 16) == 16
        assert block_size(Config(size="auto"), "size", "M", 100, 8, 16, memory_budget=2**20) == 100
    assert "M: size auto -> 16 (the CPU size" in caplog.text
    assert "M: size auto -> 100 (one block of 100 rows" in caplog.text


@pytest.mark.parametrize(
    "value, zero_means, message",
    [
        (0, None, "M: size must be a positive integer or auto, got 0"),
        (-1, "off", r"M: size must be a non-negative integer \(off with 0\) or auto, got -1"),
        ("big", None, "got 'big'"),
        (True, None, "got True"),
        (2.5, None, "got 2.5"),
    ],
)
def test_block_size_rejects_other_values_naming_the_option(value, zero_means, message):
    with pytest.raises(ValueError, match=message + r".*--size=\.\.\."):
        block_size(Config(size=value), "size", "M", 100, 8, 16, zero_means=zero_means)


@pytest.mark.parametrize("model", ["MGFormer", "DirectAU"])
def test_models_take_the_cpu_sizes_on_auto_and_explicit_ones_as_given(tiny_setup, model):
    _, auto, _, (train, _, _) = tiny_setup(model, precision="fp32")
    assert auto.uniformity_block_rows == UNIFORMITY_BLOCK_ROWS
    if model == "MGFormer":
        assert auto.layers[0].key_chunk_size == 2048
    chunks = ({"key_chunk_size": 1 << 20}, {"key_chunk_size": 5}) if model == "MGFormer" else ({}, {})
    _, one_block, _, _ = tiny_setup(model, precision="fp32", uniformity_block_size=1 << 20, **chunks[0])
    _, small_blocks, _, _ = tiny_setup(model, precision="fp32", uniformity_block_size=3, **chunks[1])
    assert one_block.uniformity_block_rows == 1 << 20 and small_blocks.uniformity_block_rows == 3
    batch = next(iter(train))
    # the same weights (same seed), so the block sizes change nothing but rounding
    torch.testing.assert_close(one_block.calculate_loss(batch), small_blocks.calculate_loss(batch))


@pytest.mark.parametrize(
    "model, key",
    [("MGFormer", "uniformity_block_size"), ("DirectAU", "uniformity_block_size"), ("MGFormer", "key_chunk_size")],
)
def test_models_reject_a_bad_size_naming_it(tiny_setup, model, key):
    with pytest.raises(ValueError, match=f"{model}: {key} must be .* or auto, got 'many'"):
        tiny_setup(model, **{key: "many"})
