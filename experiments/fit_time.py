"""The fit of each closed-form model (RecBole's traditional path: EASE, ItemKNN, SLIMElastic, and any model fit in its
constructor) on one CPU core, against two targets: Amazon-Beauty in under 2 minutes, Gowalla in under 10.

    python experiments/fit_time.py                   # EASE,ItemKNN,SLIMElastic on amazon-beauty,gowalla
    python experiments/fit_time.py --models EASE --datasets amazon-beauty --timeout 600

Each (model, dataset) fits in a process of its own, with OMP/MKL/OpenBLAS threads and torch's set to 1 before
numpy loads, so the time is one core's and the peak memory (``getrusage``'s max RSS) is that fit's alone. The time
is the model's constructor, where RecBole's traditional models fit; loading and splitting the data is left out, as
in the runner. A model's tuned settings (``properties/benchmark/<dataset>/<Model>.yaml``) apply where they exist.
Writes a JSON record to results/performance/runs/performance/ and the table to results/performance/fit_time.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"amazon-beauty": 120, "gowalla": 600}  # seconds on one core
ONE_THREAD = {
    name: "1"
    for name in (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
    )
}


def comma_list(text):
    return [part.strip() for part in text.split(",") if part.strip()]


def check_models(names):
    """The class names of ``names``; an error for an unknown model or one that is not fit in its constructor."""
    from recbole_mgformer.integration.registry import fits_once, get_model

    classes = []
    for name in names:
        cls = get_model(name)  # ValueError listing the available models
        if not fits_once(cls):
            raise ValueError(
                f"{cls.__name__} is not a closed-form model: it trains over epochs, not in its "
                "constructor (RecBole's traditional path); time it with experiments/epoch_time.py"
            )
        classes.append(cls.__name__)
    return classes


def check_dataset(name, data_path):
    """Import ``name`` if this project knows its source, then make sure RecBole will find its interactions; an
    error naming what is missing otherwise."""
    from recbole_mgformer.data.sources import ensure_dataset, source_folder

    try:
        ensure_dataset(name, data_path)
    except FileNotFoundError as error:
        raise ValueError(f"dataset {name!r} is not available: {error}") from None
    folder = source_folder(name, data_path)
    if not any(folder.glob(f"{name}*.inter")):
        raise ValueError(
            f"dataset {name!r} is not available: {folder} holds no {name}.inter (nor split files "
            f"{name}.<part>.inter), and this project has no importer for it; import it into "
            f"{Path(data_path) / name} first, or pass --data_path with the folder that holds it"
        )


def fit_once(model, dataset, data_path):
    """In this process: load the data, then fit ``model`` once, timing its constructor; returns a record."""
    import gc
    import resource

    import torch
    from recbole.utils import init_seed

    from recbole_mgformer.quick_start import build_config, prepare_data, tuned_config_file
    from recbole_mgformer.records import display_path

    torch.set_num_threads(1)
    tuned = tuned_config_file(model, dataset)
    config, model_class = build_config(
        model,
        dataset,
        [tuned] if tuned else [],
        {"data_path": data_path, "state": "WARNING", "show_progress": False, "use_gpu": False},
    )
    train_data, _, _ = prepare_data(config)
    init_seed(config["seed"], config["reproducibility"])
    gc.collect()
    before = _current_rss_kb()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.perf_counter(), time.process_time()
    fitted = model_class(config, train_data._dataset)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    del fitted
    dataset_obj = train_data._dataset
    return {
        "model": model_class.__name__,
        "dataset": dataset,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu_seconds, 2),
        "peak_rss_mb": round(peak / 1024),
        "fit_rss_mb": round((peak - before) / 1024) if peak > peak_before else None,
        "users": int(dataset_obj.user_num),
        "items": int(dataset_obj.item_num),
        "train_interactions": int(dataset_obj.inter_num),
        "torch_threads": torch.get_num_threads(),
        "blas_threads": _blas_threads(),
        "tuned_config": display_path(tuned, ROOT) if tuned else None,
        "settings": {key: _plain(config[key]) for key in _model_keys(model_class)},
    }


def _current_rss_kb():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _blas_threads():
    """The thread counts of the BLAS and OpenMP libraries loaded (threadpoolctl, with scikit-learn), or None."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return sorted({info["num_threads"] for info in threadpool_info()})


