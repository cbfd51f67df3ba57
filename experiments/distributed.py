"""Training-epoch time with 1 and 2 data-parallel processes (torch.distributed DDP).

Each setting trains one epoch of each model in fresh processes started by
``recbole_mgformer.training.distributed.launch``,
the settings interleaved within each repeat:

- ``1 x T``: one process with T threads (the usual run; the machine's cores shared by one process),
- ``P x 1``: P DDP processes (gloo on CPUs) with one thread each, every one training on 1/P of each batch.

A DDP epoch has as many steps as a single-process one (each rank takes 1/P of every global batch), so the
epoch time is what a user waits for. The time is rank 0's, which waits for the slowest rank at every step.

    python experiments/distributed.py --dataset amazon-beauty --models MGFormer,LightGCN --settings 1x1,1x2,2x1
    python experiments/distributed.py --settings 1x1,2x1,4x1        # on a machine with GPUs, P x 1 is P GPUs (nccl)
    python experiments/distributed.py --models "MGFormer[train_batch_size=2048]" \
        --table results/performance/distributed-batch.md
    python experiments/distributed.py --dataset tiny --data_path=/tmp/data --max_steps 2            # a quick smoke run

Any ``--key=value`` overrides a config setting of every run. Writes results/performance/distributed-<dataset>.md
(or ``--table``) and a JSON record in results/performance/runs/distributed/.
"""

import argparse
import sys
import time
from itertools import islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.epoch_time import spread  # noqa: E402
from experiments.recorded_run import timing_provenance, write_timing_record  # noqa: E402
from recbole_mgformer.benchmark import parse_entry, split_models, variant_name  # noqa: E402
from recbole_mgformer.config.command_line import parse_overrides  # noqa: E402
from recbole_mgformer.records import git_commit  # noqa: E402
from recbole_mgformer.training.distributed import free_port, launch, make_shared_folders  # noqa: E402


def parse_setting(text):
    """``"PxT"`` -> (processes, threads per process)."""
    try:
        processes, threads = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"cannot read setting {text!r}: write processes x threads, e.g. 2x1") from None
    if processes < 1 or threads < 1:
        raise SystemExit(f"setting {text!r}: processes and threads must be at least 1")
    return processes, threads


class FirstSteps:
    """The first ``limit`` batches of a training loader, with the attributes RecBole's training loop reads."""

    def __init__(self, loader, limit):
        self.loader, self.limit = loader, limit
        self.shuffle, self.sampler = loader.shuffle, loader.sampler

    def __iter__(self):
        return islice(iter(self.loader), self.limit)

    def __len__(self):
        return min(self.limit, len(self.loader))


def time_epoch(local_rank, model, dataset, processes, threads, port, max_steps, overrides):
    """Runs in each process: one training epoch (or its first ``max_steps`` steps), timed on rank 0."""
    import torch.distributed as dist

    try:
        return _timed_epoch(local_rank, model, dataset, processes, threads, port, max_steps, overrides)
    finally:
        # Only now, with the DDP model and its gradient reducer freed with _timed_epoch's frame: destroying the
        # process group while a reducer still holds it left gloo's destructor waiting for an exited peer.
        if dist.is_initialized():
            dist.destroy_process_group()


def _timed_epoch(local_rank, model, dataset, processes, threads, port, max_steps, overrides):
    import torch
    import torch.distributed as dist

    from recbole_mgformer.data.sources import ensure_dataset
    from recbole_mgformer.quick_start import build_config, prepare

    torch.set_num_threads(threads)
    config_dict = {"state": "WARNING", "show_progress": False, **overrides}
    if processes > 1:
        config_dict.update(
            local_rank=local_rank, nproc=processes, world_size=processes, ip="localhost", port=port, offset=0
        )
    config, _ = build_config(model, dataset, config_dict=config_dict)
    make_shared_folders(config)
    ensure_dataset(dataset, Path(config["data_path"]).parent)
    _, trainer, (train_data, _, _) = prepare(config)
    loader = FirstSteps(train_data, max_steps) if max_steps else train_data
    cuda = config["device"].type == "cuda"
    if processes > 1:
        dist.barrier()  # every rank has loaded the data: start together
    started = time.perf_counter()
    trainer._train_epoch(loader, 0)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    return {
        "model": model,
        "dataset": dataset,
        "processes": processes,
        "threads": threads,
        "device": str(config["device"]),
        "backend": config["dist_backend"] if processes > 1 else None,
        "batch_size": config["train_batch_size"],
        "steps": len(loader),
        "steps_per_epoch": len(train_data),
        "seconds": seconds,
        "epoch_seconds": seconds / len(loader) * len(train_data),
    }


