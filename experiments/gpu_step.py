"""MGFormer's training step on a GPU beside LightGCN's, three ways: eager (with ``auto`` sizes: one key chunk, one
loss block; and with the CPU's blocks), ``calculate_loss`` compiled as one graph, and the whole step replayed from one
CUDA graph by the trainer's own runner (``recbole_mgformer/training/cuda_graph.py``: static batch buffers, Adam
``capturable=True``), each graphed step checked against the same step run eagerly on a twin model; host launches a
step (profiler) and the syncs of the trainer's epoch, eager and graphed, beside RecBole's (``set_sync_debug_mode``)
(issue 52). For a lent GPU: a few minutes on an H100/H200, on a synthetic Beauty-sized graph (no data to carry).
UNTESTED on a GPU so far.

    python experiments/gpu_step.py --device cuda --out results/performance/<gpu>     # needs RecBole importable
    python experiments/gpu_step.py --device cpu --users 300 --items 200 --interactions 3000 --batch_size 64 --out OUT

On a bare GPU image RecBole comes from wheels, as in experiments/gpu_check.sh:
``pip install --no-index --no-deps --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site:$PWD python ...``.
On a CPU it is a smoke run: the eager rows, the graph column through the runner's eager stand-in for capture and
replay (``capture=False``: the same static-buffer path, which must then equal the eager step bit for bit) and the
trainer's loops (CPU timings belong to step_time.py). Writes OUT/gpu_step.json and OUT/gpu_step.md.
"""

import argparse
import copy
import functools
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from experiments.launch_census import CPU_DEFAULT, SyntheticGraph, build, count_step, train_step  # noqa: E402
from recbole_mgformer.model.abstract_recommender import model_contract  # noqa: E402
from recbole_mgformer.training.cuda_graph import GraphedStep, make_capturable  # noqa: E402
from recbole_mgformer.training.device_loop import DeviceLoopMixin  # noqa: E402

AUTO = {"precision": "fp32", "compile": False, "key_chunk_size": "auto", "uniformity_block_size": "auto"}
BLOCKED = {**CPU_DEFAULT, "key_chunk_size": 2048, "uniformity_block_size": 256}
COMPILED_INTO = "MGFormer, auto sizes (one chunk, one block on a GPU)"  # the row the compiled time joins
VARIANTS = [
    ("LightGCN", "LightGCN", {"n_layers": 3, "reg_weight": 1e-5, "require_pow": False}),
    ("MGFormer, auto sizes (one chunk, one block on a GPU)", "MGFormer", AUTO),
    ("MGFormer, the CPU's blocks (2048-row chunks, 256-row loss blocks)", "MGFormer", BLOCKED),
    ("MGFormer attention=False, auto", "MGFormer", {**AUTO, "attention": False}),
    ("DirectAU, auto", "DirectAU", {"precision": "fp32", "uniformity_block_size": "auto"}),
]


def on_device(model, optimizer_kwargs, device):
    model.to(device)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3, **optimizer_kwargs)


def batches(graph, size, count, device):
    return [{key: value.to(device) for key, value in graph.batch(size, 10 + i).items()} for i in range(count)]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_steps(model, optimizer, data, device, repeats, steps, warmup=3):
    """Median ms of ``train_step(model, optimizer, batch)``, or of ``model(batch)`` when ``optimizer`` is None."""
    run = (lambda batch: train_step(model, optimizer, batch)) if optimizer is not None else model
    for batch in data[:warmup]:
        run(batch)
    times = []
    for _ in range(repeats):
        for i in range(steps):
            synchronize(device)
            started = time.perf_counter()
            run(data[i % len(data)])
            synchronize(device)
            times.append(time.perf_counter() - started)
    return round(1e3 * statistics.median(times), 3)


def build_on(model_name, settings, graph, batch_size, device, **optimizer_kwargs):
    """The census's model with ``device`` in its config (``auto`` resolves for it), moved there."""
    model, _ = build(model_name, {**settings, "device": device}, graph, batch_size)
    return on_device(model, optimizer_kwargs, device)


