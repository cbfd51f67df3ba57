"""The robustness sweep's classes of input (``experiments/robustness_sweep.py`` runs them beside its older groups):

1. paths: every importer format and every output writer given a name out of its folder, an existing target, or a
   folder nobody may write;
2. concurrency: two of each writing command started together on the same target;
3. values: atomic files the validator may accept that pandas (RecBole's reader) reads otherwise;
4. settings: combinations of settings that cannot work together, and a YAML alias bomb;
5. state: files written elsewhere and read now (a finished run resumed, a received tuning folder, pickles lying
   where RecBole would read them);
6. api: Python calls with values of the wrong shape, and options repeated on the command line.

Each case is classified as the sweep classifies its own (``robustness_sweep.classify``), then checked for the bad
outcome its class can hide: a payload's marker file (code execution), a file changed that existed before (data
loss), two commands both reporting they wrote one file (data loss), a file accepted and read otherwise (silent-wrong).
"""

import os
import pickle
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

from experiments.robustness_sweep import (
    CLEAN_HEADER,
    MARKER,
    Outcome,
    Result,
    Settings,
    call_main,
    classify,
    environment,
    kill_group,
    last_line,
    reference,
    run_command,
    write_tiny,
)

UNWRITABLE = "/proc/self/robustness/out"  # not even root may create a file under /proc/self
NA_LIKE = ["NA", "null", "None", "nan", "N/A", "NaN", "#N/A", "<NA>", "n/a", "NULL", "-nan", "1.#IND"]


class Payload:
    """Unpickling this writes the marker file in the current folder: what a received pickle could run."""

    def __reduce__(self):
        return (exec, (f"open({MARKER!r}, 'w').write('ran')",))


def marked(folder, outcome_or_verdict):
    """``code execution`` when the payload's marker appeared in ``folder`` (or the working folder)."""
    if (Path(folder) / MARKER).exists() or Path(MARKER).exists():
        return "code execution"
    return outcome_or_verdict if isinstance(outcome_or_verdict, str) else classify(outcome_or_verdict)


def in_process_error(call):
    """Run ``call()``: ``clear error`` when it raises an error of this package's own (a message for the user),
    ``traceback`` for one deep in a library, ``accepted`` when it returns."""
    from recbole_mgformer.config.input_checks import _raised_here

    try:
        call()
    except (ValueError, TypeError, OSError) as error:
        return ("clear error" if _raised_here(error) else "traceback"), f"{type(error).__name__}: {error}"[:200]
    except Exception as error:  # noqa: BLE001 - a crash is this case's outcome
        return "traceback", traceback.format_exception_only(error)[-1].strip()[:200]
    return "accepted", "returned"


def start_pair(command_a, command_b, cwd):
    """Two commands started together; their outcomes."""
    processes = [
        subprocess.Popen(
            command,
            cwd=cwd,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        for command in (command_a, command_b)
    ]
    outcomes = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=300)
            outcomes.append(Outcome(process.returncode, out, err))
        except subprocess.TimeoutExpired:
            kill_group(process)
            out, err = process.communicate()
            outcomes.append(Outcome(None, out, err))
    return outcomes


def pair_verdict(outcomes, target, contents_differ=True):
    """Both commands wrote ``target``: a data loss when both say they succeeded but the file holds one of two
    different results; one refusing (clear error) is the fix; a hang or traceback stays what it is."""
    verdicts = [classify(o) for o in outcomes]
    for bad in ("hang", "traceback"):
        if bad in verdicts:
            return bad
    if verdicts == ["accepted", "accepted"]:
        return "data loss" if contents_differ else "accepted"
    if "accepted" in verdicts and Path(target).exists():
        return "clear error"  # one wrote, the other refused
    return "silent-wrong"  # neither wrote


def python(*args):
    return [sys.executable, *args]


# ------------------------------------------------------------------------------------------------ 1. paths