def _model_keys(model_class):
    """The keys of the model's own YAML (``properties/model/`` or RecBole's), for the table's settings column."""
    import yaml
    from recbole.config import Config

    from recbole_mgformer.config.defaults import model_config_file

    path = model_config_file(model_class.__name__)
    if path is None:
        import recbole

        path = Path(recbole.__file__).parent / "properties" / "model" / f"{model_class.__name__}.yaml"
    if not Path(path).is_file():
        return []
    return list(yaml.load(Path(path).read_text(), Loader=Config._build_yaml_loader(None)) or {})


def _plain(value):
    return value if isinstance(value, (bool, int, float, str, type(None))) else str(value)


def run_child(model, dataset, data_path, timeout):
    """One fit in a fresh process on one thread: its record, or one that says how it failed (with the process's
    peak memory, from ``wait4``, where it was stopped)."""
    with tempfile.TemporaryDirectory() as folder:
        out, log = Path(folder) / "record.json", Path(folder) / "stderr.txt"
        env = {
            **os.environ,
            **ONE_THREAD,
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
            ),
        }
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "--models",
            model,
            "--datasets",
            dataset,
            "--data_path",
            str(data_path),
            "--out",
            str(out),
        ]
        with open(log, "w") as stderr:
            child = subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=stderr)
            deadline, status, usage = time.monotonic() + timeout, None, None
            while status is None:
                pid, code, rusage = os.wait4(child.pid, os.WNOHANG)
                if pid:
                    status, usage = os.waitstatus_to_exitcode(code), rusage
                elif time.monotonic() > deadline:
                    child.kill()
                    _, code, usage = os.wait4(child.pid, 0)
                    status = "timeout"
                else:
                    time.sleep(0.2)
            child.returncode = -1  # reaped here; keeps Popen from waiting again
        peak = round(usage.ru_maxrss / 1024)  # KiB on Linux: the whole process, data included
        if status == "timeout":
            return {
                "model": model,
                "dataset": dataset,
                "seconds": None,
                "peak_rss_mb": peak,
                "error": f"not done after {timeout:g} s",
            }
        if status != 0 or not out.is_file():
            lines = [line for line in log.read_text().splitlines() if line.strip()]
            why = (
                f"killed by signal {-status} (out of memory?)"
                if status < 0
                else (lines[-1] if lines else f"exit status {status}")
            )
            return {"model": model, "dataset": dataset, "seconds": None, "peak_rss_mb": peak, "error": why}
        return json.loads(out.read_text())


def verdict(record):
    """``pass``, ``fail`` or ``-`` (no target for the dataset) against the dataset's target."""
    target = TARGETS.get(record["dataset"])
    if target is None:
        return "-"
    return "pass" if record.get("seconds") is not None and record["seconds"] < target else "fail"


# Keys of a model's YAML that are not its settings: RecBole's fit-once plumbing, and the scoring block size
NOT_SETTINGS = frozenset({"epochs", "train_neg_sample_args", "filter_batch_size"})