def eager_rows(graph, args, device):
    rows = []
    for label, model_name, settings in VARIANTS:
        cpu_model, cpu_optimizer = build(model_name, {**settings, "device": device}, graph, args.batch_size)
        ops = count_step(cpu_model, cpu_optimizer, graph, args.batch_size).total  # counted on the CPU: exact
        model, optimizer = build_on(model_name, settings, graph, args.batch_size, device)
        data = batches(graph, args.batch_size, 6, device)
        row = {
            "variant": label,
            "ops_per_step": ops,
            "step_ms": time_steps(model, optimizer, data, device, args.repeats, args.steps),
        }
        if model_name == "MGFormer" and settings.get("attention", True):
            row["key_chunk_size"], row["uniformity_block_rows"] = (
                model.layers[0].key_chunk_size,
                model.uniformity_block_rows,
            )
        row.update(host_launches(functools.partial(train_step, model, optimizer, data[0]), device, "eager"))
        try:  # the graph column: a failure is this row's, the rest still runs
            row.update(graph_column(model, optimizer, graph, args, device))
        except Exception as error:
            row["graph_error"] = f"{type(error).__name__}: {error}"[:500]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def host_launches(step, device, name):
    """{name_launches_per_step: the kernel and graph launches the host makes in one ``step()``} (CUDA's profiler)."""
    if device.type != "cuda":
        return {}
    from torch.profiler import ProfilerActivity, profile

    step()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        step()
        synchronize(device)
    return {
        f"{name}_launches_per_step": sum(
            "Launch" in event.name for event in profiler.events() if event.device_type.name == "CPU"
        )
    }


def graphed_runner(model, optimizer, device):
    """The trainer's runner of ``model``'s step (a CUDA graph on CUDA, its eager stand-in elsewhere), with the
    trainer's hook: ``step(batch)`` -> the detached loss."""
    runner = GraphedStep(model, optimizer, capture=device.type == "cuda", required=True)
    before_step = model_contract(model).before_step
    if before_step is not None:
        model.step_hook = True

    def step(batch):
        if before_step is not None:
            before_step()
        return runner.step(batch)

    return runner, step


def graph_column(model, optimizer, graph, args, device, checked_steps=8):
    """The step of ``model`` (as the eager rows left it) through the trainer's GraphedStep: each of
    ``checked_steps`` steps against the same step run eagerly on a twin (a copy of the model and of its optimizer's
    state), losses then parameters; then replays timed."""
    twin = copy.deepcopy(model)
    twin_optimizer = type(optimizer)(twin.parameters(), **optimizer.defaults)
    twin_optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    runner, step = graphed_runner(model, optimizer, device)
    if runner.capture:  # the twin's Adam takes the same capturable arithmetic
        make_capturable(twin_optimizer)
    data = batches(graph, args.batch_size, checked_steps, device)
    differences = []
    for batch in data:
        graphed_loss = step(batch)
        graphed_loss = float(sum(graphed_loss) if isinstance(graphed_loss, tuple) else graphed_loss)
        eager_loss = float(train_step(twin, twin_optimizer, batch).detach())
        differences.append(abs(graphed_loss - eager_loss) / max(abs(eager_loss), 1e-12))
    parameter_difference = max(float((a - b).abs().max()) for a, b in zip(model.parameters(), twin.parameters()))
    row = {
        "graph_step_ms": time_steps(step, None, data, device, args.repeats, args.steps, warmup=0),
        "graph_max_relative_loss_difference": max(differences),
        "graph_max_parameter_difference": parameter_difference,
        "graph_counts": dict(runner.counts),
    }
    row.update(host_launches(functools.partial(step, data[0]), device, "graph"))
    return row


def compiled_row(graph, args, device):
    """``calculate_loss`` compiled with ``fullgraph=True`` (a graph break would raise), the step timed."""
    model, optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device)
    model.calculate_loss = torch.compile(model.calculate_loss, fullgraph=True)
    started = time.perf_counter()
    train_step(model, optimizer, batches(graph, args.batch_size, 1, device)[0])
    synchronize(device)
    compile_s = time.perf_counter() - started
    step_ms = time_steps(model, optimizer, batches(graph, args.batch_size, 6, device), device, args.repeats, args.steps)
    return {"variant": COMPILED_INTO, "compiled_step_ms": step_ms, "compile_s": round(compile_s, 1)}


class BenchTrainer(DeviceLoopMixin):
    """The trainer's epoch (DeviceLoopMixin) over a synthetic graph's model, without RecBole's Trainer around it."""

    def __init__(self, **attributes):  # not the mixin's __init__, which resolves a RecBole config
        self.__dict__.update(attributes)


