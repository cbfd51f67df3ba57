"""One training step of RecBole 1.2.1's SASRec and GRU4Rec beside this project's models of the same names
(``recbole_mgformer/model/sequential_recommender/``), at RecBole's defaults on ml-100k-seq (batch 2048, windows of
``MAX_ITEM_LIST_LENGTH`` 50), one thread; and of this project's EAGPS (its own defaults, batch 2048) beside its
straightforward form, ``experiments/eagps_reference.py`` (RecBole has no EAGPS), in the reference's place.

    python experiments/sequential_step.py                               # every model, both heap settings
    python experiments/sequential_step.py --models SASRec --repeats 3 --heap released
    python experiments/sequential_step.py --profile --heap released   # torch.profiler's top ops of one step each

For each heap setting (``released``: glibc's defaults, as a RecBole run has them; ``kept``:
:func:`recbole_mgformer.training.heap.keep_freed_memory`, a process-wide setting; the models are built with
``keep_freed_memory: False``, so that the child's setting stands) a child process builds each model pair from the
same weights and times ``--steps`` steps (``calculate_loss`` + backward + Adam) of one, then of the other,
``--repeats`` times (interleaved, so a noisy neighbour slows both alike), after two warm-up steps each; the median
is reported. The pair's losses in evaluation mode on the first batch must agree (same function, no dropout). An
epoch is ``ceil(training rows / batch)`` steps; the estimate below is that times the median step (the data
loader's time is not in it). Writes results/performance/sequential-step.md and a JSON record beside it.
"""

import argparse
import copy
import json
import math
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("SASRec", "GRU4Rec", "EAGPS")
HEAPS = ("released", "kept")
# Models RecBole lacks, timed against their straightforward form instead: name -> the file that keeps it
REFERENCES = {"EAGPS": "experiments/eagps_reference.py"}


def reference_class(model_name):
    """The class a model is timed against: RecBole's of that name, or the project's kept reference form."""
    if model_name == "EAGPS":
        from experiments.eagps_reference import ReferenceEAGPS

        return ReferenceEAGPS
    from recbole_mgformer.model.recbole_sequential import recbole_sequential_model

    return recbole_sequential_model(model_name)


def reference_label(model_name):
    return f"the reference ({REFERENCES[model_name]})" if model_name in REFERENCES else "RecBole's"


ARMS = ("reference", "ours", "bf16", "sequence", "sequence bf16")  # what each of build_pair's models is


def first_batches(loader, n_batches):
    batches = []
    for batch in loader:
        batches.append(batch)
        if len(batches) == n_batches:
            break
    return batches


def with_setting(config, key, value):
    """A copy of a RecBole Config with ``key`` set to ``value``."""
    changed = copy.copy(config)
    changed.final_config_dict = {**config.final_config_dict, key: value}
    return changed


def build_pair(model_name, dataset, batch_size, n_batches, overrides, config_files=()):
    """The models of :data:`ARMS` from the same weights: RecBole's model or the reference, this project's, this
    project's at precision bf16, and this project's under ``train_protocol: sequence`` at fp32 and bf16 (None where
    it has no bf16 option); each arm's ``n_batches`` training batches (windows for the sequence arms), the number of
    training rows, each arm's steps per epoch, and the config."""
    import torch

    from recbole_mgformer.quick_start import build_config, prepare

    settings = {
        "train_batch_size": batch_size,
        "state": "WARNING",
        "show_progress": False,
        "keep_freed_memory": False,  # the heap is the child's setting (--heap), not the run's
        **overrides,
    }
    config, _ = build_config(model_name, dataset, list(config_files), settings)
    project, _, (train_data, _, _) = prepare(config)
    sequence_config, _ = build_config(
        model_name, dataset, list(config_files), {**settings, "train_protocol": "sequence"}
    )
    sequence, _, (window_data, _, _) = prepare(sequence_config)
    recbole = reference_class(model_name)(config, train_data._dataset)
    models = [recbole, project, None, sequence, None]
    for index, base_config in ((2, config), (4, sequence_config)):
        bf16 = type(project)(with_setting(base_config, "precision", "bf16"), train_data._dataset)
        if torch.bfloat16 in (getattr(bf16, "encoder_dtype", None), getattr(bf16, "matmul_dtype", None)):
            models[index] = bf16  # None where the model has no precision option
    for model in models:
        if model is not None and model is not project:
            model.load_state_dict(project.state_dict())
    prefix_batches, window_batches = first_batches(train_data, n_batches), first_batches(window_data, n_batches)
    batches = [prefix_batches] * 3 + [window_batches] * 2
    steps = [len(train_data)] * 3 + [len(window_data)] * 2
    return models, batches, len(train_data.dataset), steps, config


