"""One training step of a model as RecBole 1.2.1 writes it beside this project's model of the same name, which
replaces it (SGL: the same losses on CSR graphs with a one-buffer InfoNCE; LightGCN: the same model propagated
through a symmetric CSR graph), with the tuned settings, if any, on the real training split of a dataset.

    python experiments/recbole_step.py                     # SGL on amazon-beauty, batch 2048, 1 then 2 threads
    python experiments/recbole_step.py --model LightGCN --dataset yelp2018-full --threads 2

Both models start from the same weights (and SGL the same views); each repeat times ``--steps`` steps of one, then
of the other (interleaved, so a noisy neighbour slows both alike), after a warm-up step, at each thread count in
turn. The first batch's losses of the two are compared too (they must agree to float32 rounding). Writes a JSON
record to results/performance/runs/performance/ and the table to results/performance/<model>_step-<dataset>.md.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# the models this project replaces under RecBole's name with the same training step
MODELS = ("SGL", "LightGCN")


def build_pair(model_name, dataset, batch_size, n_batches, overrides):
    """``{"RecBole's <model>": ..., "this project's <model>": ...}`` with the same weights (and SGL's views), and
    ``n_batches`` training batches."""
    import importlib

    import numpy as np

    from recbole_mgformer.quick_start import build_config, prepare, tuned_config_file

    recbole_module = importlib.import_module(f"recbole.model.general_recommender.{model_name.lower()}")
    recbole_class = getattr(recbole_module, model_name)
    tuned = tuned_config_file(model_name, dataset)
    config, _ = build_config(
        model_name,
        dataset,
        [tuned] if tuned else [],
        {"train_batch_size": batch_size, "state": "WARNING", "show_progress": False, **overrides},
    )
    project, _, (train_data, _, _) = prepare(config)
    recbole = recbole_class(config, train_data._dataset).to(config["device"])
    recbole.load_state_dict(project.state_dict())
    for model in (recbole, project):
        np.random.seed(config["seed"])  # SGL draws its views from numpy's global generator
        model.train()
    batches = []
    for batch in train_data:
        batches.append(batch)
        if len(batches) == n_batches:
            break
    return {f"RecBole's {model_name}": recbole, f"this project's {model_name}": project}, batches, config


def thread_counts(text):
    """``--threads``: a comma-separated list of positive thread counts."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1 or 1,2, got {text!r}")
    return counts


def time_steps(models, start, batches, config, repeats, threads):
    """Seconds of ``len(batches) - 1`` steps per model per repeat, interleaved, on ``threads``, each model from the
    weights ``start``."""
    import torch

    from experiments.step_time import train_step

    torch.set_num_threads(threads)
    runs = []
    for name, model in models.items():
        model.load_state_dict(start)
        optimizer = torch.optim.Adam(model.parameters(), lr=config["learning_rate"])
        train_step(model, optimizer, batches[0])  # warm-up: caches, Adam's moments
        runs.append({"name": name, "model": model, "optimizer": optimizer, "seconds": []})
    for repeat in range(repeats):
        for run in runs:
            for batch in batches[1:]:
                started = time.perf_counter()
                train_step(run["model"], run["optimizer"], batch)
                run["seconds"].append(time.perf_counter() - started)
        print(
            f"{threads} thread(s), repeat {repeat}: "
            + ", ".join(f"{r['name']} {1e3 * statistics.median(r['seconds']):.0f} ms" for r in runs),
            flush=True,
        )
    return runs


def main(argv=None):
    import torch

    from experiments.recorded_run import timing_provenance, write_table
    from recbole_mgformer.quick_start import tuned_config_file
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="SGL", choices=MODELS)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--threads", type=thread_counts, default=[1, 2], help="thread counts, e.g. 1,2 (default)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per model per repeat")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument("--data_path", help="folder holding <dataset>/<dataset>.inter (default: RecBole's data_path)")
    args = parser.parse_args(argv)
    commit = git_commit(ROOT)
    overrides = {"data_path": args.data_path} if args.data_path else {}
    models, batches, config = build_pair(args.model, args.dataset, args.batch_size, 1 + args.steps, overrides)
    with torch.no_grad():
        losses = [float(model.calculate_loss(batches[0])) for model in models.values()]
    start = {key: value.clone() for key, value in models[f"RecBole's {args.model}"].state_dict().items()}
    records = []
    for threads in args.threads:
        runs = time_steps(models, start, batches, config, args.repeats, threads)
        base = statistics.median(runs[0]["seconds"])
        records += [
            {
                "model": r["name"],
                "threads": threads,
                "step_ms_median": round(1e3 * statistics.median(r["seconds"]), 1),
                "step_ms_min": round(1e3 * min(r["seconds"]), 1),
                "step_ms_max": round(1e3 * max(r["seconds"]), 1),
                "ratio_to_recbole": round(statistics.median(r["seconds"]) / base, 2),
                "first_loss": loss,
                "steps_timed": len(r["seconds"]),
            }
            for r, loss in zip(runs, losses)
        ]
    settings = {
        "embedding_size": config["embedding_size"],
        "n_layers": config["n_layers"],
        **({"type": config["type"]} if args.model == "SGL" else {}),
        "batch_size": args.batch_size,
        "threads": args.threads,
    }
    provenance = timing_provenance(commit, args.repeats, settings)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        Path(args.results) / "runs" / "performance" / f"{args.model.lower()}-step-{args.dataset}-{stamp}.json",
        {"records": records, "provenance": provenance, "versions": package_versions()},
    )
    lines = [
        f"# {args.model}'s training step on {args.dataset}",
        "",
        f"Produced by `python experiments/recbole_step.py --model {args.model} --dataset {args.dataset}` (d "
        f"{config['embedding_size']}, {config['n_layers']} layers, batch {args.batch_size}"
        f"{', the tuned settings' if tuned_config_file(args.model, args.dataset) else ''}): "
        f"one step (`calculate_loss` + backward + Adam) of RecBole 1.2.1's {args.model} and of this project's "
        f"(`model/general_recommender/{args.model.lower()}.py`), from the same weights, interleaved in one "
        f"process, at each thread count. Their first-batch losses: {losses[0]:.6g} and {losses[1]:.6g}.",
        "",
        "| threads | model | step ms (median) | min-max | ratio to RecBole's |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['threads']} | {r['model']} | {r['step_ms_median']} | {r['step_ms_min']}-{r['step_ms_max']} | "
        f"{r['ratio_to_recbole']} |"
        for r in records
    ]
    write_table(Path(args.results) / f"{args.model.lower()}_step-{args.dataset}.md", lines, provenance)


if __name__ == "__main__":
    main()