def trainer_syncs(graph, args, device):
    """Syncs CUDA reports (set_sync_debug_mode) over one epoch of the trainer's loop (DeviceLoopMixin), eagerly and
    with the step in one CUDA graph, and over the same batches in RecBole's loop."""
    from recbole.data.interaction import Interaction
    from recbole.trainer import Trainer

    model, optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device)
    data = [Interaction(batch) for batch in (graph.batch(args.batch_size, 40 + i) for i in range(args.steps))]
    trainer = BenchTrainer(
        model=model,
        optimizer=optimizer,
        device=device,
        config={"single_spec": True},
        enable_amp=False,
        enable_scaler=False,
        clip_grad_norm=None,
        gpu_available=False,
        graph_capture=device.type == "cuda",
        cuda_graph_required=True,
        _check_nan=lambda loss: Trainer._check_nan(None, loss),
    )
    counts = {}
    for name, loop, graphed in (
        ("this project's epoch", BenchTrainer._device_train_epoch, False),
        ("this project's epoch, one CUDA graph a step", BenchTrainer._device_train_epoch, True),
        ("RecBole's epoch", Trainer._train_epoch, False),
    ):
        trainer.cuda_graph = graphed
        loop(trainer, [Interaction(dict(batch.interaction)) for batch in data[:5]], 0)  # warm-up (and capture)
        synchronize(device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("warn")
            try:
                loop(trainer, [Interaction(dict(batch.interaction)) for batch in data], 0)
            finally:
                if device.type == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
        counts[name] = sum("synchroniz" in str(w.message) for w in caught)
    return {"variant": f"syncs in one epoch of {len(data)} steps (cuda sync debug mode)", **counts}


TABLE_COLUMNS = {
    "variant",
    "ops_per_step",
    "step_ms",
    "compiled_step_ms",
    "graph_step_ms",
    "graph_max_relative_loss_difference",
    "graph_max_parameter_difference",
}


def write(rows, args, device):
    from recbole_mgformer.records import git_commit, package_versions

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    record = {
        "device": name,
        "commit": git_commit(ROOT),
        "versions": package_versions(),
        "args": vars(args),
        "rows": rows,
    }
    (out / "gpu_step.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        f"# MGFormer's training step on {name}",
        "",
        f"Synthetic graph of {args.users:,} users, {args.items:,} items, {args.interactions:,} interactions, "
        f"batch {args.batch_size}, d 64, fp32; medians of {args.repeats} x {args.steps} steps, synchronised "
        "around each. Ops: kernel-launching ops a step, counted on the CPU (experiments/launch_census.py).",
        "",
        "CUDA graph: the trainer's runner (recbole_mgformer/training/cuda_graph.py) replaying the whole step; "
        "beside it, "
        "the largest relative loss difference and parameter difference against the same steps run eagerly on a "
        "twin model.",
        "",
        "| variant | ops/step | eager ms | compiled ms | CUDA graph ms | graph vs eager (loss, parameters) | other |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        other = ", ".join(f"{k} {v}" for k, v in row.items() if k not in TABLE_COLUMNS)
        check = (
            f"{row['graph_max_relative_loss_difference']:.1e}, {row['graph_max_parameter_difference']:.1e}"
            if "graph_max_relative_loss_difference" in row
            else "-"
        )
        lines.append(
            f"| {row['variant']} | {row.get('ops_per_step', '-')} | {row.get('step_ms', '-')} | "
            f"{row.get('compiled_step_ms', '-')} | {row.get('graph_step_ms', '-')} | {check} | {other} |"
        )
    lines += [
        "",
        f"Commit {record['commit']}; "
        + ", ".join(f"{k} {v}" for k, v in record["versions"].items())
        + f"; command: `python experiments/gpu_step.py {' '.join(sys.argv[1:])}`.",
    ]
    (out / "gpu_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--out", required=True)
    parser.add_argument("--users", type=int, default=22363)
    parser.add_argument("--items", type=int, default=12101)
    parser.add_argument("--interactions", type=int, default=159000)
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no_compile", action="store_true")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(1) if device.type == "cpu" else None
    graph = SyntheticGraph(args.users, args.items, args.interactions)
    rows = eager_rows(graph, args, device)
    parts = [trainer_syncs] + ([compiled_row] if device.type == "cuda" and not args.no_compile else [])
    for part in parts:  # each part on its own: a failure is recorded, the rest still runs
        try:
            row = part(graph, args, device)
        except Exception as error:
            row = {"variant": part.__name__, "error": f"{type(error).__name__}: {error}"[:500]}
        print(json.dumps(row), flush=True)
        joined = next((r for r in rows if r["variant"] == row["variant"]), None)  # compiled: a column of its row
        joined.update(row) if joined is not None else rows.append(row)
    write(rows, args, device)
    return rows


if __name__ == "__main__":
    main()
