"""One training step (``calculate_loss`` + backward + Adam) of MGFormer beside LightGCN, DirectAU and
MGFormer without attention, measured side by side in one process on the real training split of a dataset.

    python experiments/step_time.py                                   # amazon-beauty, batch 2048, 1 thread
    python experiments/step_time.py --threads 2 --repeats 7
    python experiments/step_time.py --models "LightGCN,MGFormer,MGFormer[compile=True]"

Every model is built once; its first batches are moved to the device beforehand, so data loading is not timed.
Each repeat times ``--steps`` steps of every model in turn (interleaved, so a noisy neighbour slows all of them
alike), after warm-up steps; the table gives medians and the ratio to LightGCN's median. The matmul FLOPs of a
step are counted by ``torch.utils.flop_counter`` on the eager model; the roofs are ``torch.matmul``'s rates on the
step's own shapes, in fp32 and bf16, with the same threads. Writes a JSON record to
results/performance/runs/performance/ and the table to results/performance/step_time-<dataset>.md.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ",".join(
    [
        "LightGCN[n_layers=3]",
        "MGFormer[precision=fp32; key_chunk_size=0; compile=False]",
        "MGFormer[precision=fp32; compile=False]",
        "MGFormer[compile=False]",
        "MGFormer",
        "MGFormer[key_features=keep]",
        "MGFormer[embedding_size=128]",
        "MGFormer[attention=False; embedding_size=128]",
        "MGFormer[attention=False; precision=fp32]",
        "MGFormer[attention=False]",
        "DirectAU",
    ]
)


def build(model, dataset, batch_size, overrides, n_batches, device, config_files=()):
    """Model, Adam, and ``n_batches`` training batches already on the device; ``config_files`` under ``overrides``."""
    import torch

    from recbole_mgformer.data.sources import ensure_dataset
    from recbole_mgformer.quick_start import build_config, prepare

    config_dict = {
        "train_batch_size": batch_size,
        "state": "WARNING",
        "show_progress": False,
        "device": device,
        **overrides,
    }
    config, _ = build_config(model, dataset, list(config_files), config_dict=config_dict)
    ensure_dataset(dataset, Path(config["data_path"]).parent)  # RecBole's data_path ends in /<dataset>
    instance, trainer, (train_data, _, _) = prepare(config)
    batches = []
    for batch in train_data:
        batches.append(batch.to(config["device"]))
        if len(batches) == n_batches:
            break
    instance.train()
    optimizer = torch.optim.Adam(instance.parameters(), lr=config["learning_rate"])
    return instance, optimizer, batches, config


def train_step(model, optimizer, batch):
    optimizer.zero_grad()
    loss = model.calculate_loss(batch)
    loss = sum(loss) if isinstance(loss, tuple) else loss
    loss.backward()
    optimizer.step()


def step_flops(model, optimizer, batch):
    """Matmul FLOPs of one eager step, forward and backward (Adam has none)."""
    from torch.utils.flop_counter import FlopCounterMode

    from recbole_mgformer.model.mgformer.attention_options import AttentionBlock
    from recbole_mgformer.model.mgformer.key_summary import ChunkFunctions

    blocks = getattr(model, "layers", None) or []
    eager = [block.attention if isinstance(block, AttentionBlock) else block for block in blocks]
    saved = []
    for layer in eager:  # count the eager functions (compiled code hides its matmuls), keeping what they keep
        saved.append((layer, layer.mix, layer.mix_edges, layer.chunk_functions))
        layer.mix, layer.mix_edges = layer._mix, layer._mix_edges
        layer.chunk_functions = ChunkFunctions(keep=layer.chunk_functions.keep)
    with FlopCounterMode(display=False) as counter:
        train_step(model, optimizer, batch)
    for layer, mix, mix_edges, functions in saved:
        layer.mix, layer.mix_edges, layer.chunk_functions = mix, mix_edges, functions
    return counter.get_total_flops()


def matmul_roofs(n_nodes, width, device, repeats=10):
    """torch.matmul's rate in GFLOP/s, fp32 and bf16, on the two shapes that dominate a step: the key
    projection (n x w @ w x w) and the key sums ((2w x n) @ (n x w+1))."""
    import torch

    rates = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        best = []
        for left, right in (((n_nodes, width), (width, width)), ((2 * width, n_nodes), (n_nodes, width + 1))):
            a = torch.randn(*left, device=device).to(dtype)
            b = torch.randn(*right, device=device).to(dtype)
            flops = 2 * left[0] * left[1] * right[1]
            times = []
            for _ in range(repeats + 2):
                started = time.perf_counter()
                a @ b
                if device == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - started)
            best.append(flops / min(times[2:]) / 1e9)
        rates[name] = round(min(best), 1)  # the slower of the two shapes: a roof the whole step could reach
    return rates


def main(argv=None):
    import torch

    from experiments.recorded_run import timing_provenance, write_table
    from recbole_mgformer.benchmark import parse_entry, split_models, variant_name
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model per repeat")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per model first (compilation, caches)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    commit = git_commit(ROOT)
    entries = [parse_entry(entry) for entry in split_models(args.models)]
    if not any(model == "LightGCN" for model, _ in entries):
        parser.error("ratios are to LightGCN: keep it in --models")
    runs = []
    for model, overrides in entries:
        instance, optimizer, batches, config = build(
            model, args.dataset, args.batch_size, overrides, args.warmup + args.steps, args.device
        )
        name = variant_name(model, overrides)
        for batch in batches[: args.warmup]:
            train_step(instance, optimizer, batch)
        # torch's counter counts a sparse propagation (LightGCN, DirectAU's encoder) as a dense one: MGFormer only
        flops = step_flops(instance, optimizer, batches[0]) if model == "MGFormer" else None
        precision = getattr(instance, "matmul_dtype", torch.float32)
        runs.append(
            {
                "name": name,
                "model": instance,
                "optimizer": optimizer,
                "batches": batches[args.warmup :],
                "flops": flops,
                "precision": "bf16" if precision == torch.bfloat16 else "fp32",
                "embedding_size": config["embedding_size"],
                "seconds": [],
            }
        )
        print(f"built {name}: matmuls in {runs[-1]['precision']}", flush=True)
    for repeat in range(args.repeats):
        for run in runs:
            for batch in run["batches"]:
                if args.device == "cuda":
                    torch.cuda.synchronize()
                started = time.perf_counter()
                train_step(run["model"], run["optimizer"], batch)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                run["seconds"].append(time.perf_counter() - started)
        print(
            f"repeat {repeat}: "
            + ", ".join(f"{r['name']} {1e3 * statistics.median(r['seconds']):.0f} ms" for r in runs),
            flush=True,
        )
    n_nodes = runs[0]["model"].n_users + runs[0]["model"].n_items
    roofs = matmul_roofs(n_nodes, 128, args.device)
    base = statistics.median(next(r for r in runs if r["name"].startswith("LightGCN"))["seconds"])
    # MGFormer's own attention-free form at the same d and precision: the cost of the attention alone
    no_attention = {
        (r["precision"], r["embedding_size"]): statistics.median(r["seconds"])
        for r in runs
        if r["name"].startswith("MGFormer") and "attention=False" in r["name"]
    }
    records = []
    for run in runs:
        median = statistics.median(run["seconds"])
        achieved = run["flops"] / median / 1e9 if run["flops"] else None
        own = (
            no_attention.get((run["precision"], run["embedding_size"])) if run["name"].startswith("MGFormer") else None
        )
        records.append(
            {
                "model": run["name"],
                "precision": run["precision"],
                "step_ms_median": round(1e3 * median, 1),
                "step_ms_min": round(1e3 * min(run["seconds"]), 1),
                "step_ms_max": round(1e3 * max(run["seconds"]), 1),
                "ratio_to_lightgcn": round(median / base, 2),
                "ratio_to_attention_false": round(median / own, 2) if own else None,
                "gflop_per_step": round(run["flops"] / 1e9, 2) if achieved else None,
                "achieved_gflops": round(achieved, 1) if achieved else None,
                "fraction_of_roof": round(achieved / roofs[run["precision"]], 3) if achieved else None,
                "steps_timed": len(run["seconds"]),
            }
        )
    provenance = timing_provenance(
        commit, args.repeats, {"batch_size": args.batch_size, "threads": args.threads, "device": args.device}
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        Path(args.results) / "runs" / "performance" / f"step-time-{args.dataset}-{stamp}.json",
        {"records": records, "roofs_gflops": roofs, "provenance": provenance, "versions": package_versions()},
    )
    lines = [
        f"# Training step time on {args.dataset}",
        "",
        "Produced by `python experiments/step_time.py` (one step: `calculate_loss` + backward + Adam, batch "
        f"{args.batch_size}, {args.threads} thread(s)). Models measured interleaved in one process; ratios "
        "are to LightGCN's median in the same run. GFLOP: matmul FLOPs of one eager step "
        "(`torch.utils.flop_counter`); roof: `torch.matmul` on the step's shapes in the step's precision "
        f"(fp32 {roofs['fp32']} GFLOP/s, bf16 {roofs['bf16']} GFLOP/s).",
        "",
        "| model | matmuls | step ms (median) | min-max | ratio to LightGCN | ratio to attention=False "
        "(same d and matmuls) | GFLOP | GFLOP/s | of roof |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['step_ms_median']} | {r['step_ms_min']}-"
            f"{r['step_ms_max']} | {r['ratio_to_lightgcn']} | {r['ratio_to_attention_false'] or ''} | "
            f"{r['gflop_per_step'] or ''} | {r['achieved_gflops'] or ''} | "
            f"{format(r['fraction_of_roof'], '.0%') if r['fraction_of_roof'] else ''} |"
        )
    write_table(Path(args.results) / f"step_time-{args.dataset}.md", lines, provenance)


if __name__ == "__main__":
    main()
