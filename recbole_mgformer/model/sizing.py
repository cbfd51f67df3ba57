"""``auto`` sizes for the blocked parts of a training step: the fused key side's rows per chunk (``key_chunk_size``)
and the uniformity loss's rows per block (``uniformity_block_size``).

Why by device: on a CPU a block sized for the cache is fastest (its elementwise passes stay in L2; measured in
``results/performance/``), so ``auto`` keeps the CPU sizes. On a GPU every block is a handful of kernel launches
whatever its size, and a step of small blocks is bound by launches, not arithmetic (counted in
``results/performance/launch_census.md``), so ``auto`` takes all rows in one block while the block's
temporaries fit in a share of the device's memory, and else the most rows that do.
"""

import logging
import numbers

import psutil
import torch

from recbole_mgformer.model.loss import UNIFORMITY_BLOCK_ROWS, uniformity_bytes_per_row

AUTO = "auto"
# The share of the GPU's memory one block's temporaries may take: the rest holds the model, Adam's state,
# what autograd keeps, and the other blocked part of the step.
GPU_MEMORY_SHARE = 0.25
# With more rows than fit, blocks are a multiple of this many rows (whole tiles for the matmul kernels).
GPU_ROW_MULTIPLE = 1024


def device_memory_budget(device):
    """Bytes one block may take on ``device``: a share of a CUDA device's memory, None elsewhere (sized for cache)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return int(GPU_MEMORY_SHARE * torch.cuda.get_device_properties(index).total_memory)


def available_memory(device):
    """Bytes free on ``device`` now: a CUDA device's free memory, else the machine's available memory."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return psutil.virtual_memory().available


def auto_rows(total_rows, bytes_per_row, cpu_rows, memory_budget):
    """Rows per block for ``auto``: ``cpu_rows`` without a budget (a CPU); else all ``total_rows`` in one block
    when they fit in ``memory_budget`` bytes, or the most whole tiles that fit (at least one tile)."""
    if memory_budget is None:
        return cpu_rows
    total_rows = max(int(total_rows), 1)
    if total_rows * bytes_per_row <= memory_budget:
        return total_rows
    fitting = memory_budget // max(int(bytes_per_row), 1)
    return max(GPU_ROW_MULTIPLE, fitting // GPU_ROW_MULTIPLE * GPU_ROW_MULTIPLE)


def block_size(config, key, model, total_rows, bytes_per_row, cpu_rows, zero_means=None, memory_budget=AUTO):
    """The ``key`` option: a positive integer (a non-negative one where ``zero_means`` says what 0 does), or
    ``auto`` (:func:`auto_rows` for ``config["device"]``, logged). ``memory_budget``: bytes, or AUTO to ask the
    device (tests pass a number to size a GPU on any machine)."""
    value = config[key]
    if value == AUTO:
        if memory_budget == AUTO:
            memory_budget = device_memory_budget(config["device"] or "cpu")
        rows = auto_rows(total_rows, bytes_per_row, cpu_rows, memory_budget)
        where = (
            "the CPU size (cache-sized blocks)"
            if memory_budget is None
            else f"{'one block' if rows >= total_rows else 'the rows that fit'} of {total_rows} rows, "
            f"{rows * bytes_per_row / 2**20:.0f} MiB of a {memory_budget / 2**20:.0f} MiB budget"
        )
        logging.getLogger().info(f"{model}: {key} auto -> {rows} ({where})")
        return rows
    smallest = 0 if zero_means else 1
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < smallest:
        allowed = f"a non-negative integer ({zero_means} with 0)" if zero_means else "a positive integer"
        raise ValueError(
            f"{model}: {key} must be {allowed} or auto, got {value!r} (set it in a config file or with --{key}=...)"
        )
    return int(value)


def uniformity_block_rows(config, model):
    """The ``uniformity_block_size`` option of the DirectAU loss (MGFormer, DirectAU): rows per block of its
    (b, b) kernel, b the training batch."""
    batch_rows = int(config["train_batch_size"] or 1)
    return block_size(
        config, "uniformity_block_size", model, batch_rows, uniformity_bytes_per_row(batch_rows), UNIFORMITY_BLOCK_ROWS
    )
