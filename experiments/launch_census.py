"""Kernel-launching ops of one training step (``calculate_loss`` + backward + Adam ``foreach``), counted on the CPU,
and the graph breaks of ``calculate_loss`` under ``torch.compile``: what a GPU step costs in launches, measurable on
any machine (issue 52). Counts are exact and deterministic, not timings.

    python experiments/launch_census.py                       # Beauty-sized graph, batch 2048, d 64
    python experiments/launch_census.py --users 500 --items 300 --interactions 4000 --batch_size 128

Ops are counted with a ``TorchDispatchMode`` over the second eager step (Adam's state exists): every aten op that
reaches a backend, less views, allocations and metadata (which launch no kernel), in fp32, as on a GPU with TF32.
The graph is synthetic (power-law item popularity) with the sizes of amazon-beauty's training split, so the census
needs no data; with one key chunk and one loss block the counts do not depend on the graph's size. Graph breaks come
from ``torch._dynamo.explain`` of ``calculate_loss`` on the eager model (with the reasons dynamo logs where explain
names none). Writes results/performance/launch_census.md and its record,
results/performance/runs/performance/launch-census-<time>.json.
"""

import argparse
import collections
import logging
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from recbole_mgformer.training.host_sync import HOST_SYNCING_OPS  # noqa: E402

# aten ops that launch no kernel: views, allocations, metadata, autograd bookkeeping
NO_KERNEL = {
    "empty",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "detach",
    "lift_fresh",
    "alias",
    "_reshape_alias",
    "set_",
    "_unsafe_view",
    "resize_",
    "as_strided",
    "view",
    "t",
    "transpose",
    "permute",
    "expand",
    "slice",
    "select",
    "unsqueeze",
    "squeeze",
    "split",
    "split_with_sizes",
    "unbind",
    "diagonal",
    "narrow",
    "_local_scalar_dense",
    "detach_",
    "_record_function_enter_new",
    "_record_function_exit",
    "empty_like",
    "promote_types",
    "result_type",
    "sparse_compressed_tensor",
}  # a CSR tensor around existing parts (SGL's eager graphs): metadata only
# the GPU configuration, set explicitly: one key chunk and one loss block whatever the graph (what auto picks on a
# GPU while they fit), fp32, eager
GPU_CONFIGURATION = {"precision": "fp32", "compile": False, "key_chunk_size": 1 << 30, "uniformity_block_size": 1 << 30}
CPU_DEFAULT = {"precision": "fp32", "compile": False, "key_chunk_size": "auto", "uniformity_block_size": "auto"}
CENSUS = [  # label, model, settings
    ("MGFormer, GPU configuration (one key chunk, one loss block)", "MGFormer", GPU_CONFIGURATION),
    ("MGFormer, CPU default (auto on a CPU: 2048-row key chunks, 256-row loss blocks)", "MGFormer", CPU_DEFAULT),
    ("MGFormer attention=False, GPU configuration", "MGFormer", {**GPU_CONFIGURATION, "attention": False}),
    ("MGFormer attention=False, CPU default", "MGFormer", {**CPU_DEFAULT, "attention": False}),
    ("DirectAU, GPU configuration", "DirectAU", {"precision": "fp32", "uniformity_block_size": 1 << 30}),
    ("DirectAU, CPU default", "DirectAU", {"precision": "fp32", "uniformity_block_size": "auto"}),
    # no option of these three depends on the device: one configuration each
    ("SimGCL (no device-dependent option)", "SimGCL", {}),
    ("XSimGCL (no device-dependent option)", "XSimGCL", {}),
    ("SGL, edge dropout (no device-dependent option)", "SGL", {"type": "ED"}),
    ("RecBole LightGCN", "LightGCN", {"n_layers": 3, "reg_weight": 1e-5, "require_pow": False}),
]
BEAUTY_NOTE = " (the sizes of amazon-beauty's training split)"
EXPONENT_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+")
# at most this many launching ops a step for MGFormer's GPU configuration (issue 52; tests/experiments check it)
GPU_STEP_OP_TARGET = 300


class OpCounter(TorchDispatchMode):
    """Counts the kernel-launching and the syncing aten ops run under it, by name."""

    def __init__(self):
        super().__init__()
        self.kernels = collections.Counter()
        self.syncs = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if not (getattr(func, "is_view", False) or name in NO_KERNEL):
            self.kernels[name] += 1
        # a sync, unless Adam's: it reads its step counters, CPU tensors without capturable=True (no device sync)
        if name in HOST_SYNCING_OPS:
            frame, in_optimizer = sys._getframe(1), False
            while frame is not None and not in_optimizer:
                in_optimizer = f"torch{os.sep}optim{os.sep}" in frame.f_code.co_filename
                frame = frame.f_back
            self.syncs += not in_optimizer
        return func(*args, **(kwargs or {}))

    @property
    def total(self):
        return sum(self.kernels.values())


