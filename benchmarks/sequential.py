"""EAGPS against RecBole's SASRec and GRU4Rec under one sequential protocol: writes results/sequential.md.

Protocol (properties/sequential/<dataset>.yaml): each user's history in time order, the last item is the
test target and the one before it the validation target (leave-one-out), every item ranked, the epoch with
the best valid NDCG@10 is tested; Recall, MRR and NDCG at 5 and 10. Every model runs with its defaults
(``properties/model/EAGPS.yaml``, RecBole's own for SASRec and GRU4Rec).

    python benchmarks/sequential.py                                   # all models, both datasets, seed 2020
    python benchmarks/sequential.py --datasets ml-100k --models EAGPS --seeds 2020,2021,2022
    python benchmarks/sequential.py --epochs 3 --runs /tmp/runs --table /tmp/sequential.md   # a quick smoke run
    python benchmarks/sequential.py --models EAGPS --ea_norm=softmax  # any --key=value overrides every run

Each run leaves a JSON record in results/runs/sequential/<dataset>/; finished runs are skipped on a rerun, and an
interrupted run continues from its last epoch (checkpoints in saved/sequential/<dataset>/, see --checkpoint_dir).
"""

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.recorded_run import run_and_record  # noqa: E402
from recbole_mgformer.benchmark import setup_run, slug  # noqa: E402
from recbole_mgformer.cli import parse_overrides  # noqa: E402
from recbole_mgformer.data.sources import ensure_dataset  # noqa: E402
from recbole_mgformer.records import display_path, mean_std, notes_lines, read_records  # noqa: E402
from recbole_mgformer.resume import fit_resumably, forget_resume_state  # noqa: E402

MODELS = ("EAGPS", "SASRec", "GRU4Rec")
NOTES = ROOT / "results" / "notes" / "sequential.md"  # hand-written reading of the table, appended to it
DATASETS = ("ml-100k", "amazon-beauty")
METRICS = ("recall@5", "recall@10", "mrr@5", "mrr@10", "ndcg@5", "ndcg@10")


def protocol_file(dataset):
    path = ROOT / "properties" / "sequential" / f"{dataset}.yaml"
    if not path.is_file():
        raise SystemExit(f"no sequential protocol for {dataset!r}: write {path.relative_to(ROOT)} first")
    return path


def variant_name(model, overrides):
    return " ".join([model] + [f"{key}={value}" for key, value in sorted(overrides.items())])


def run_one(model, dataset, seed, overrides, runs_dir, data_path, checkpoint_dir, command):
    """Train and test one (model, dataset, seed); returns the record, or None when it already exists.

    The run's best epoch is kept in ``checkpoint_dir/<dataset>/<variant>-seed<seed>.pth`` and its last epoch
    beside it, so an interrupted run resumes on a rerun.
    """
    variant = variant_name(model, overrides)
    label = f"{variant} on {dataset}, seed {seed}"
    record_path = Path(runs_dir) / dataset / f"{slug(variant)}-seed{seed}.json"
    checkpoint = Path(checkpoint_dir) / dataset / f"{slug(variant)}-seed{seed}.pth"

    def train():
        ensure_dataset(dataset, data_path)
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        config_dict = {"seed": seed, "data_path": str(data_path), "show_progress": False,
                       "checkpoint_dir": str(checkpoint.parent), **overrides}
        config, _, trainer, (train_data, valid_data, test_data) = setup_run(
            model, dataset, [str(protocol_file(dataset))], config_dict)
        best_valid_result, timer = fit_resumably(trainer, train_data, valid_data, checkpoint, label)
        started = time.perf_counter()
        test_result = trainer.evaluate(test_data, load_best_model=True, show_progress=False)
        # training and evaluation time of every process the run took (the data preparation left out)
        seconds = sum(timer.train_seconds) + sum(timer.valid_seconds) + time.perf_counter() - started
        return {"best_valid_result": best_valid_result, "test_result": test_result,
                "details": {**timer.summary(config["valid_metric_bigger"]), "seconds": round(seconds, 1)}}

    record = run_and_record(record_path, label, train,
                            {"variant": variant, "model": model, "dataset": dataset, "overrides": overrides,
                             "seed": seed, "command": command}, "ndcg@10")
    if record is not None:
        forget_resume_state(checkpoint)
    return record