def table_lines(records):
    lines = [
        "# Closed-form models: the fit on one CPU core",
        "",
        "Produced by `python experiments/fit_time.py`: each model's constructor, where it fits (RecBole's "
        "traditional path), in a process of its own with one thread (torch and OMP/MKL/OpenBLAS), the data "
        "loaded and split before the clock starts; CPU s: the process time of the fit (wall time on quiet "
        "cores). Peak RSS: the process's maximum resident memory (data "
        "included); of it, the fit: its rise over the memory before the fit. Targets: "
        + ", ".join(f"{dataset} under {seconds // 60} min" for dataset, seconds in TARGETS.items())
        + ".",
        "",
        "| dataset | model | users x items | settings | fit s | CPU s | peak RSS MB | of it, the fit | target s | "
        "result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        settings = ", ".join(f"{k} {v}" for k, v in (r.get("settings") or {}).items() if k not in NOT_SETTINGS)
        shape = f"{r['users']:,} x {r['items']:,}" if "users" in r else ""
        seconds = f"{r['seconds']:.1f}" if r.get("seconds") is not None else r.get("error", "")
        fit_mb = r.get("fit_rss_mb")
        lines.append(
            f"| {r['dataset']} | {r['model']} | {shape} | {settings} | {seconds} | "
            f"{r.get('cpu_seconds', '')} | {r.get('peak_rss_mb', '')} | {'' if fit_mb is None else fit_mb} | "
            f"{TARGETS.get(r['dataset'], '-')} | {verdict(r)} |"
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="EASE,ItemKNN,SLIMElastic", help="comma-separated closed-form models")
    parser.add_argument("--datasets", default="amazon-beauty,gowalla", help="comma-separated")
    parser.add_argument("--data_path", default="dataset", help="RecBole's data_path; known datasets are imported here")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a fit may take before it is stopped (default: 1.5 times the dataset's target, "
        "an hour where it has none)",
    )
    parser.add_argument("--results", default=str(ROOT / "results" / "performance"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models, datasets = comma_list(args.models), comma_list(args.datasets)
    if not models or not datasets:
        parser.error("--models and --datasets each need at least one name")
    if args.timeout is not None and args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout}")
    data_path = Path(args.data_path).resolve()
    if args.child:
        record = fit_once(models[0], datasets[0], str(data_path))
        Path(args.out).write_text(json.dumps(record))
        return 0
    try:
        models = check_models(models)
        for dataset in datasets:
            check_dataset(dataset, data_path)
    except ValueError as error:
        parser.error(str(error))

    from experiments.recorded_run import write_table
    from recbole_mgformer.records import git_commit, machine, package_versions, write_record

    commit = git_commit(ROOT)
    records = []
    for dataset in datasets:
        for model in models:
            print(f"fitting {model} on {dataset} (one thread) ...", flush=True)
            record = run_child(model, dataset, data_path, args.timeout or default_timeout(dataset))
            print(
                f"  {record.get('seconds')} s, peak {record.get('peak_rss_mb')} MB, {verdict(record)}"
                + (f" ({record['error']})" if record.get("error") else ""),
                flush=True,
            )
            records.append(record)
    import sklearn

    versions = {**package_versions(), "scikit-learn": sklearn.__version__}
    provenance = (
        f"Commit {commit}, {machine()}, one thread, "
        + ", ".join(f"{name} {version}" for name, version in versions.items())
        + f", {time.strftime('%Y-%m-%d')}."
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    write_record(
        Path(args.results) / "runs" / "performance" / f"fit-time-{stamp}.json",
        {
            "records": records,
            "targets": TARGETS,
            "commit": commit,
            "machine": machine(),
            "versions": versions,
            "provenance": provenance,
        },
    )
    runs = sorted((Path(args.results) / "runs" / "performance").glob("fit-time-*.json"))
    latest, provenances = latest_records(json.loads(run.read_text()) for run in runs)
    write_table(Path(args.results) / "fit_time.md", table_lines(latest), " ".join(provenances))
    return 0


def default_timeout(dataset):
    """A fit 1.5 times over its target fails anyway; waiting longer only says by how much."""
    return 1.5 * TARGETS[dataset] if dataset in TARGETS else 3600.0


def latest_records(runs):
    """Each (dataset, model)'s record from the latest of ``runs`` (oldest first) that fit it, so runs of a few
    models add to the table instead of replacing it; and the provenance of each run a kept record comes from."""
    latest, sources = {}, {}
    for run in runs:
        for record in run["records"]:
            key = (record["dataset"], record["model"])
            latest[key], sources[key] = record, run["provenance"]
    order = sorted(latest, key=lambda key: (list(TARGETS).index(key[0]) if key[0] in TARGETS else -1, key))
    return [latest[key] for key in order], list(dict.fromkeys(sources[key] for key in order))


if __name__ == "__main__":
    sys.exit(main())
