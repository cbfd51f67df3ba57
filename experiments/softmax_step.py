"""One training step of MGFormer's ``loss: softmax`` (the tokens, ``attention: False``; the loss of the hybrid
trained as one model, ``model/filter_residual.py``), its full-item cross-entropy written out as before (the (b, items)
logits made whole, then ``F.cross_entropy``) against the blocked form the model uses
(:func:`recbole_mgformer.model.filter_residual.softmax_cross_entropy`), and the blocked form over batches of whole
users (``train_protocol: user``, ``data/user_batches.py``: each user's logits made once for all of their pairs), with
and without the filter's residual in training, fp32 and bf16 matmul inputs, one thread.

    OMP_NUM_THREADS=1 python experiments/softmax_step.py --dataset amazon-beauty

A step: the loss of one training batch, its backward and Adam's update. The same batches in every setting of a
protocol (a batch of whole users holds as many pairs on average, so an epoch takes as many steps), the settings
interleaved over ``--repeats`` rounds of ``--steps`` steps (a noisy neighbour slows all alike); the median
is reported. Both forms compute the same loss and gradients (tests/model/test_filter_residual.py). Writes
results/performance/softmax_step-<dataset>.md and a JSON record.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# form -> the training protocol its batches come from
FORMS = {"written out": "prefix", "blocked": "prefix", "blocked, whole users": "user"}


def written_out_cross_entropy(
    user_outputs, item_outputs, items, temperature, residual_rows=None, weight=0.0, dtype=None, rows=None
):
    """``loss: softmax``'s cross-entropy as the model computed it before the blocked form: the whole (b, items)
    logits in fp32, then torch's cross-entropy (``dtype`` is ignored, as it was), a row for each pair (``rows``: the
    pairs' rows of the users' outputs)."""
    import torch
    import torch.nn.functional as F

    if rows is not None:
        user_outputs = user_outputs[rows]
        residual_rows = None if residual_rows is None else residual_rows[rows]

    cosine = F.normalize(user_outputs, dim=-1) @ F.normalize(item_outputs, dim=-1).T
    if residual_rows is not None and weight:
        spread = cosine.detach().std(dim=1, correction=0, keepdim=True)
        cosine = cosine + weight * spread * residual_rows.to(cosine.dtype)
    logits = (cosine / temperature).index_fill(1, torch.zeros(1, dtype=torch.long), float("-inf"))
    return F.cross_entropy(logits, items)


def build(args, residual, protocol):
    """MGFormer's tokens with ``loss: softmax`` (and GF-CF's residual in training) and the first batches of its
    training data under ``protocol``."""
    from recbole_mgformer.quick_start import build_config, prepare

    settings = {
        "attention": False,
        "loss": "softmax",
        "precision": "fp32",
        "embedding_size": args.embedding_size,
        "train_batch_size": args.batch_size,
        "show_progress": False,
        "seed": 0,
        "train_protocol": protocol,
    }
    if args.data_path:
        settings["data_path"] = args.data_path
    if residual:
        settings.update(filter_residual="gfcf", filter_residual_weight=1.0, filter_residual_in_training=True)
        settings["filter_residual_k"] = args.filter_k
    config, _ = build_config("MGFormer", args.dataset, None, settings)
    model, _, (train, _, _) = prepare(config)
    return model, [batch for batch, _ in zip(train, range(args.steps + 1))]


def time_settings(cases, repeats, steps):
    """{(form, matmul inputs): median seconds of a step}, the settings interleaved; ``cases``: {protocol: (model,
    batches)}."""
    import torch

    from recbole_mgformer.model.general_recommender import mgformer as mgformer_module

    blocked = mgformer_module.softmax_cross_entropy
    optimizers = {protocol: torch.optim.Adam(model.parameters(), lr=1e-3) for protocol, (model, _) in cases.items()}
    settings = [(form, dtype) for form in FORMS for dtype in (torch.float32, torch.bfloat16)]
    times = {setting: [] for setting in settings}

    def step(model, optimizer, batch):
        optimizer.zero_grad()
        model.calculate_loss(batch).backward()
        optimizer.step()

    try:
        for _ in range(repeats):
            for form, dtype in settings:
                (model, batches), optimizer = cases[FORMS[form]], optimizers[FORMS[form]]
                mgformer_module.softmax_cross_entropy = written_out_cross_entropy if form == "written out" else blocked
                model.matmul_dtype = dtype  # the uniformity terms' matmuls in all forms; the logits' when blocked
                step(model, optimizer, batches[0])  # warm-up
                started = time.perf_counter()
                for k in range(steps):
                    step(model, optimizer, batches[1 + k % (len(batches) - 1)])
                times[form, dtype].append((time.perf_counter() - started) / steps)
    finally:
        mgformer_module.softmax_cross_entropy = blocked
        for model, _ in cases.values():
            model.matmul_dtype = torch.float32
    return {setting: statistics.median(values) for setting, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--embedding-size", type=int, default=64)
    parser.add_argument("--filter-k", type=int, default=256, help="GF-CF's singular vectors (filter_residual_k)")
    parser.add_argument("--data-path", help="the folder holding the dataset's folder (RecBole's data_path)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    rows, record = [], {"settings": {}}
    for residual in (False, True):
        cases = {protocol: build(args, residual, protocol) for protocol in sorted(set(FORMS.values()))}
        medians = time_settings(cases, args.repeats, args.steps)
        loss_name = "softmax + GF-CF residual in training (weight 1)" if residual else "softmax"
        for (form, dtype), seconds in medians.items():
            label = "bf16" if dtype == torch.bfloat16 else "fp32"
            before = medians["written out", dtype]
            cells = (loss_name, form, label, f"{seconds * 1e3:.0f}", f"{before / seconds:.2f}x")
            rows.append("| " + " | ".join(cells) + " |")
            record["settings"][f"{loss_name} {form} {label}"] = seconds
        model, batches = cases["user"]
        items, width = model.n_items, model.forward(torch.zeros(1, dtype=torch.long)).shape[-1]
        users_a_step = statistics.mean(len(torch.unique(batch[model.USER_ID])) for batch in batches)
        pairs_a_step = statistics.mean(len(batch) for batch in batches)
        del cases, model, batches
    from recbole_mgformer.records import code_commit

    commit = code_commit()  # the measured code's commit, "-dirty" with uncommitted changes
    from experiments.sequential_step import machine

    cpu = machine()
    command = f"OMP_NUM_THREADS={args.threads} python experiments/softmax_step.py --dataset {args.dataset}"
    lines = [
        f"# A step of MGFormer's softmax loss on {args.dataset}: the logits written out against blocked",
        "",
        f"Produced by `{command}` at commit {commit}: MGFormer's tokens (`attention: False`, `loss: softmax`, "
        f"embedding size {args.embedding_size}, token width {width}), batch {args.batch_size} against all "
        f"{items:,} items; one step is the loss, its backward and Adam's update, the median of {args.repeats} "
        f'interleaved rounds of {args.steps} steps over the same batches. "written out": the whole (b, items) logits, '
        "then torch's cross-entropy, the logits' matmul in fp32 whatever the precision (the form before the blocked "
        'one); "blocked": `softmax_cross_entropy` (`recbole_mgformer/model/filter_residual.py`); "blocked, whole '
        'users": the same over batches of whole users (`train_protocol: user`, `recbole_mgformer/data/'
        f"user_batches.py`), {pairs_a_step:.0f} pairs of {users_a_step:.0f} users a timed step on average, each "
        "user's logits made once (an epoch takes as many steps as under RecBole's pairs). \"speed-up\": the "
        "written-out step's time at the same matmul inputs over this one's.",
        "",
        "| loss | form | matmul inputs | ms a step | speed-up |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Machine: {cpu}, {args.threads} thread(s); load average before the run: "
        + " ".join(f"{x:.2f}" for x in load)
        + f". Versions: python {platform.python_version()}, torch {torch.__version__}. Seed 0.",
        "",
    ]
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"softmax_step-{args.dataset}.md").write_text("\n".join(lines))
    record.update(commit=commit, threads=args.threads, load=load, torch=torch.__version__, seed=0, machine=cpu)
    (out / f"softmax_step-{args.dataset}.json").write_text(json.dumps(record, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