def train_step(model, optimizer, batch):
    optimizer.zero_grad()
    model.calculate_loss(batch).backward()
    optimizer.step()


def time_pair(models, batches, learning_rate, repeats):
    """Seconds per step of each model, ``[[...], ...]`` (None for a model that is None), interleaved repeats over
    each model's ``batches``."""
    import torch

    optimizers = [None if model is None else torch.optim.Adam(model.parameters(), lr=learning_rate) for model in models]
    timed = [index for index, model in enumerate(models) if model is not None]
    for index in timed:
        models[index].train()
        for batch in batches[index][:2]:  # warm-up: Adam's moments, the heap, the allocator's caches
            train_step(models[index], optimizers[index], batch)
    seconds = [[] if model is not None else None for model in models]
    for repeat in range(repeats):
        for index in timed:
            for batch in batches[index]:
                started = time.perf_counter()
                train_step(models[index], optimizers[index], batch)
                seconds[index].append(time.perf_counter() - started)
        medians = ", ".join(f"{label} {statistics.median(s):.3f} s" for label, s in zip(ARMS, seconds) if s)
        print(f"repeat {repeat}: {medians}", file=sys.stderr)
    return seconds


def settings(args):
    """The config overrides the command line gives."""
    overrides = {"seed": args.seed}
    if args.data_path:
        overrides["data_path"] = args.data_path
    if args.max_item_list_length:
        overrides["MAX_ITEM_LIST_LENGTH"] = args.max_item_list_length
    return overrides


def child(args):
    """Time every model pair under one heap setting; prints a JSON list of records."""
    import torch

    from recbole_mgformer.training.heap import keep_freed_memory

    kept = keep_freed_memory() if args.heap == "kept" else False
    torch.set_num_threads(args.threads)
    overrides = settings(args)
    records = []
    for name in args.models.split(","):
        models, batches, rows, steps, config = build_pair(
            name, args.dataset, args.batch_size, args.steps, overrides, args.config_files
        )
        present = [model for model in models[:3] if model is not None]
        for model in present:
            model.eval()
        with torch.no_grad():  # the prefix arms on one batch: RecBole's, ours, ours bf16
            losses = [float(model.calculate_loss(batches[0][0])) for model in present]
        seconds = time_pair(models, batches, config["learning_rate"], args.repeats)
        medians = [statistics.median(s) if s else None for s in seconds]
        bf16 = medians[2] is not None
        epochs = [None if m is None else m * n for m, n in zip(medians, steps)]  # est. seconds an epoch
        records.append(
            {
                "model": name,
                "heap": args.heap,
                "heap_kept": kept,
                "threads": torch.get_num_threads(),
                "recbole_step_s": round(medians[0], 4),
                "ours_step_s": round(medians[1], 4),
                "reference": REFERENCES.get(name, "recbole"),
                "ours_bf16_step_s": round(medians[2], 4) if bf16 else None,
                "min_max_s": [[round(min(s), 4), round(max(s), 4)] for s in seconds if s],
                "speedup": round(medians[0] / medians[1], 2),
                "speedup_bf16": round(medians[0] / medians[2], 2) if bf16 else None,
                "steps_timed": len(seconds[0]),
                "eval_losses": losses,
                "training_rows": rows,
                "steps_per_epoch": math.ceil(rows / args.batch_size),
                "max_item_list_length": config["MAX_ITEM_LIST_LENGTH"],
                "sequence_step_s": round(medians[3], 4),
                "sequence_bf16_step_s": round(medians[4], 4) if bf16 else None,
                "sequence_steps_per_epoch": steps[3],
                "sequence_windows_per_step": batches[3][0][models[3].ITEM_SEQ].shape[0],
                "epoch_speedup_sequence": round(epochs[0] / epochs[3], 2),
                "epoch_speedup_sequence_bf16": round(epochs[0] / epochs[4], 2) if bf16 else None,
            }
        )
    print(json.dumps(records))


