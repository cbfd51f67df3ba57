"""Does this project's SASRec (or GRU4Rec) learn what RecBole's does, and does the whole-sequence protocol
(``train_protocol: sequence``) learn what RecBole's prefix protocol does? Each form of a model trains the same short
schedule (``--epochs`` epochs, no early stopping, the last epoch tested) at the model's defaults on ml-100k-seq, from
the same seed, at each of ``--seeds``: RecBole's class (SASRec and GRU4Rec; RecBole has no EAGPS), this project's, and
this project's under the whole-sequence protocol (the same targets and about the same steps an epoch). The page gives
each form's mean test NDCG@10 and Recall@10 and paired Wilcoxon tests over (seed, user) test NDCG@10 (p < 0.05: one
form ahead; else level): ours against RecBole's, and the whole-sequence protocol against ours under RecBole's.
The first two forms draw their dropout masks differently (the same distribution, ``model/dropout.py``), so the two
runs of a seed are two draws of one training, not the same training twice: equal accuracy is a test of the
distribution, which the unit tests check step by step. The protocol is a different training, so its comparison is
one of accuracy only.

    python experiments/sequential_accuracy.py                  # SASRec, GRU4Rec and EAGPS, 3 epochs, seeds 0-2
    python experiments/sequential_accuracy.py --models GRU4Rec --epochs 2 --seeds 0
    python experiments/sequential_accuracy.py --models EAGPS --strides 10   # also windows trained 10 positions apart

Each run's result is written as it finishes to ``results/performance/runs/performance/sequential-accuracy/``, and a
rerun skips the runs found there with the same settings (so a stopped machine loses one run at most). Writes
``results/performance/sequential-accuracy.md``. Wall times are not reported: runs may share the cores.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("SASRec", "GRU4Rec", "EAGPS")
# RecBole 1.2.1's class, this project's the runner resolves the name to, and that under train_protocol: sequence
FORMS = ("recbole", "ours", "sequence")
FORM_NAMES = {"recbole": "RecBole's", "ours": "ours", "sequence": "ours, whole sequences"}
# the paired comparisons: (form, against); each strided form (sequence-stride<N>) is compared with ours as well
COMPARISONS = (("ours", "recbole"), ("sequence", "ours"))
STRIDED = "sequence-stride"


def stride_of(form):
    return int(form[len(STRIDED) :])


def form_name(form):
    if form.startswith(STRIDED):
        return f"{FORM_NAMES['sequence']}, stride {stride_of(form)}"
    return FORM_NAMES[form]


def forms_of(model_name):
    """The forms a model trains in: RecBole's only where RecBole has the model."""
    from recbole_mgformer.model.recbole_sequential import recbole_sequential_model

    try:
        found = recbole_sequential_model(model_name)
    except (ModuleNotFoundError, AttributeError):
        return FORMS[1:]
    return FORMS if found.__module__.startswith("recbole.") else FORMS[1:]  # not this project's, registered there


METRIC, K = "ndcg@10", 10


def run_once(model_name, form, dataset, seed, epochs, data_path=None, config_files=()):
    """Train ``form`` of ``model_name`` for ``epochs`` epochs at ``seed`` and test its last epoch: ``(RecBole's test
    result, {user token: test NDCG@10})``."""
    from recbole.utils import get_trainer, init_seed

    from recbole_mgformer.evaluation import TopItemsRecorder, ndcg_by_user, ranking_width
    from recbole_mgformer.integration.registry import get_model
    from recbole_mgformer.model.recbole_sequential import recbole_sequential_model
    from recbole_mgformer.quick_start import build_config, prepare_data

    settings = {"seed": seed, "epochs": epochs, "eval_step": epochs, "stopping_step": epochs, "show_progress": False}
    settings.update({"state": "WARNING", **({"data_path": data_path} if data_path else {})})
    if form.startswith("sequence"):
        settings["train_protocol"] = "sequence"
    if form.startswith(STRIDED):
        settings["train_window_stride"] = stride_of(form)
    config, _ = build_config(model_name, dataset, config_file_list=list(config_files), config_dict=settings)
    train_data, valid_data, test_data = prepare_data(config)
    init_seed(seed, config["reproducibility"])
    model_class = recbole_sequential_model(model_name) if form == "recbole" else get_model(model_name)
    model = model_class(config, train_data._dataset).to(config["device"])
    trainer = get_trainer(config["MODEL_TYPE"], model_name)(config, model)
    trainer.fit(train_data, valid_data, saved=False, show_progress=False)
    recorder = TopItemsRecorder(trainer, ranking_width(config, K))
    with recorder:  # RecBole's evaluate runs without gradients
        result = trainer.evaluate(test_data, load_best_model=False, show_progress=False)
    return dict(result), ndcg_by_user(recorder.top_items_of(result), test_data._dataset, k=K)


def run_path(folder, model_name, form, seed, epochs):
    return folder / f"{model_name.lower()}-{form}-epochs{epochs}-seed{seed}.json"


def verdict_of(records, form="ours", against="recbole"):
    """The paired test of ``form`` against ``against`` over (seed, user) test NDCG@10, or None without common
    pairs."""
    from recbole_mgformer.benchmark.stats import paired_verdict

    by_form = {name: {r["seed"]: r["per_user"] for r in records if r["form"] == name} for name in (form, against)}
    return paired_verdict(by_form[form], by_form[against])


