"""Training-epoch and full-sort evaluation time of MGFormer beside LightGCN (3 layers), DirectAU and
SimGCL on one dataset, measured side by side: every (model, batch size) runs once per repeat, interleaved, each
in a fresh subprocess (so peak memory is its own), and times are reported as ratios to LightGCN in the same repeat.

    python experiments/epoch_time.py --dataset amazon-beauty --batch_sizes 256,2048 --repeats 3
    python experiments/epoch_time.py --dataset amazon-beauty --max_steps 40     # on a GPU machine, on the GPU (use_gpu)
    python experiments/epoch_time.py --models "LightGCN,MGFormer,MGFormer[key_sample_size=4096]" --batch_sizes 2048

``--max_steps`` times that many training steps after one warm-up step and scales the mean step time to the
epoch's number of steps (reported as ``epoch_seconds``; ``measured_steps`` says how many were timed).
Writes JSON records to results/runs/performance/ and the table to results/epoch_time-<dataset>.md.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.isolated import measure_in_subprocess  # noqa: E402

MODELS = {  # name -> overrides that make the comparison the issue asks for
    "MGFormer": {},
    "LightGCN": {"n_layers": 3},
    "DirectAU": {"encoder": "LightGCN"},
    "SimGCL": {},
}


def measure(model, dataset, batch_size, max_steps, overrides, evaluations=1):
    """One measurement in this process: train steps, ``evaluations`` full-sort evaluations (the first may pay for
    compiling its shapes), peak memory."""
    import resource

    import torch

    from recbole_mgformer.data.sources import ensure_dataset
    from recbole_mgformer.quick_start import build_config, prepare

    config_dict = {"train_batch_size": batch_size, "state": "WARNING", "show_progress": False, **overrides}
    config, _ = build_config(model, dataset, config_dict=config_dict)
    ensure_dataset(dataset, Path(config["data_path"]).parent)  # RecBole's data_path ends in /<dataset>
    model_instance, trainer, (train_data, valid_data, _) = prepare(config)
    optimizer = trainer.optimizer
    cuda = config["device"].type == "cuda"

    def synchronise():
        if cuda:
            torch.cuda.synchronize()

    steps_per_epoch = len(train_data)
    limit = steps_per_epoch if not max_steps else min(max_steps + 1, steps_per_epoch)
    model_instance.train()
    step_seconds = []
    for index, batch in enumerate(train_data):
        if index >= limit:
            break
        batch = batch.to(config["device"])
        synchronise()
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = model_instance.calculate_loss(batch)
        loss = sum(loss) if isinstance(loss, tuple) else loss
        loss.backward()
        optimizer.step()
        synchronise()
        step_seconds.append(time.perf_counter() - started)
    timed = step_seconds[1:] or step_seconds  # the first step pays for lazy initialisation
    evaluation_seconds = []
    for _ in range(evaluations):
        synchronise()
        started = time.perf_counter()
        trainer.evaluate(valid_data, load_best_model=False)
        synchronise()
        evaluation_seconds.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "model": model,
        "dataset": dataset,
        "batch_size": batch_size,
        "overrides": overrides,
        "steps_per_epoch": steps_per_epoch,
        "measured_steps": len(timed),
        "step_seconds_median": statistics.median(timed),
        "epoch_seconds": statistics.mean(timed) * steps_per_epoch,
        "first_step_seconds": step_seconds[0],  # with lazy initialisation and compilation
        "evaluation_seconds": evaluation_seconds[0],
        "later_evaluation_seconds": evaluation_seconds[1:],
        "peak_memory_bytes": int(peak),
        "peak_memory_kind": "cuda max_memory_allocated" if cuda else "process max RSS",
        "threads": torch.get_num_threads(),
    }


def spread(values):
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def render(records, dataset, provenance):
    lines = [
        f"# Epoch time on {dataset}",
        "",
        "Produced by `python experiments/epoch_time.py`. Each cell is min / median / max over repeats; ratios are "
        "to LightGCN (3 layers) at the same batch size in the same repeat, measured interleaved.",
        "",
        "| model | batch | epoch s | ratio to LightGCN | evaluation s | eval ratio | peak memory MiB | steps "
        "timed "
        "| threads |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["batch_size"], r["model"]) for r in records})
    for batch, model in keys:
        mine = [r for r in records if r["model"] == model and r["batch_size"] == batch]
        base = {r["repeat"]: r for r in records if r["model"] == "LightGCN" and r["batch_size"] == batch}
        ratios = [r["epoch_seconds"] / base[r["repeat"]]["epoch_seconds"] for r in mine if r["repeat"] in base]
        eval_ratios = [
            r["evaluation_seconds"] / base[r["repeat"]]["evaluation_seconds"] for r in mine if r["repeat"] in base
        ]
        lines.append(
            f"| {model} | {batch} | {spread([r['epoch_seconds'] for r in mine])} | "
            f"{spread(ratios) if ratios else ''} | {spread([r['evaluation_seconds'] for r in mine])} | "
            f"{spread(eval_ratios) if eval_ratios else ''} | "
            f"{max(r['peak_memory_bytes'] for r in mine) / 2**20:.0f} | {mine[0]['measured_steps']} | "
            f"{mine[0].get('threads', '')} |"
        )
    lines += ["", provenance, ""]
    return "\n".join(lines)


def main(argv=None):
    from experiments.recorded_run import timing_provenance, write_timing_record
    from recbole_mgformer.benchmark import parse_entry, split_models, variant_name
    from recbole_mgformer.config.command_line import parse_overrides
    from recbole_mgformer.records import git_commit

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch_sizes", default="256,2048")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max_steps", type=int, default=0, help="time this many steps per epoch (0: all)")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args, rest = parser.parse_known_args(argv)
    extra = parse_overrides(rest)
    records = []
    commit = git_commit(ROOT)  # the code the runs import, however long they take
    models = [parse_entry(entry) for entry in split_models(args.models)]  # NAME or NAME[key=value; ...]
    if ("LightGCN", {}) not in models:
        parser.error("ratios are to LightGCN: keep it in --models")
    for repeat in range(args.repeats):
        for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
            for model, entry_overrides in models:
                overrides = {**MODELS.get(model, {}), **entry_overrides, **extra}
                result = measure_in_subprocess(
                    "epoch_time", "measure", model, args.dataset, batch_size, args.max_steps, overrides
                )
                model = result["model"] = variant_name(model, entry_overrides)
                result["repeat"] = repeat
                records.append(result)
                print(
                    f"repeat {repeat} batch {batch_size} {model}: epoch {result['epoch_seconds']:.1f} s, "
                    f"evaluation {result['evaluation_seconds']:.1f} s, "
                    f"peak {result['peak_memory_bytes'] / 2**20:.0f} MiB",
                    flush=True,
                )
    provenance = timing_provenance(commit, args.repeats, extra)
    write_timing_record(args.results, "performance", args.dataset, records, provenance)
    table = Path(args.results) / f"epoch_time-{args.dataset}.md"
    table.write_text(render(records, args.dataset, provenance))
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