def importer_sources(folder):
    """One small input of each importer format: ``{format: (argv of its inputs)}``."""
    import numpy as np
    import scipy.sparse as sp

    folder = Path(folder)
    (folder / "s.txt").write_text("u1:i1 i2\nu2:i2 i3\n")
    (folder / "l.txt").write_text("u1 i1 i2\nu2 i2 i3\n")
    (folder / "p.txt").write_text("u1\ti1\nu2\ti2\n")
    (folder / "c.csv").write_text("user,item,rating,timestamp\nu1,i1,4,2024-01-01\nu2,i2,5,2024-01-02\n")
    (folder / "t.tsv").write_text("user\titem\nu1\ti1\nu2\ti2\n")
    matrix = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 1, 1, 1]], dtype=np.float32))
    sp.save_npz(folder / "train.npz", matrix)
    sp.save_npz(folder / "test.npz", sp.csr_matrix(np.array([[0, 0, 1, 0], [1, 0, 0, 0]], dtype=np.float32)))
    return {
        "selfrec": [str(folder / "s.txt")],
        "lightgcn": [str(folder / "l.txt")],
        "pairs": [str(folder / "p.txt")],
        "csv": [str(folder / "c.csv")],
        "tsv": [str(folder / "t.tsv")],
        "npz": ["--train", str(folder / "train.npz"), "--test", str(folder / "test.npz")],
    }


def path_cases(space):
    from recbole_mgformer.data.importer import main as import_main
    from recbole_mgformer.recommend import main as recommend_main

    results = []
    folder = space.case_dir("paths")
    sources = importer_sources(folder)
    for fmt, inputs in sources.items():
        for name, label in (("../../escaped", "--name out of --output"), ("kept", "over an existing dataset")):
            case = space.case_dir(f"paths-import-{fmt}")
            existing = case / "data" / "kept"
            existing.mkdir(parents=True)
            before = {}
            for suffix in ("inter", "train.inter", "valid.inter", "test.inter"):
                path = existing / f"kept.{suffix}"
                path.write_text(CLEAN_HEADER + "\nkept\tkept\n")
                before[path] = path.read_bytes()
            argv = ["--format", fmt, "--name", name, "--output", "data", *inputs]
            outcome = call_main(import_main, argv, case)
            verdict = classify(outcome)
            escaped = list(case.parent.parent.glob("escaped*")) + list(case.parent.glob("escaped*"))
            if escaped or any(p.read_bytes() != content for p, content in before.items()):
                verdict = "data loss" if not escaped else "silent-wrong"
                for path in escaped:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            results.append(Result("paths: import", f"--format {fmt} {label}", verdict, last_line(outcome)))
    reference(space)
    checkpoint = str(space.clean["checkpoint"])
    for option, argv in (
        ("--output", ["--users", "u1", "--output", f"{UNWRITABLE}/top.csv"]),
        ("--export-embeddings", ["--export-embeddings", f"{UNWRITABLE}/vectors"]),
    ):
        outcome = call_main(recommend_main, ["--checkpoint", checkpoint, *argv], space.case_dir("paths-recommend"))
        results.append(
            Result("paths: unwritable", f"recommend {option} under /proc/self", classify(outcome), last_line(outcome))
        )
    run_case = space.case_dir("paths-run")
    outcome = space.run_py("--dataset=tiny", f"--checkpoint_dir={UNWRITABLE}", cwd=run_case)
    results.append(
        Result("paths: unwritable", "run.py --checkpoint_dir under /proc/self", classify(outcome), last_line(outcome))
    )
    from recbole_mgformer.benchmark import main as benchmark_main

    outcome = call_main(
        benchmark_main,
        [*space.benchmark_args("BPR")[:-4], "--results", UNWRITABLE, "--checkpoint_dir", "saved", "--epochs=1"],
        space.case_dir("paths-benchmark"),
    )
    results.append(
        Result("paths: unwritable", "benchmark --results under /proc/self", classify(outcome), last_line(outcome))
    )
    return results


# ------------------------------------------------------------------------------------------------ 2. concurrency