def measure(model, dataset, processes, threads, max_steps, overrides, port):
    return launch(time_epoch, processes, (model, dataset, processes, threads, port, max_steps, overrides))


def render(records, dataset, provenance):
    lines = [
        f"# Data-parallel training on {dataset}",
        "",
        "Produced by `python experiments/distributed.py`. `P x T`: P processes with T threads each; with P > 1 "
        "they train with DDP, each on 1/P of every batch. Each cell is min / median / max over repeats of one "
        "training epoch; the speed-up is to `1 x 1` in the same repeat.",
        "",
        "| model | processes x threads | device | epoch s | speed-up over 1 x 1 | steps timed / epoch |",
        "|---|---|---|---|---|---|",
    ]
    for model in dict.fromkeys(r["model"] for r in records):
        mine = [r for r in records if r["model"] == model]
        base = {r["repeat"]: r["epoch_seconds"] for r in mine if (r["processes"], r["threads"]) == (1, 1)}
        for setting in dict.fromkeys((r["processes"], r["threads"]) for r in mine):
            rows = [r for r in mine if (r["processes"], r["threads"]) == setting]
            times = [r["epoch_seconds"] for r in rows]
            speedups = [base[r["repeat"]] / r["epoch_seconds"] for r in rows if r["repeat"] in base]
            lines.append(
                f"| {model} | {setting[0]} x {setting[1]} | {rows[0]['device']} | {spread(times)} | "
                f"{spread(speedups) if speedups else ''} | "
                f"{rows[0]['steps']} / {rows[0]['steps_per_epoch']} |"
            )
    lines += ["", provenance, ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="amazon-beauty")
    parser.add_argument("--models", default="MGFormer,LightGCN", help="NAME or NAME[key=value; ...], comma-separated")
    parser.add_argument("--settings", default="1x1,1x2,2x1", help="processes x threads, comma-separated")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max_steps", type=int, default=0, help="time this many steps per epoch (0: all)")
    parser.add_argument("--port", type=int, default=None, help="port of the process group (default: a free one)")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument(
        "--table", default=None, help="the table to write (default: <results>/distributed-<dataset>.md)"
    )
    args, rest = parser.parse_known_args(argv)
    overrides = parse_overrides(rest)
    settings = [parse_setting(text) for text in args.settings.split(",")]
    records = []
    commit = git_commit(ROOT)  # the code the runs import, however long they take
    for repeat in range(args.repeats):
        for model, entry_overrides in [parse_entry(entry) for entry in split_models(args.models)]:
            for processes, threads in settings:
                result = measure(
                    model,
                    args.dataset,
                    processes,
                    threads,
                    args.max_steps,
                    {**overrides, **entry_overrides},
                    args.port or free_port(),
                )
                result.update(model=variant_name(model, entry_overrides), repeat=repeat)
                records.append(result)
                print(
                    f"repeat {repeat} {result['model']} {processes} x {threads}: "
                    f"epoch {result['epoch_seconds']:.1f} s "
                    f"({result['steps']} of {result['steps_per_epoch']} steps timed)",
                    flush=True,
                )
    provenance = timing_provenance(commit, args.repeats, overrides)
    write_timing_record(args.results, "distributed", args.dataset, records, provenance)
    table = Path(args.table) if args.table else Path(args.results) / f"distributed-{args.dataset}.md"
    table.write_text(render(records, args.dataset, provenance))
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