def render_dataset(dataset, records, order):
    header = ["variant", "seeds", "valid NDCG@10"] + [f"test {m.replace('recall', 'Recall').replace('mrr', 'MRR').replace('ndcg', 'NDCG')}"
                                                       for m in METRICS] + ["minutes"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    by_variant = {}
    for record in records:
        by_variant.setdefault(record["variant"], []).append(record)
    rank = {model: i for i, model in enumerate(order)}
    for name in sorted(by_variant, key=lambda n: (rank.get(by_variant[n][0]["model"], len(rank)), n)):
        group = by_variant[name]
        cells = [mean_std([r["valid"]["ndcg@10"] for r in group])]
        cells += [mean_std([r["test"][metric] for r in group]) for metric in METRICS]
        minutes = statistics.mean(r["seconds"] for r in group) / 60
        rows.append(f"| {name} | {len(group)} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    return [f"## {dataset}", "", f"Protocol: `properties/sequential/{dataset}.yaml`.", "", *rows, ""]


def render(records, runs_dir, order=MODELS, notes=None):
    lines = ["# Sequential recommendation: EAGPS, SASRec, GRU4Rec", "",
             "Leave-one-out on each user's time-ordered history (last item: test, the one before: validation), "
             "every item ranked, the epoch with the best valid NDCG@10 tested. Each model runs with its defaults "
             "(`properties/model/EAGPS.yaml`; RecBole 1.2.1's own for SASRec and GRU4Rec); a variant's name lists "
             "the overrides it ran with. Values are means ± standard deviation over seeds.", ""]
    runs_shown = display_path(runs_dir, ROOT)
    lines += [f"Records: `{runs_shown}/<dataset>/`.", ""]
    for dataset in sorted({r["dataset"] for r in records}, key=lambda d: (DATASETS + (d,)).index(d)):
        lines += render_dataset(dataset, [r for r in records if r["dataset"] == dataset], order)
    commands = sorted({r["command"] for r in records})
    provenance = sorted({(r["commit"], r["machine"], r["versions"]["torch"], r["versions"]["recbole"]) for r in records})
    lines += ["Commands: " + "; ".join(f"`{c}`" for c in commands) + ".", "",
              "Runs: " + "; ".join(f"commit {c}, {m}, torch {t}, recbole {rb}" for c, m, t, rb in provenance)
              + f"; seeds {sorted({r['seed'] for r in records})}.", ""]
    return "\n".join(lines + notes_lines(notes))


def all_records(runs_dir):
    folders = sorted(p for p in Path(runs_dir).iterdir() if p.is_dir()) if Path(runs_dir).is_dir() else []
    return [record for folder in folders for record in read_records(folder)]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated model names")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated dataset names")
    parser.add_argument("--seeds", default="2020", help="comma-separated seeds")
    parser.add_argument("--epochs", type=int, default=None, help="cap the epochs (recorded as an override)")
    parser.add_argument("--data_path", default=str(ROOT / "dataset"), help="RecBole's data_path; known datasets "
                        "are imported here (ml-100k always comes from RecBole's own copy)")
    parser.add_argument("--runs", default=str(ROOT / "results" / "runs" / "sequential"), help="folder of JSON records")
    parser.add_argument("--table", default=str(ROOT / "results" / "sequential.md"), help="markdown table to write")
    parser.add_argument("--checkpoint_dir", default=str(ROOT / "saved" / "sequential"),
                        help="per-run checkpoints, for resuming")
    args, rest = parser.parse_known_args(argv)
    overrides = parse_overrides(rest)
    if args.epochs is not None:
        overrides["epochs"] = args.epochs
    models = [m for m in args.models.split(",") if m]
    datasets = [d for d in args.datasets.split(",") if d]
    for dataset in datasets:
        protocol_file(dataset)
    command = shlex.join(["python", "benchmarks/sequential.py", *argv])
    runs_dir = Path(args.runs)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for dataset in datasets:
            for model in models:
                run_one(model, dataset, seed, overrides, runs_dir, Path(args.data_path), args.checkpoint_dir, command)
    table = Path(args.table)
    table.parent.mkdir(parents=True, exist_ok=True)
    notes = NOTES if table == ROOT / "results" / "sequential.md" else None
    table.write_text(render(all_records(runs_dir), runs_dir, tuple(models) + MODELS, notes))
    print(f"wrote {table}")


if __name__ == "__main__":
    main()
