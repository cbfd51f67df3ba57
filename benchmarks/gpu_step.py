"""MGFormer's training step on a GPU beside LightGCN's: eager, with ``auto`` sizes (one key chunk, one loss block) and
with the CPU's blocks, ``calculate_loss`` compiled as one graph, and the whole step captured in one CUDA graph (Adam
``capturable=True``) checked against the eager step; and the syncs of the trainer's epoch (issue 52). For a lent GPU:
a few minutes on an H100/H200, on a synthetic Beauty-sized graph (no data to carry). UNTESTED on a GPU so far.

    python benchmarks/gpu_step.py --device cuda --out results/performance/<gpu>     # needs RecBole importable
    python benchmarks/gpu_step.py --device cpu --users 300 --items 200 --interactions 3000 --batch_size 64 --out OUT

On a bare GPU image RecBole comes from wheels, as in benchmarks/gpu_check.sh:
``pip install --no-index --no-deps --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site:$PWD python ...``.
On a CPU it runs the eager rows and the trainer's loop (a smoke run; CPU timings belong to step_time.py).
Writes OUT/gpu_step.json and OUT/gpu_step.md.
"""

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.launch_census import CPU_DEFAULT, SyntheticGraph, build, count_step, train_step  # noqa: E402

AUTO = {"precision": "fp32", "compile": False, "key_chunk_size": "auto", "uniformity_block_size": "auto"}
BLOCKED = {**CPU_DEFAULT, "key_chunk_size": 2048, "uniformity_block_size": 256}
VARIANTS = [("LightGCN", "LightGCN", {"n_layers": 3, "reg_weight": 1e-5, "require_pow": False}),
            ("MGFormer, auto sizes (one chunk, one block on a GPU)", "MGFormer", AUTO),
            ("MGFormer, the CPU's blocks (2048-row chunks, 256-row loss blocks)", "MGFormer", BLOCKED),
            ("MGFormer attention=False, auto", "MGFormer", {**AUTO, "attention": False}),
            ("DirectAU, auto", "DirectAU", {"precision": "fp32", "uniformity_block_size": "auto"})]


def on_device(model, optimizer_kwargs, device):
    model.to(device)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3, **optimizer_kwargs)


def batches(graph, size, count, device):
    return [{key: value.to(device) for key, value in graph.batch(size, 10 + i).items()} for i in range(count)]


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_steps(model, optimizer, data, device, repeats, steps):
    for batch in data[:3]:
        train_step(model, optimizer, batch)
    times = []
    for _ in range(repeats):
        for i in range(steps):
            synchronize(device)
            started = time.perf_counter()
            train_step(model, optimizer, data[i % len(data)])
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
        row = {"variant": label, "ops_per_step": ops,
               "step_ms": time_steps(model, optimizer, batches(graph, args.batch_size, 6, device), device,
                                     args.repeats, args.steps)}
        if model_name == "MGFormer" and settings.get("attention", True):
            row["key_chunk_size"], row["uniformity_block_rows"] = (model.layers[0].key_chunk_size,
                                                                   model.uniformity_block_rows)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def compiled_row(graph, args, device):
    """``calculate_loss`` compiled with ``fullgraph=True`` (a graph break would raise), the step timed."""
    model, optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device)
    model.calculate_loss = torch.compile(model.calculate_loss, fullgraph=True)
    started = time.perf_counter()
    train_step(model, optimizer, batches(graph, args.batch_size, 1, device)[0])
    synchronize(device)
    compile_s = time.perf_counter() - started
    step_ms = time_steps(model, optimizer, batches(graph, args.batch_size, 6, device), device, args.repeats,
                         args.steps)
    return {"variant": "MGFormer, auto, calculate_loss compiled (fullgraph)", "step_ms": step_ms,
            "compile_s": round(compile_s, 1)}


