"""The full-item cross-entropy (:func:`recbole_mgformer.model.loss.linear_cross_entropy`, forward and backward) at
block sizes from one block (the whole (b, c) logits at once, as before blocks) down to 256 KiB, at the shapes of
EAGPS's whole-sequence step on ml-100k-seq (1,931 targets, hidden 32, 1,683 items) and of a SASRec step on
amazon-beauty-seq (2048 targets, hidden 64, 12,101 items), fp32 and bf16, one thread.

    OMP_NUM_THREADS=1 python experiments/cross_entropy_blocks.py

Each setting is timed ``--steps`` times in a row, the settings interleaved over ``--repeats`` rounds (a noisy
neighbour slows all alike); the median is reported. The block size changes no number beyond the order of the weight
gradient's sums (tests/model/test_loss.py). Writes results/performance/cross-entropy-blocks.md and a JSON record.
"""

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {  # name: (targets b, hidden k, classes c)
    "EAGPS whole-sequence step, ml-100k-seq": (1931, 32, 1683),
    "SASRec step, amazon-beauty-seq": (2048, 64, 12101),
}
ONE_BLOCK = 1 << 40  # bytes: every row in one block
BLOCK_BYTES = (ONE_BLOCK, 4 << 20, 2 << 20, 1 << 20, 512 << 10, 256 << 10)


def block_label(block_bytes):
    if block_bytes == ONE_BLOCK:
        return "one block"
    return f"{block_bytes >> 10} KiB" if block_bytes >= 1024 else f"{block_bytes} B"


def time_settings(shape, dtype, repeats, steps, seed):
    """{block bytes: median seconds of one forward + backward} at ``shape``, the block sizes interleaved."""
    import torch

    from recbole_mgformer.model import loss as loss_module

    b, k, c = shape
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(b, k, generator=g).requires_grad_()
    weight = (torch.randn(c, k, generator=g) / k**0.5).requires_grad_()
    bias = torch.zeros(c).requires_grad_()
    target = torch.randint(0, c, (b,), generator=g)

    def step():
        loss_module.linear_cross_entropy(hidden, weight, bias, target, dtype).backward()

    times = {block: [] for block in BLOCK_BYTES}
    default = loss_module.CROSS_ENTROPY_BLOCK_BYTES
    try:
        for _ in range(repeats):
            for block in BLOCK_BYTES:
                loss_module.CROSS_ENTROPY_BLOCK_BYTES = block
                step()  # warm-up
                started = time.perf_counter()
                for _ in range(steps):
                    step()
                times[block].append((time.perf_counter() - started) / steps)
    finally:
        loss_module.CROSS_ENTROPY_BLOCK_BYTES = default
    return {block: statistics.median(values) for block, values in times.items()}, default


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    import os

    import torch

    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    rows, record = [], {"settings": {}}
    for name, shape in SHAPES.items():
        for dtype, label in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            medians, default = time_settings(shape, dtype, args.repeats, args.steps, args.seed)
            whole = medians[ONE_BLOCK]
            for block, seconds in medians.items():
                chosen = " (default)" if block == default else ""
                cells = (name, label, block_label(block) + chosen, f"{seconds * 1e3:.2f}", f"{whole / seconds:.2f}x")
                rows.append("| " + " | ".join(cells) + " |")
            record["settings"][f"{name} {label}"] = {block_label(b): s for b, s in medians.items()}
    from recbole_mgformer.records import code_commit

    commit = code_commit()  # the measured code's commit, "-dirty" with uncommitted changes
    from experiments.sequential_step import machine

    cpu = machine()
    lines = [
        "# The full-item cross-entropy by block size",
        "",
        f"Produced by `OMP_NUM_THREADS={args.threads} python experiments/cross_entropy_blocks.py` at commit {commit}: "
        "`linear_cross_entropy` forward and backward (`recbole_mgformer/model/loss.py`), median of "
        f"{args.repeats} interleaved rounds of {args.steps} steps, at each block size of the (b, c) logits; "
        '"against one block": the time of one block (all rows at once) over this one.',
        "",
        "| shape | matmul inputs | block | ms | against one block |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Machine: {cpu}, {args.threads} thread(s); load average before the run: "
        + " ".join(f"{x:.2f}" for x in load)
        + f". Versions: python {platform.python_version()}, torch {torch.__version__}. Seed {args.seed}.",
        "",
    ]
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cross-entropy-blocks.md").write_text("\n".join(lines))
    record.update(commit=commit, threads=args.threads, load=load, torch=torch.__version__, seed=args.seed)
    (out / "cross-entropy-blocks.json").write_text(json.dumps(record, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