class SyntheticGraph:
    """What a model reads of a RecBole dataset: node counts and the training matrix (power-law items)."""

    def __init__(self, n_users, n_items, n_interactions, seed=0):
        rng = np.random.default_rng(seed)
        self.users = rng.integers(0, n_users, n_interactions)
        self.items = rng.zipf(1.5, n_interactions) % n_items
        self.matrix = sp.csr_matrix(
            (np.ones(n_interactions, np.float32), (self.users, self.items)), shape=(n_users, n_items)
        )
        self.matrix.data[:] = 1  # repeated pairs count once
        self.n_users, self.n_items = n_users, n_items
        self.uid_field, self.iid_field = "user_id", "item_id"
        self.inter_feat = {"user_id": torch.from_numpy(self.users), "item_id": torch.from_numpy(self.items)}  # SGL's

    def num(self, field):
        return self.n_users if field == "user_id" else self.n_items

    def inter_matrix(self, form="csr"):
        return self.matrix.asformat(form)

    def batch(self, size, seed):
        rng = np.random.default_rng(seed)
        rows = rng.integers(0, len(self.users), size)
        return {
            "user_id": torch.from_numpy(self.users[rows]),
            "item_id": torch.from_numpy(self.items[rows]),
            "neg_item_id": torch.from_numpy(rng.integers(0, self.n_items, size)),
        }


class Config(dict):
    """RecBole's Config as a model reads it: a missing key is None."""

    def __getitem__(self, key):
        return dict.get(self, key)


def model_config(model, settings, batch_size):
    """The model's defaults: this project's YAML, or RecBole's for a model it takes from RecBole (SGL)."""
    import recbole

    paths = [
        ROOT / "properties" / "model" / f"{model}.yaml",
        Path(recbole.__file__).parent / "properties" / "model" / f"{model}.yaml",
    ]
    path = next((path for path in paths if path.exists()), None)
    # YAML 1.1 reads 1e-5 (no dot) as a string; RecBole's loader reads it as a float
    config = Config(
        {
            key: float(value) if isinstance(value, str) and EXPONENT_FLOAT.fullmatch(value) else value
            for key, value in (yaml.safe_load(path.read_text()) if path else {}).items()
        }
    )
    config.update(
        {
            "USER_ID_FIELD": "user_id",
            "ITEM_ID_FIELD": "item_id",
            "NEG_PREFIX": "neg_",
            "LABEL_FIELD": "label",
            "device": torch.device("cpu"),
            "seed": 0,
            "embedding_size": 64,
            "train_batch_size": batch_size,
        }
    )
    config.update(settings)
    config.final_config_dict = config
    return config


def build(model, settings, graph, batch_size):
    """The model (train mode) and Adam with ``foreach`` (the multi-tensor path CUDA takes)."""
    import recbole_mgformer

    recbole_mgformer.register()  # RecBole repaired for this stack (RecBole's LightGCN builds its graph with scipy)
    torch.manual_seed(0)
    if model == "LightGCN":
        from recbole.model.general_recommender.lightgcn import LightGCN as model_class
    else:
        from recbole_mgformer.integration.registry import get_model

        model_class = get_model(model)
    instance = model_class(model_config(model, settings, batch_size), graph)
    instance.train()
    return instance, torch.optim.Adam(instance.parameters(), lr=1e-3, foreach=True)


def train_step(model, optimizer, batch):
    optimizer.zero_grad()
    loss = model.calculate_loss(batch)
    loss = sum(loss) if isinstance(loss, tuple) else loss
    loss.backward()
    optimizer.step()
    return loss


def count_step(model, optimizer, graph, batch_size):
    """OpCounter of the second step (the first creates Adam's state)."""
    train_step(model, optimizer, graph.batch(batch_size, 1))
    counter = OpCounter()
    with counter:
        train_step(model, optimizer, graph.batch(batch_size, 2))
    return counter


def graph_breaks(model, graph, batch_size):
    """(graphs, graph breaks, distinct break reasons) of ``calculate_loss`` under dynamo."""
    import torch._dynamo

    torch._dynamo.reset()
    explained = torch._dynamo.explain(model.calculate_loss)(graph.batch(batch_size, 3))
    reasons = []
    for reason in explained.break_reasons:
        where = reason.user_stack[-1] if reason.user_stack else None
        text = f"{reason.reason.splitlines()[0][:160]}" + (
            f" ({os.path.basename(where.filename)}:{where.lineno})" if where else ""
        )
        if text not in reasons:
            reasons.append(text)
    if explained.graph_break_count and not reasons:  # explain leaves some reasons out (sparse tensors, e.g.)
        reasons = logged_break_reasons(model, graph, batch_size) or ["no reason reported by explain or its log"]
    torch._dynamo.reset()
    return explained.graph_count, explained.graph_break_count, reasons


