"""How a model's validation and test scores move epoch by epoch, from before the first step, and (for MGFormer)
what its outputs are made of at each point: is training improving on the starting point, and does the attention
branch turn into one shared vector?

    python experiments/trajectory.py --model MGFormer --dataset ml-100k --epochs 10 --no-tuned \\
        --embedding_size=32 --learning_rate=0.001 --uniformity_weight=0.1383

Epoch -1 is the model before training (for MGFormer, mostly the PureSVD scores of its SVD encodings). Each row has
the epoch's summed training loss, the validation metric and the test metric at that epoch (the test column is for
reading a trajectory, not for choosing an epoch), and for MGFormer the mean norms of the learned embeddings e, the
SVD encodings p and the attention branch, and the mean cosine of each node's attention output to the average one
(1: every node gets the same vector). Without ``--no-tuned`` the benchmark's tuned file for the model and dataset
applies under the ``--key=value`` settings, as in ``run.py``. Appends a section to
results/exploration/trajectories-<dataset>.md (``--results`` moves it).
"""

import argparse
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = ("embedding_norm", "encoding_norm", "attention_norm", "attention_cosine_to_mean")


def token_parts(model):
    """The mean L2 norms of an MGFormer's learned embeddings ``e``, SVD encodings ``p`` and attention branch
    (``h = [e, p] + Attn([e, p])``), and the mean cosine of each node's attention output to the average one."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        tokens, outputs = model.node_tokens(), model()
        attention = outputs - tokens
        d = model.embedding_size
        return {
            "embedding_norm": tokens[:, :d].norm(dim=1).mean().item(),
            "encoding_norm": tokens[:, d:].norm(dim=1).mean().item() if tokens.shape[1] > d else 0.0,
            "attention_norm": attention.norm(dim=1).mean().item(),
            "attention_cosine_to_mean": F.cosine_similarity(attention, attention.mean(0, keepdim=True)).mean().item(),
        }


def trajectory(model, trainer, train_data, valid_data, test_data, epochs, metric):
    """Rows ``{epoch, loss, valid, test, **parts}`` for epoch -1 (untrained) and each of ``epochs`` epochs."""

    def row(epoch, loss):
        scores = {
            split: trainer.evaluate(data, load_best_model=False, show_progress=False)[metric]
            for split, data in (("valid", valid_data), ("test", test_data))
        }
        parts = token_parts(model) if type(model).__name__ == "MGFormer" and model.use_attention else {}
        return {"epoch": epoch, "loss": loss, **scores, **{key: parts[key] for key in PARTS if key in parts}}

    rows = [row(-1, None)]
    for epoch in range(epochs):
        loss = trainer._train_epoch(train_data, epoch, show_progress=False)
        rows.append(row(epoch, float(sum(loss) if isinstance(loss, tuple) else loss)))
    return rows


def table(rows, metric):
    columns = ["epoch", "train loss", f"valid {metric}", f"test {metric}"]
    has_parts = any(key in rows[0] for key in PARTS)
    if has_parts:
        columns += ["mean |e|", "mean |p|", "mean |Attn(X)|", "Attn cosine to mean"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [
            str(row["epoch"]),
            "" if row["loss"] is None else f"{row['loss']:.2f}",
            f"{row['valid']:.4f}",
            f"{row['test']:.4f}",
        ]
        if has_parts:
            cells += [f"{row[key]:.3f}" for key in PARTS]
        lines.append("| " + " | ".join(cells) + " |")
    best = max(rows, key=lambda r: r["valid"])
    lines += ["", f"Best validation epoch: {best['epoch']} (valid {best['valid']:.4f}, test {best['test']:.4f})."]
    return lines


def main(argv=None):
    from recbole_mgformer.config.command_line import parse_overrides
    from recbole_mgformer.quick_start import build_config, prepare, tuned_config_file
    from recbole_mgformer.records import display_path, git_commit, machine, package_versions

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="MGFormer")
    parser.add_argument("--dataset", default="ml-100k")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--no-tuned", action="store_true", help="leave out properties/benchmark/<dataset>/<Model>.yaml")
    parser.add_argument("--data_path", default=str(ROOT / "dataset"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args, rest = parser.parse_known_args(argv)
    if args.epochs < 0:
        parser.error(f"--epochs {args.epochs}: give 0 (only the untrained model) or more")
    settings = {"data_path": args.data_path, "show_progress": False, "state": "WARNING", **parse_overrides(rest)}
    tuned = None if args.no_tuned else tuned_config_file(args.model, args.dataset)
    config, _ = build_config(args.model, args.dataset, [tuned] if tuned else [], settings)
    model, trainer, (train_data, valid_data, test_data) = prepare(config)
    metric = config["valid_metric"].lower()
    rows = trajectory(model, trainer, train_data, valid_data, test_data, args.epochs, metric)

    versions = ", ".join(f"{name} {version}" for name, version in package_versions().items())
    lines = [
        f"## {args.model} on {args.dataset}: {' '.join(rest) or 'its settings'}"
        + (f" (tuned file {display_path(tuned, ROOT)})" if tuned else ""),
        "",
        f"`{shlex.join(['python', 'experiments/trajectory.py', *argv])}`: seed {config['seed']}, commit "
        f"{git_commit(ROOT)}, {machine()}, {time.strftime('%Y-%m-%d')}; {versions}.",
        "",
    ]
    lines += table(rows, metric)
    path = Path(args.results) / "exploration" / f"trajectories-{args.dataset}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        ""
        if path.exists()
        else (
            f"# Training trajectories on {args.dataset}\n\nWritten by "
            "`experiments/trajectory.py` (see its docstring for the columns).\n\n"
        )
    )
    with path.open("a") as out:
        out.write(header + "\n".join(lines) + "\n\n")
    print("\n".join(lines))
    return rows


if __name__ == "__main__":
    main()