def concurrency_cases(space):
    reference(space)
    checkpoint = str(space.clean["checkpoint"])
    results = []
    folder = space.case_dir("race-recommend")
    outcomes = start_pair(
        python("-m", "recbole_mgformer.recommend", "--checkpoint", checkpoint, "--users", "u1", "--output", "top.csv"),
        python("-m", "recbole_mgformer.recommend", "--checkpoint", checkpoint, "--users", "u2", "--output", "top.csv"),
        folder,
    )
    results.append(
        Result(
            "concurrency",
            "two recommend --output top.csv",
            pair_verdict(outcomes, folder / "top.csv"),
            "; ".join(map(last_line, outcomes)),
        )
    )
    folder = space.case_dir("race-embeddings")
    outcomes = start_pair(
        python("-m", "recbole_mgformer.recommend", "--checkpoint", checkpoint, "--export-embeddings", "vectors"),
        python("-m", "recbole_mgformer.recommend", "--checkpoint", checkpoint, "--export-embeddings", "vectors"),
        folder,
    )
    verdict = pair_verdict(outcomes, folder / "vectors", contents_differ=False)
    results.append(
        Result("concurrency", "two recommend --export-embeddings vectors", verdict, "; ".join(map(last_line, outcomes)))
    )
    folder = space.case_dir("race-import")
    sources = importer_sources(folder)
    outcomes = start_pair(
        python(
            "-m",
            "recbole_mgformer.data.importer",
            "--format",
            "selfrec",
            "--name",
            "mine",
            "--output",
            "data",
            *sources["selfrec"],
        ),
        python(
            "-m",
            "recbole_mgformer.data.importer",
            "--format",
            "pairs",
            "--name",
            "mine",
            "--output",
            "data",
            *sources["pairs"],
        ),
        folder,
    )
    results.append(
        Result(
            "concurrency",
            "two imports into one dataset name",
            pair_verdict(outcomes, folder / "data" / "mine" / "mine.inter"),
            "; ".join(map(last_line, outcomes)),
        )
    )
    folder = space.case_dir("race-benchmark")
    command = python("-m", "recbole_mgformer.benchmark", *space.benchmark_args("BPR", "--epochs=1"))
    outcomes = start_pair(command, command, folder)
    records = sorted((folder / "results" / "runs" / "tiny").glob("*.json"))
    verdict = pair_verdict(outcomes, records[0] if records else folder / "none", contents_differ=False)
    if verdict == "accepted" and len(records) != 1:
        verdict = "silent-wrong"
    results.append(
        Result("concurrency", "two benchmarks of one entry and seed", verdict, "; ".join(map(last_line, outcomes)))
    )
    return results


# ------------------------------------------------------------------------------------------------ 3. values


def read_as_recbole(path):
    """The rows pandas gives RecBole's reader (``Dataset._load_feat``: the python engine, default NA values)."""
    import pandas as pd

    frame = pd.read_csv(path, sep="\t", dtype=str, engine="python", header=0)
    return frame.dropna(how="any").astype(str).values.tolist()


def value_mutations(space):
    """``(name, text, acceptable)``: ``acceptable`` False where a file that passes is one RecBole reads wrongly even
    when pandas returns its rows (two columns of one name, no item id column)."""
    clean = (space.data / "tiny" / "tiny.inter").read_text()
    header, *rows = clean.splitlines()
    cases = []
    for token in NA_LIKE:
        cases.append((f"user token {token!r}", "\n".join([header, f"{token}\ti1", *rows]) + "\n", True))
        cases.append((f"item token {token!r}", "\n".join([header, f"u1\t{token}", *rows]) + "\n", True))
    cases += [
        ("an empty user token", "\n".join([header, "\ti1", *rows]) + "\n", True),
        ("an empty item token", "\n".join([header, "u1\t", *rows]) + "\n", True),
        ("empty user and item tokens", "\n".join([header, "\t", *rows]) + "\n", True),
        ("a header column repeated", "\n".join(["user_id:token\tuser_id:token", *rows]) + "\n", False),
        ("the item id absent from the header", "\n".join(["user_id:token\tthing:token", *rows]) + "\n", False),
        ("a token opening a quote", "\n".join([header, '"u1\ti1', *rows]) + "\n", True),
        ("a quoted token", "\n".join([header, '"u1"\ti1', *rows]) + "\n", True),
        ("a token with a quote inside", "\n".join([header, 'u"1\ti1', *rows]) + "\n", True),
        ("a carriage return inside a line", "\n".join([header, "u1\ri9\ti1", *rows]) + "\n", True),
    ]
    return cases