def profile(args):
    """Print torch.profiler's costliest ops (self CPU time) of one training step of each model of each pair."""
    import torch
    from torch.profiler import profile as profiler

    from recbole_mgformer.training.heap import keep_freed_memory

    if args.heap == "kept":
        keep_freed_memory()
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        models, batches, _, _, config = build_pair(
            name, args.dataset, args.batch_size, 2, settings(args), args.config_files
        )
        labels = (reference_label(name), "this project's (fp32)", None, "this project's (fp32, whole sequences)")
        for label, model, arm_batches in zip(labels, models, batches):
            if label is None:
                continue
            optimizer = torch.optim.Adam(model.parameters(), lr=config["learning_rate"])
            model.train()
            train_step(model, optimizer, arm_batches[0])  # warm-up
            with profiler() as recorded:
                started = time.perf_counter()
                train_step(model, optimizer, arm_batches[1])
                seconds = time.perf_counter() - started
            print(f"## {label} {name}: one step, {seconds:.2f} s under the profiler (heap {args.heap})")
            print(recorded.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile_rows))


def machine():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or platform.machine()


def without_option(argv, option):
    """``argv`` less ``option``'s occurrences, as ``--option value`` or ``--option=value``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            kept.append(arg)
    return kept


def command_line(argv):
    return "python experiments/sequential_step.py" + "".join(f" {arg}" for arg in argv)


def table(records, argv, commit, versions, load, seed):
    """The markdown page."""
    lines = [
        "# Sequential training step: RecBole's models against this project's",
        "",
        f"Produced by `{command_line(argv)}` at commit {commit}: one training step (`calculate_loss` + backward + "
        "Adam) of RecBole 1.2.1's model and of this project's (`recbole_mgformer/model/sequential_recommender/`), "
        "at fp32 (the default) and at bf16, from the same weights, interleaved in one process per heap setting; "
        "the median over the timed steps. "
        "Heap `released` is glibc's default (a RecBole run's); `kept` is `keep_freed_memory()` "
        "(`recbole_mgformer/training/heap.py`, which a run of the package applies unless "
        "`keep_freed_memory: False`), a process-wide setting that changes no number. Within a row both "
        "models ran in the same process; the last column compares this project's model with the heap kept against "
        "RecBole's with the heap released (two processes, one after the other).",
        "",
        "| model | heap | RecBole step s | ours fp32 step s | ours fp32 faster by | ours bf16 step s | ours bf16 "
        "faster by | RecBole epoch s (est.) | ours fp32 epoch s (est.) | ours fp32 (kept) against RecBole (released) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    released = {r["model"]: r for r in records if r["heap"] == "released"}
    for r in records:
        cross = ""
        if r["heap"] == "kept" and r["model"] in released:
            cross = f"{released[r['model']]['recbole_step_s'] / r['ours_step_s']:.2f}x"
        bf16 = ("n/a", "n/a") if r["ours_bf16_step_s"] is None else (r["ours_bf16_step_s"], f"{r['speedup_bf16']}x")
        lines.append(
            f"| {r['model']} | {r['heap']} | {r['recbole_step_s']} | {r['ours_step_s']} | {r['speedup']}x | "
            f"{bf16[0]} | {bf16[1]} | "
            f"{r['recbole_step_s'] * r['steps_per_epoch']:.0f} | {r['ours_step_s'] * r['steps_per_epoch']:.0f} | "
            f"{cross} |"
        )
    first = records[0]
    references = sorted({r["model"] for r in records if r.get("reference", "recbole") != "recbole"})
    if references:
        lines += [
            "",
            f"RecBole has no {', '.join(references)}: in its rows the RecBole columns time the model's "
            "straightforward form kept in "
            + ", ".join(f"`{REFERENCES[name]}`" for name in references)
            + " (the same function: loss, gradients and scores held equal by the tests), at fp32; its own defaults "
            "otherwise, at the batch above. EAGPS's `precision: bf16` rounds the inputs of its training loss's "
            "output-layer matmuls (every item scored), and of its external attention where that forms the scores (not "
            "in the l2 norm's collapsed form, its default); SASRec's and GRU4Rec's, those of the encoder's.",
        ]
    lines += [
        "",
        "Losses in evaluation mode on the first batch (RecBole's or the reference's, ours fp32, ours bf16): "
        + "; ".join(f"{r['model']} ({r['heap']}) " + ", ".join(f"{x:.6f}" for x in r["eval_losses"]) for r in records)
        + ". bf16 (`precision: bf16`, off by default) rounds the encoder's matmul inputs to bf16: its accuracy has "
        "not been compared with fp32's over training.",
        "",
        f"Machine: {machine()}, {first['threads']} thread(s); load average before the run: {load}. "
        f"Versions: {', '.join(f'{k} {v}' for k, v in versions.items())}. Seed {seed}. "
        f"Training rows {first['training_rows']}, {first['steps_per_epoch']} steps per epoch at this batch; "
        f"windows of {first['max_item_list_length']} items. Epoch estimates are steps per epoch times the median "
        "step, without the data loader.",
        "",
        "## An epoch under the whole-sequence protocol",
        "",
        "`train_protocol: sequence` (`recbole_mgformer/data/sequence_windows.py`) trains this project's model on "
        "windows of each history with a loss at every position, in place of RecBole's prefix rows: the same "
        "targets each epoch, about as many per step (so about as many steps), from far fewer encoder rows. It is a "
        "protocol, not the same computation; its accuracy against RecBole's protocol is on the sequential page. "
        "The epoch is RecBole's steps at RecBole's protocol against this project's steps at the whole-sequence "
        "protocol, each an epoch's step count times the median step.",
        "",
        "| model | heap | RecBole epoch s (est.) | steps | ours, whole sequences: windows a step | steps | step s "
        "(fp32) | epoch s (fp32) | epoch faster by (fp32) | step s (bf16) | epoch faster by (bf16) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        recbole_epoch = r["recbole_step_s"] * r["steps_per_epoch"]
        bf16 = ("n/a", "n/a")
        if r["sequence_bf16_step_s"] is not None:
            bf16 = (r["sequence_bf16_step_s"], f"{r['epoch_speedup_sequence_bf16']}x")
        lines.append(
            f"| {r['model']} | {r['heap']} | {recbole_epoch:.0f} | {r['steps_per_epoch']} | "
            f"{r['sequence_windows_per_step']} | {r['sequence_steps_per_epoch']} | {r['sequence_step_s']} | "
            f"{r['sequence_step_s'] * r['sequence_steps_per_epoch']:.1f} | {r['epoch_speedup_sequence']}x | "
            f"{bf16[0]} | {bf16[1]} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dataset", default="ml-100k-seq")
    parser.add_argument("--batch_size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per model per repeat (distinct batches)")
    parser.add_argument("--seed", type=int, default=2020)
    parser.add_argument("--heap", choices=(*HEAPS, "both"), default="both")
    parser.add_argument("--max_item_list_length", type=int, help="default: the dataset's (50 on ml-100k-seq)")
    parser.add_argument("--data_path", help="folder holding <dataset>/<dataset>.inter (default: RecBole's)")
    parser.add_argument("--config_files", nargs="*", default=[], help="settings files, e.g. a sequential protocol")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument("--profile", action="store_true", help="print one profiled step of each model; no timing")
    parser.add_argument("--profile_rows", type=int, default=12)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown:
        parser.error(f"--models: {', '.join(sorted(unknown))} not among {', '.join(MODELS)}")
    if args.profile:
        return profile(args)
    if args.child:
        return child(args)

    from recbole_mgformer.records import git_commit, package_versions, write_record

    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "unknown"
    records = []
    for heap in HEAPS if args.heap == "both" else (args.heap,):
        child_argv = without_option(argv, "--heap") + ["--heap", heap, "--child"]
        run = subprocess.run(
            [sys.executable, __file__, *child_argv], capture_output=True, text=True, cwd=ROOT, check=False
        )
        if run.returncode:
            sys.stderr.write(run.stderr)
            raise SystemExit(f"the {heap} run failed")
        records += json.loads(run.stdout.strip().splitlines()[-1])
    commit = git_commit(ROOT)
    versions = {k: v for k, v in package_versions().items() if k in ("python", "torch", "recbole", "numpy")}
    text = table(records, argv, commit, versions, load, args.seed)
    results = Path(args.results)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        results / "runs" / "performance" / f"sequential-step-{stamp}.json",
        {"records": records, "command": command_line(argv), "commit": commit, "versions": versions, "load": load},
    )
    (results / "sequential-step.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
