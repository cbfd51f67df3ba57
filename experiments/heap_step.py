"""A training step with glibc's heap released (its defaults, ``keep_freed_memory: False``) against kept (a run's
default, ``recbole_mgformer/training/heap.py``): the step's time, its time in the kernel and its page faults.

    OMP_NUM_THREADS=1 python experiments/heap_step.py --dataset gowalla \\
        --model "MGFormer[attention=False; embedding_size=128; structural_size=128; loss=softmax; \\
                 softmax_temperature=0.2; train_protocol=user; train_user_chunk=4]"

The setting is process-wide, so each round runs one child process per setting (released, then kept), each
building the model and its first batches as ``experiments/step_time.py`` does, then ``--warmup`` untimed steps
(the kept heap grows to the step's peak in them) and ``--steps`` timed ones (``calculate_loss`` + backward + Adam).
The medians over every round's steps are reported. Writes results/performance/heap_step-<dataset>.md and a JSON
record beside it.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = {"released": False, "kept": True}


def child(args):
    """Time the steps under one heap setting; prints a JSON object of per-step lists."""
    import torch

    from experiments.step_time import build, train_step
    from recbole_mgformer.benchmark import parse_entry

    torch.set_num_threads(args.threads)
    model, overrides = parse_entry(args.model)
    overrides = {**overrides, "keep_freed_memory": SETTINGS[args.child]}
    if args.data_path:
        overrides["data_path"] = args.data_path
    instance, optimizer, batches, _ = build(
        model, args.dataset, args.batch_size, overrides, args.warmup + args.steps, "cpu"
    )
    for batch in batches[: args.warmup]:
        train_step(instance, optimizer, batch)
    seconds, kernel, faults = [], [], []
    for batch in batches[args.warmup :]:
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        train_step(instance, optimizer, batch)
        after = resource.getrusage(resource.RUSAGE_SELF)
        seconds.append(time.perf_counter() - started)
        kernel.append(after.ru_stime - before.ru_stime)
        faults.append(after.ru_minflt - before.ru_minflt)
    print(json.dumps({"seconds": seconds, "kernel": kernel, "faults": faults}))


def run_child(args, setting):
    command = [sys.executable, __file__, "--child", setting, *args.passed]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"the {setting} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    from experiments.recorded_run import timing_provenance, write_table
    from recbole_mgformer.records import git_commit, package_versions, write_record

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="gowalla")
    parser.add_argument(
        "--model",
        default="MGFormer[attention=False; embedding_size=128; structural_size=128; loss=softmax; "
        "softmax_temperature=0.2; train_protocol=user; train_user_chunk=4]",
    )
    parser.add_argument("--data_path", help="the folder holding the dataset's folder (RecBole's data_path)")
    parser.add_argument("--batch_size", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="child processes per setting, alternating")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per child")
    parser.add_argument("--warmup", type=int, default=4, help="untimed steps per child first")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument("--child", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    args.passed = list(argv if argv is not None else sys.argv[1:])  # the children's arguments, after --child
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"
    measured = {setting: {"seconds": [], "kernel": [], "faults": []} for setting in SETTINGS}
    for round_index in range(args.rounds):
        for setting in SETTINGS:
            for key, values in run_child(args, setting).items():
                measured[setting][key].extend(values)
            print(f"round {round_index} {setting}: {1e3 * statistics.median(measured[setting]['seconds']):.0f} ms")
    records = {
        setting: {
            "step_ms_median": round(1e3 * statistics.median(values["seconds"]), 1),
            "kernel_ms_median": round(1e3 * statistics.median(values["kernel"]), 1),
            "faults_median": statistics.median(values["faults"]),
            "steps_timed": len(values["seconds"]),
        }
        for setting, values in measured.items()
    }
    released, kept = (records[s]["step_ms_median"] for s in SETTINGS)
    commit = git_commit(ROOT)
    overrides = {"batch_size": args.batch_size, "threads": args.threads, "model": args.model}
    provenance = timing_provenance(commit, args.rounds, overrides) + f" Load average before the run: {load}."
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        Path(args.results) / "runs" / "performance" / f"heap-step-{args.dataset}-{stamp}.json",
        {"records": records, "provenance": provenance, "versions": package_versions(), "argv": args.passed},
    )
    lines = [
        f"# A training step on {args.dataset}: glibc's heap released against kept",
        "",
        f"Produced by `python experiments/heap_step.py {' '.join(args.passed)}`: `{args.model}`, batch "
        f"{args.batch_size}, {args.threads} thread(s); one step is `calculate_loss`, its backward and Adam's update. "
        "`released`: glibc's malloc defaults (`keep_freed_memory: False`, as RecBole runs); `kept`: freed memory kept "
        "for reuse (`recbole_mgformer/training/heap.py`, a run's default). Each setting ran in "
        f"{args.rounds} child process(es), alternating, {args.warmup} untimed steps then {args.steps} timed ones "
        'each; medians over the timed steps. "in the kernel": the step\'s system time (`getrusage`), mostly '
        "page faults.",
        "",
        "| heap | ms a step | ms in the kernel | page faults a step | speed-up |",
        "|---|---|---|---|---|",
        *(
            f"| {setting} | {r['step_ms_median']:.0f} | {r['kernel_ms_median']:.0f} | {r['faults_median']:,.0f} | "
            f"{released / r['step_ms_median']:.2f}x |"
            for setting, r in records.items()
        ),
    ]
    print(f"kept: {released / kept:.2f}x the released step's speed")
    write_table(Path(args.results) / f"heap_step-{args.dataset}.md", lines, provenance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