def value_cases(space):
    from recbole_mgformer.data.atomic import AtomicFileError, validate_dataset_files

    results = []
    for index, (name, text, acceptable) in enumerate(value_mutations(space)):
        folder = space.case_dir("values")
        dataset = f"value{index}"
        (folder / dataset).mkdir()
        path = folder / dataset / f"{dataset}.inter"
        path.write_text(text)
        try:
            validate_dataset_files(Settings(data_path=str(folder / dataset), dataset=dataset))
        except AtomicFileError as error:
            results.append(Result("values: validator", name, "clear error", str(error)[:200]))
            continue
        except Exception:  # noqa: BLE001
            results.append(
                Result("values: validator", name, "traceback", traceback.format_exc().splitlines()[-1][:200])
            )
            continue
        lines = [line.split("\t") for line in text.splitlines()[1:] if line]
        try:
            same = acceptable and read_as_recbole(path) == lines
        except Exception:  # noqa: BLE001 - pandas failing on a file the validator passed
            same = False
        results.append(
            Result("values: validator", name, "accepted" if same else "silent-wrong", "the validator passed it")
        )
    return results


# ------------------------------------------------------------------------------------------------ 4. settings


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)


def settings_cases(space):
    results = []
    eval_args = "--eval_args={split: {RS: %s}, order: %s, group_by: user, mode: full}"
    cases = [
        ("valid_metric Recall@50 with topk [20]", ["--valid_metric=Recall@50"]),
        ("valid_metric of a metric not computed", ["--metrics=[Recall]", "--valid_metric=NDCG@20"]),
        ("split RS [0, 0, 1]", [eval_args % ("[0, 0, 1]", "RO")]),
        ("split RS [0.8, 0.2]", [eval_args % ("[0.8, 0.2]", "RO")]),
        ("split RS [-0.1, 0.6, 0.5]", [eval_args % ("[-0.1, 0.6, 0.5]", "RO")]),
        ("order TO without a time field", [eval_args % ("[0.8, 0.1, 0.1]", "TO")]),
        ("topk above the item count", ["--topk=[1000]", "--valid_metric=NDCG@1000"]),
        ("seed -1", ["--seed=-1"]),
        ("seed 2.5", ["--seed=2.5"]),
        ("seed 2**40", ["--seed=1099511627776"]),
        ("a filter that leaves no user", ["--user_inter_num_interval=[1000,inf)"]),
    ]
    for name, argv in cases:
        outcome = space.run_py("--dataset=tiny", "--epochs=1", *argv)
        results.append(Result("settings", name, classify(outcome), last_line(outcome)))
    from recbole_mgformer.benchmark import main as benchmark_main

    args = space.benchmark_args("BPR[seed=5]", "--epochs=1")
    args[args.index("--seeds") + 1] = "0,1"
    outcome = call_main(benchmark_main, args, space.case_dir("settings-benchmark"))
    results.append(Result("settings", "benchmark BPR[seed=5] with --seeds 0,1", classify(outcome), last_line(outcome)))
    folder = space.case_dir("settings-bomb")
    (folder / "bomb.yaml").write_text(BOMB)
    command = python(
        str(Path(__file__).resolve().parents[1] / "run.py"),
        "--model=BPR",
        "--dataset=tiny",
        f"--data_path={space.data}",
        f"--config_files={space.config} bomb.yaml",
    )
    outcome = run_command(command, folder, 60)
    results.append(Result("settings", f"a YAML alias bomb ({len(BOMB)} bytes)", classify(outcome), last_line(outcome)))
    return results


# ------------------------------------------------------------------------------------------------ 5. state


