"""Where EAGPS's whole-sequence training step spends its time: the parts of one step (``calculate_loss`` + backward +
Adam) of this project's EAGPS under ``train_protocol: sequence`` at its defaults on ml-100k-seq (batch 2048, one
thread), each timed alone with its backward on the same batch, and the output layer's three matmuls at the step's
shape (the floor of its full-item cross-entropy at fp32).

    OMP_NUM_THREADS=1 python experiments/eagps_step_parts.py

Each part runs ``--steps`` times after two warm-up runs; the median is reported. Writes
results/performance/eagps-step-parts.md and a JSON record beside it.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.sequential_step import build_pair, machine, train_step  # noqa: E402


def median_ms(function, steps):
    for _ in range(2):
        function()
    seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - started)
    return 1e3 * statistics.median(seconds)


def time_parts(model, batch, steps):
    """{part: median ms} of the whole-sequence model ``model`` on ``batch``."""
    import torch

    from recbole_mgformer.model.eagps.decoder import causal_soft_attention, prefix_masks

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    item_seq, lengths, users = batch[model.ITEM_SEQ], batch[model.ITEM_SEQ_LEN], batch[model.USER_ID]

    def encoder():
        items, users_ = model.encode()
        (items.sum() + users_.sum()).backward()

    def encoder_and_decoder():
        _, hidden = model.forward_every_position(item_seq, lengths, users)
        hidden.sum().backward()

    rows, hidden = model.forward_every_position(item_seq, lengths, users)
    hidden, weight = hidden.detach(), model.output.weight.detach()
    blocks = torch.split(hidden, max(1, (2 << 20) // (4 * weight.shape[0])))  # the loss's 2 MiB blocks

    def output_matmuls():  # logits, and the gradients of hidden and weight, block by block
        for block in blocks:
            logits = block @ weight.T
            logits @ weight, logits.T @ block

    length = item_seq.shape[1]
    masks = prefix_masks(lengths, length, model.mask_ratio)
    templates = torch.randn(len(lengths), length, model.embedding_size, requires_grad=True)
    token = model.mask_token.detach().clone().requires_grad_()
    upstream = torch.randn_like(templates)
    parts = {
        "step": median_ms(lambda: train_step(model, optimizer, batch), steps),
        "graph encoder, forward and backward": median_ms(encoder, steps),
        "encoder and decoder, forward and backward": median_ms(encoder_and_decoder, steps),
        f"output layer's three matmuls ({len(hidden)} targets, {weight.shape[0]} items)": median_ms(
            output_matmuls, steps
        ),
        "per-prefix masks (Eq. 21)": median_ms(lambda: prefix_masks(lengths, length, model.mask_ratio), steps),
        "causal soft attention, forward and backward (Eq. 23-24)": median_ms(
            lambda: causal_soft_attention(templates, lengths, token, masks).backward(upstream), steps
        ),
        "Adam": median_ms(optimizer.step, steps),
    }
    model.use_external = False
    parts["graph encoder without external attention"] = median_ms(encoder, steps)
    model.use_external = True
    return parts


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml-100k-seq")
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--data_path", help="folder holding <dataset>/<dataset>.inter (default: RecBole's)")
    parser.add_argument("--config_files", nargs="*", default=[])
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)

    import torch

    from recbole_mgformer.records import git_commit, package_versions, write_record

    torch.set_num_threads(1)
    overrides = {"seed": args.seed, **({"data_path": args.data_path} if args.data_path else {})}
    models, batches, _, _, _ = build_pair("EAGPS", args.dataset, args.batch_size, 1, overrides, args.config_files)
    parts = time_parts(models[3], batches[3][0], args.steps)  # the whole-sequence arm, fp32
    commit = git_commit(ROOT)
    versions = {k: v for k, v in package_versions().items() if k in ("python", "torch", "recbole", "numpy")}
    lines = [
        "# EAGPS's whole-sequence training step, part by part",
        "",
        f"Produced by `python experiments/eagps_step_parts.py{''.join(' ' + a for a in argv)}` at commit {commit}: "
        f"this project's EAGPS at its defaults under `train_protocol: sequence` on {args.dataset}, batch "
        f"{args.batch_size}, fp32, one thread; each part alone with its backward on one batch, the median of "
        f"{args.steps} runs. Parts overlap (the encoder is in the decoder's row; the step holds all of them).",
        "",
        "| part | ms |",
        "|---|---|",
        *(f"| {name} | {ms:.2f} |" for name, ms in parts.items()),
        "",
        f"Machine: {machine()}, 1 thread. Versions: {', '.join(f'{k} {v}' for k, v in versions.items())}. "
        f"Seed {args.seed}.",
        "",
    ]
    results = Path(args.results)
    write_record(
        results / "runs" / "performance" / f"eagps-step-parts-{time.strftime('%Y%m%d-%H%M%S')}.json",
        {"parts_ms": parts, "commit": commit, "versions": versions, "seed": args.seed},
    )
    (results / "eagps-step-parts.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