def page(records, command, epochs):
    from recbole_mgformer.benchmark.stats import format_p, relation_text

    lines = [
        "# Sequential models: this project's form against RecBole's, and the whole-sequence protocol against "
        "RecBole's, accuracy over a short schedule",
        "",
        f"Produced by `{command}`. Each form of a model trained {epochs} epochs at the model's defaults on "
        "ml-100k-seq (RecBole's for SASRec and GRU4Rec; no early stopping; the last epoch tested, every item ranked) "
        "from the same seed. RecBole's form and ours draw their dropout masks differently (the same distribution), "
        'so a seed\'s two runs are two draws of one training. "Ours, whole sequences" is ours under '
        "`train_protocol: sequence`: windows of each history with a loss at every position, the same targets and "
        "about the same steps an epoch as RecBole's prefix rows. Verdicts: paired Wilcoxon signed-rank tests over "
        "(seed, user) test NDCG@10 (p < 0.05: ahead or behind; else level), of ours against RecBole's, and of the "
        "whole-sequence protocol against ours under RecBole's protocol.",
        "",
        "| model | form | seeds | test NDCG@10 per seed | mean test NDCG@10 | mean test Recall@10 |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for model_name in MODELS:
        mine = [r for r in records if r["model"] == model_name]
        if not mine:
            continue
        strided = sorted({r["form"] for r in mine if r["form"].startswith(STRIDED)}, key=stride_of)
        for form in [*forms_of(model_name), *strided]:
            runs = sorted((r for r in mine if r["form"] == form), key=lambda r: r["seed"])
            if runs:
                per_seed = ", ".join(f"{r['test'][METRIC]:.4f}" for r in runs)
                ndcg = statistics.mean(r["test"][METRIC] for r in runs)
                recall = statistics.mean(r["test"]["recall@10"] for r in runs)
                lines.append(
                    f"| {model_name} | {form_name(form)} | {len(runs)} | {per_seed} | {ndcg:.4f} | {recall:.4f} |"
                )
        for form, against in [*COMPARISONS, *((form, "ours") for form in strided)]:
            verdict = verdict_of(mine, form, against)
            if verdict is not None:
                against_name = "ours under RecBole's protocol" if against == "ours" else FORM_NAMES[against]
                verdicts.append(
                    f"{model_name}: {form_name(form)} is {relation_text(against_name, verdict)} over "
                    f"{verdict['pairs']:,} (seed, user) pairs from {verdict['seeds']} seed(s): mean difference "
                    f"{verdict['difference']:+.4f}, {format_p(verdict['p'])}."
                )
    first = records[0]
    commits = sorted({r["commit"] for r in records}, key=[r["commit"] for r in records].index)
    lines += ["", *verdicts, ""]
    lines += [
        f"Runs: {'commit' if len(commits) == 1 else 'commits'} {', '.join(commits)} (each record names its own), "
        f"{first['machine']}, "
        + ", ".join(f"{k} {v}" for k, v in sorted(first["versions"].items()))
        + f"; seeds {sorted({r['seed'] for r in records})}; one thread each. Records: "
        "`results/performance/runs/performance/sequential-accuracy/`.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--dataset", default="ml-100k-seq")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--strides", default="", help="also train_protocol: sequence at these train_window_stride values, e.g. 10,25"
    )
    parser.add_argument("--data_path", help="folder holding <dataset>/<dataset>.inter (default: RecBole's)")
    parser.add_argument("--config_files", nargs="*", default=[], help="settings files, e.g. a sequential protocol")
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = set(models) - set(MODELS)
    if unknown:
        parser.error(f"--models: {', '.join(sorted(unknown))} not among {', '.join(MODELS)}")
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    try:
        strides = [int(x) for x in args.strides.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--strides must be whole numbers separated by commas, got {args.strides!r}")
    if any(stride < 1 for stride in strides):
        parser.error(f"--strides must be at least 1, got {args.strides!r}")
    from recbole_mgformer.benchmark.entries import parse_seeds

    seeds = parse_seeds(args.seeds)

    import torch

    from recbole_mgformer.records import code_commit, machine, package_versions, write_record

    torch.set_num_threads(args.threads)
    folder = Path(args.results) / "runs" / "performance" / "sequential-accuracy"
    command = "python experiments/sequential_accuracy.py" + "".join(f" {a}" for a in argv)
    records = []
    for seed in seeds:  # seed by seed, both models and forms: a stopped run leaves whole pairs to compare
        for model_name in models:
            for form in [*forms_of(model_name), *(f"{STRIDED}{stride}" for stride in strides)]:
                path = run_path(folder, model_name, form, seed, args.epochs)
                if path.exists():
                    records.append(json.loads(path.read_text()))
                    continue
                started = time.strftime("%Y-%m-%d %H:%M:%S")
                print(f"{started} {model_name} ({form_name(form)}), seed {seed}, {args.epochs} epochs", flush=True)
                test, per_user = run_once(
                    model_name, form, args.dataset, seed, args.epochs, args.data_path, args.config_files
                )
                record = {
                    "model": model_name,
                    "form": form,
                    "dataset": args.dataset,
                    "seed": seed,
                    "epochs": args.epochs,
                    "test": test,
                    "per_user": per_user,
                    "commit": code_commit(),
                    "machine": machine(),
                    "versions": package_versions(),
                    "threads": args.threads,
                    "command": command,
                }
                write_record(path, record)
                records.append(record)
                print(f"  test {METRIC} {test[METRIC]:.4f}", flush=True)
    text = page(records, command, args.epochs)
    (Path(args.results) / "sequential-accuracy.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