def state_cases(space):
    results = []
    reference(space)
    folder = space.case_dir("state-finished")
    finished = folder / "saved" / space.clean["checkpoint"].name
    finished.parent.mkdir(parents=True)
    shutil.copy(space.clean["checkpoint"], finished)
    before = finished.read_bytes()
    outcome = space.run_py("--dataset=tiny", f"--resume_file={finished}", cwd=folder)
    verdict = classify(outcome)
    if finished.read_bytes() != before:
        verdict = "data loss"
    elif verdict == "accepted":
        verdict = "silent-wrong"  # a finished run retrained
    results.append(Result("state", "run.py --resume_file of a finished run", verdict, last_line(outcome)))

    folder = space.case_dir("state-tune")
    experiment = folder / "tune" / "BPR-tiny"
    experiment.mkdir(parents=True)
    for name in ("tuner.pkl", "trainable.pkl", "experiment_state-2026-01-01_00-00-00.json", "searcher-state.pkl"):
        (experiment / name).write_bytes(pickle.dumps(Payload()))
    (folder / "space.yaml").write_text("learning_rate: {grid: [0.001, 0.01]}\n")
    command = python(
        "-m", "recbole_mgformer.tune", "--model", "BPR", "--dataset", "tiny", "--space", "space.yaml",
        "--search", "grid", "--data_path", str(space.data), "--config_files", str(space.config), "--results", "results",
        "--storage", str(folder / "tune"), "--verbose", "0", "--no-retrain", "--num-cpus", "1", "--epochs=1",
        "--resume",
    )  # fmt: skip
    outcome = run_command(command, folder, 2 * space.timeout)
    results.append(
        Result("state", "tune --resume of a received folder with pickles", marked(folder, outcome), last_line(outcome))
    )

    folder = space.case_dir("state-checkpoint")
    (folder / "evil.pth").write_bytes(pickle.dumps(Payload()))
    from recbole_mgformer.recommend import main as recommend_main

    outcome = call_main(recommend_main, ["--checkpoint", "evil.pth", "--users", "u1"], folder)
    results.append(Result("state", "recommend --checkpoint of a pickle", marked(folder, outcome), last_line(outcome)))

    folder = space.case_dir("state-dataset-pickle")
    data = folder / "data"
    write_tiny(data)
    for name in ("tiny-Dataset.pth", "tiny-for-BPR-dataloader.pth"):
        (folder / "saved").mkdir(exist_ok=True)
        (folder / "saved" / name).write_bytes(pickle.dumps(Payload()))
    outcome = space.run_py("--dataset=tiny", cwd=folder, data=data)
    results.append(
        Result("state", "RecBole's dataset pickles lying in saved/", marked(folder, outcome), last_line(outcome))
    )
    return results


# ------------------------------------------------------------------------------------------------ 6. api


def api_cases(space):
    from recbole_mgformer import run_recommender

    base = {"data_path": str(space.data), "epochs": 1, "state": "WARNING", "show_progress": False}
    calls = [
        (
            "config_file_list a string, not a list",
            lambda: run_recommender("BPR", "tiny", str(space.config), dict(base)),
        ),
        ("config_dict a string", lambda: run_recommender("BPR", "tiny", [str(space.config)], "epochs: 1")),
        ("model None", lambda: run_recommender(None, "tiny", [str(space.config)], dict(base))),
        ("dataset a number", lambda: run_recommender("BPR", 123, [str(space.config)], dict(base))),
        ("topk a string", lambda: run_recommender("BPR", "tiny", [str(space.config)], {**base, "topk": "20"})),
        (
            "metrics a string",
            lambda: run_recommender("BPR", "tiny", [str(space.config)], {**base, "metrics": "Recall"}),
        ),
        ("seed a string", lambda: run_recommender("BPR", "tiny", [str(space.config)], {**base, "seed": "0"})),
    ]
    results = []
    for name, call in calls:
        folder = space.case_dir("api")
        saved = os.getcwd()
        os.chdir(folder)
        try:
            verdict, detail = in_process_error(call)
        finally:
            os.chdir(saved)
        results.append(Result("api", f"run_recommender: {name}", verdict, detail))
    for argv in (["--epochs=1", "--epochs=2"], ["--learning_rate=0.01", "--learning_rate=0.1"]):
        outcome = space.run_py("--dataset=tiny", *argv)
        results.append(Result("api", f"run.py {' '.join(argv)}", classify(outcome), last_line(outcome)))
    return results


GROUPS = {
    "paths": path_cases,
    "concurrency": concurrency_cases,
    "values": value_cases,
    "settings": settings_cases,
    "state": state_cases,
    "api": api_cases,
}