def cuda_graph_row(graph, args, device, replays=20):
    """The whole step (forward, loss, backward, Adam capturable) in one CUDA graph, against the same step run
    eagerly on a twin model from the same weights and batches: per-step losses and final parameters."""
    graphed, graphed_optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device, capturable=True)
    twin, twin_optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device, capturable=True)
    twin.load_state_dict(graphed.state_dict())
    data = batches(graph, args.batch_size, replays + 3, device)
    static = {key: value.clone() for key, value in data[0].items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream (CUDA graphs' rule), mirrored by the twin
        for batch in data[:3]:
            for key in static:
                static[key].copy_(batch[key])
            train_step(graphed, graphed_optimizer, static)
    torch.cuda.current_stream().wait_stream(stream)
    for batch in data[:3]:
        train_step(twin, twin_optimizer, batch)
    cuda_graph = torch.cuda.CUDAGraph()
    graphed_optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(cuda_graph):
        static_loss = graphed.calculate_loss(static)
        static_loss.backward()
        graphed_optimizer.step()
    differences, times = [], []
    for batch in data[3:]:
        for key in static:
            static[key].copy_(batch[key])
        synchronize(device)
        started = time.perf_counter()
        cuda_graph.replay()
        synchronize(device)
        times.append(time.perf_counter() - started)
        eager_loss = train_step(twin, twin_optimizer, batch)
        differences.append(abs(static_loss.item() - eager_loss.item()) / max(abs(eager_loss.item()), 1e-12))
    parameter_difference = max(float((a - b).abs().max()) for a, b in zip(graphed.parameters(), twin.parameters()))
    return {"variant": "MGFormer, auto, whole step in one CUDA graph",
            "step_ms": round(1e3 * statistics.median(times), 3),
            "max_relative_loss_difference": max(differences), "max_parameter_difference": parameter_difference,
            "replays": len(times)}


def trainer_syncs(graph, args, device):
    """Syncs CUDA reports (set_sync_debug_mode) over one epoch of the trainer's loop (DeviceLoopMixin), and over the
    same batches in RecBole's loop."""
    from types import SimpleNamespace

    from recbole.data.interaction import Interaction
    from recbole.trainer import Trainer

    from recbole_mgformer.trainer import DeviceLoopMixin

    model, optimizer = build_on("MGFormer", AUTO, graph, args.batch_size, device)
    data = [Interaction(batch) for batch in (graph.batch(args.batch_size, 40 + i) for i in range(args.steps))]
    trainer = SimpleNamespace(model=model, optimizer=optimizer, device=device, config={"single_spec": True},
                              enable_amp=False, enable_scaler=False, clip_grad_norm=None, gpu_available=False,
                              _check_nan=lambda loss: Trainer._check_nan(None, loss))
    counts = {}
    for name, loop in (("this project's epoch", DeviceLoopMixin._device_train_epoch),
                       ("RecBole's epoch", Trainer._train_epoch)):
        loop(trainer, [Interaction(dict(batch.interaction)) for batch in data[:2]], 0)  # warm-up
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


def write(rows, args, device):
    from recbole_mgformer.records import git_commit, package_versions

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    record = {"device": name, "commit": git_commit(ROOT), "versions": package_versions(), "args": vars(args),
              "rows": rows}
    (out / "gpu_step.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [f"# MGFormer's training step on {name}", "",
             f"Synthetic graph of {args.users:,} users, {args.items:,} items, {args.interactions:,} interactions, "
             f"batch {args.batch_size}, d 64, fp32; medians of {args.repeats} x {args.steps} steps, synchronised "
             "around each. Ops: kernel-launching ops a step, counted on the CPU (benchmarks/launch_census.py).", "",
             "| variant | step ms | other |", "|---|---:|---|"]
    for row in rows:
        other = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("variant", "step_ms"))
        lines.append(f"| {row['variant']} | {row.get('step_ms', '-')} | {other} |")
    lines += ["", f"Commit {record['commit']}; " + ", ".join(f"{k} {v}" for k, v in record["versions"].items())
              + f"; command: `python benchmarks/gpu_step.py {' '.join(sys.argv[1:])}`."]
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
    parts = [trainer_syncs]
    if device.type == "cuda":
        parts = [cuda_graph_row, trainer_syncs] + ([] if args.no_compile else [compiled_row])
    for part in parts:  # each part on its own: a failure is recorded, the rest still runs
        try:
            rows.append(part(graph, args, device))
        except Exception as error:
            rows.append({"variant": part.__name__, "error": f"{type(error).__name__}: {error}"[:500]})
        print(json.dumps(rows[-1]), flush=True)
    write(rows, args, device)
    return rows


if __name__ == "__main__":
    main()