class BreakLog(logging.Handler):
    """The graph breaks dynamo logs (``TORCH_LOGS=graph_breaks``), as "reason (file:line)" texts."""

    def __init__(self):
        super().__init__()
        self.reasons = []

    def emit(self, record):
        lines = [line.strip() for line in record.getMessage().splitlines() if line.strip()]
        where = re.search(r"user code at (\S+):(\d+)", lines[0]) if lines else None
        if not where or len(lines) < 2:
            return
        # "Graph Break Reason: <summary>:" is followed by the break itself, or is it
        summary = lines[1].removeprefix("Graph Break Reason:").strip()
        reason = lines[2] if summary.endswith(":") and len(lines) > 2 else summary
        text = f"{reason[:160]} ({os.path.basename(where.group(1))}:{where.group(2)})"
        if text not in self.reasons:
            self.reasons.append(text)


def logged_break_reasons(model, graph, batch_size):
    """The reasons dynamo logs for the graph breaks of ``calculate_loss`` (explain reports some without one)."""
    import torch._dynamo

    log, logger = BreakLog(), logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    torch._dynamo.reset()
    torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(log)
    try:
        torch._dynamo.explain(model.calculate_loss)(graph.batch(batch_size, 3))
    finally:
        logger.removeHandler(log)
        torch._logging.set_logs()
    return log.reasons


def census(graph, batch_size, entries=CENSUS, explain=True):
    rows = []
    for label, model, settings in entries:
        instance, optimizer = build(model, settings, graph, batch_size)
        counter = count_step(instance, optimizer, graph, batch_size)
        row = {
            "label": label,
            "model": model,
            "ops": counter.total,
            "syncs": counter.syncs,
            "top": counter.kernels.most_common(6),
        }
        if explain and model != "LightGCN":
            row["graphs"], row["breaks"], row["reasons"] = graph_breaks(instance, graph, batch_size)
        rows.append(row)
        print(
            f"{label}: {row['ops']} ops, {row['syncs']} syncs"
            + (f", {row['breaks']} graph breaks" if "breaks" in row else ""),
            flush=True,
        )
    return rows


def table(rows, args, commit, versions):
    lines = [
        "# Kernel-launching ops per training step, counted on the CPU",
        "",
        f"One eager step (calculate_loss, backward, Adam foreach), fp32, batch {args.batch_size}, d 64, on a "
        f"synthetic power-law graph of {args.users:,} users, {args.items:,} items, {args.interactions:,} "
        f"interactions{BEAUTY_NOTE if args.users == 22363 else ''}. Ops: aten ops that reach a backend, less "
        "views and allocations: each launches a kernel on a GPU. Syncs: ops whose result the host reads (Adam's "
        "CPU step counters aside). Graph breaks: `torch._dynamo.explain(model.calculate_loss)`, with the reasons "
        "dynamo logs where explain names none. MGFormer's GPU configuration is what `auto` picks on a "
        f"GPU (one key chunk, one loss block); target: at most {GPU_STEP_OP_TARGET} ops (issue 52; 1,423 for "
        "the defaults and 560 for one chunk before it).",
        "",
        "| configuration | ops per step | syncs | compiled graphs / graph breaks in calculate_loss "
        "| most frequent ops |",
        "|---|---:|---:|---|---|",
    ]
    for row in rows:
        compiled = f"{row['graphs']} / {row['breaks']}" if "breaks" in row else "-"
        top = ", ".join(f"{name} {count}" for name, count in row["top"])
        lines.append(f"| {row['label']} | {row['ops']:,} | {row['syncs']} | {compiled} | {top} |")
    reasons = [(row["label"], reason) for row in rows for reason in row.get("reasons", [])]
    if reasons:
        lines += ["", "Graph breaks:", ""] + [f"- {label}: {reason}" for label, reason in reasons]
    lines += [
        "",
        f"Commit {commit}; " + ", ".join(f"{k} {v}" for k, v in versions.items()) + "; "
        f"command: `python experiments/launch_census.py{' ' + ' '.join(args.argv) if args.argv else ''}`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=22363)
    parser.add_argument("--items", type=int, default=12101)
    parser.add_argument("--interactions", type=int, default=159000)
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--no_explain", action="store_true", help="skip the graph-break census")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    torch.set_num_threads(1)

    from recbole_mgformer.records import git_commit, package_versions, write_record

    graph = SyntheticGraph(args.users, args.items, args.interactions)
    rows = census(graph, args.batch_size, explain=not args.no_explain)
    commit, versions = git_commit(ROOT), package_versions()
    path = Path(args.results) / "launch_census.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table(rows, args, commit, versions))
    settings = {key: getattr(args, key) for key in ("users", "items", "interactions", "batch_size", "no_explain")}
    write_record(
        Path(args.results) / "runs" / "performance" / f"launch-census-{time.strftime('%Y%m%d-%H%M%S')}.json",
        {
            "rows": [{**row, "top": [list(pair) for pair in row["top"]]} for row in rows],
            "settings": settings,
            "commit": commit,
            "versions": versions,
            "command": f"python experiments/launch_census.py {' '.join(args.argv)}".strip(),
        },
    )
    print(path.read_text())
    return rows


if __name__ == "__main__":
    main()
