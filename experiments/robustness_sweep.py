"""A hostile user's sweep: bad atomic files, bad config files, every command-line option of ``run.py``,
``tune``, ``benchmark``, ``recommend`` and the importer given a wrong value, outputs pointed at existing files, eval
payloads, and each long command killed at a random (seeded) moment and run again. Each case is classified by its
outcome, not by the words of its message:

- clear error: the command stopped with a message and no traceback;
- recovery: the input was repaired or the rerun/resume finished (and, where checked, agrees with a clean run);
- accepted: the command finished (a wrong value that is a valid one for its option, a file still well formed);
- traceback, hang (ran past its time limit), code execution (a payload's file appeared), data loss (a file that
  existed before was replaced or removed), silent-wrong (finished with a result that differs from the clean one):
  the bad outcomes.

    python experiments/robustness_sweep.py --quick      # a sample of every group: a few minutes on 2 cores
    python experiments/robustness_sweep.py               # every case, at most ~20 minutes on 2 cores

Writes ``results/notes/robustness.md`` (``--output``) with the commit, versions, seed and machine, the counts and
every case. ``--cases atomic,kill`` keeps the groups (or case names) that start with those words.
"""

import argparse
import contextlib
import io
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, as in the subprocesses (environment())
OUTCOMES = ("clear error", "recovery", "accepted", "traceback", "hang", "code execution", "data loss", "silent-wrong")
BAD = ("traceback", "hang", "code execution", "data loss", "silent-wrong")
MARKER = "PWNED"  # what an eval or unpickling payload writes
CLEAN_HEADER = "user_id:token\titem_id:token"
TINY_YAML = (
    "eval_args: {split: {RS: [0.8, 0.1, 0.1]}, order: RO, group_by: user, mode: full}\n"
    "metrics: [Recall, NDCG]\ntopk: [20]\nvalid_metric: NDCG@20\nstate: WARNING\nshow_progress: False\n"
    "train_batch_size: 64\nepochs: 2\nembedding_size: 8\n"
)


@dataclass
class Result:
    group: str
    case: str
    outcome: str
    detail: str = ""


@dataclass
class Outcome:
    """What one command did: its exit status and output (``rc`` None: killed at its time limit)."""

    rc: object
    out: str = ""
    err: str = ""
    error: str = ""  # an in-process call's exception, formatted

    @property
    def text(self):
        return self.out + self.err + self.error


def classify(outcome):
    """The generic verdict of one command: by exit status and whether a traceback was printed."""
    if outcome.rc is None:
        return "hang"
    if "Traceback (most recent call last)" in outcome.text:
        return "traceback"
    if outcome.rc != 0:
        return "clear error" if outcome.err.strip() else "traceback"
    return "accepted"


def last_line(outcome):
    """The line that says what happened: the error's last line, or the output's on success."""
    text = outcome.out if outcome.rc == 0 and not outcome.error else outcome.err + outcome.error
    lines = [line for line in text.strip().splitlines() if line.strip()] or [
        line for line in outcome.text.strip().splitlines() if line.strip()
    ]
    return lines[-1][:200] if lines else f"exit status {outcome.rc}"


def environment():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_command(args, cwd, timeout, stdin=None):
    """A subprocess in its own session (killed with its children, Ray's included, at ``timeout``)."""
    process = subprocess.Popen(
        args,
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(stdin, timeout=timeout)
        return Outcome(process.returncode, out, err)
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        return Outcome(None, out, err)


def kill_group(process):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def call_main(main, argv, cwd):
    """``main(argv)`` in this process, as its console script would run it: SystemExit's code is the exit status,
    an escaping exception is a traceback."""
    out, err = io.StringIO(), io.StringIO()
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                value = main(argv)
                rc = value if isinstance(value, int) else 0
            except SystemExit as stop:
                rc = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                if not isinstance(stop.code, (int, type(None))):
                    err.write(str(stop.code) + "\n")
            except BaseException:  # noqa: BLE001 - a crash is this case's outcome
                return Outcome(1, out.getvalue(), err.getvalue(), traceback.format_exc())
    finally:
        os.chdir(saved)
        import logging

        logging.getLogger().handlers.clear()  # RecBole's file handlers of this case
    return Outcome(rc, out.getvalue(), err.getvalue())


# ------------------------------------------------------------------------------------------------ the workspace


def write_tiny(data, name="tiny", users=40, items=60, per_user=12, seed=0):
    """A clustered toy dataset as RecBole atomic files; returns the .inter path."""
    rng = random.Random(seed)
    lines = [CLEAN_HEADER]
    for user in range(users):
        preferred = [i for i in range(items) if i % 3 == user % 3]
        lines += [f"u{user}\ti{item}" for item in rng.sample(preferred, per_user)]
    folder = Path(data) / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.inter"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Workspace:
    root: Path
    rng: random.Random
    quick: bool
    timeout: int
    clean: dict = field(default_factory=dict)

    @property
    def data(self):
        return self.root / "data"

    @property
    def config(self):
        return self.root / "tiny.yaml"

    @property
    def blocked_path(self):
        """A path whose parent is a file: no command can write or read there."""
        return str(self.root / "a-file" / "sub")

    def case_dir(self, name):
        folder = Path(tempfile.mkdtemp(prefix=name[:40].replace("/", "_") + "-", dir=self.root / "cases"))
        return folder

    def benchmark_args(self, models, *settings):
        """The benchmark's arguments: ``models`` on the toy data, seed 0, records and checkpoints in the working
        folder, then ``settings``."""
        return [
            "--models",
            models,
            "--datasets",
            "tiny",
            "--seeds",
            "0",
            "--data_path",
            str(self.data),
            "--config_files",
            str(self.config),
            "--results",
            "results",
            "--checkpoint_dir",
            "saved",
            *settings,
        ]

    def run_py(self, *args, cwd=None, data=None, config=None):
        """run.py's ``main`` in this process (as ``python run.py`` runs it, without importing torch again)."""
        from recbole_mgformer.cli import main

        argv = ["--model=BPR", f"--data_path={data or self.data}", f"--config_files={config or self.config}", *args]
        return call_main(main, argv, cwd or self.case_dir("run"))


def setup(root, quick, seed, timeout):
    space = Workspace(Path(root), random.Random(seed), quick, timeout)
    (space.root / "cases").mkdir(parents=True, exist_ok=True)
    write_tiny(space.data)
    space.config.write_text(TINY_YAML)
    (space.root / "a-file").write_text("a file, not a folder\n")
    return space


def test_metrics(outcome):
    """The ``test`` line run.py prints, or None."""
    lines = [line for line in outcome.out.splitlines() if line.strip().startswith("test")]
    return lines[-1].split(None, 1)[1] if lines else None


def reference(space):
    """The clean run's test line (BPR, 2 epochs, seed 2020), trained once."""
    if "test" not in space.clean:
        outcome = space.run_py("--dataset=tiny", cwd=space.root)
        space.clean["test"] = test_metrics(outcome)
        space.clean["checkpoint"] = sorted((space.root / "saved").glob("BPR-*.pth"))[-1]
    return space.clean["test"]


# ------------------------------------------------------------------------------------------------ atomic files


def atomic_mutations(space):
    """``(name, bytes, acceptable)`` variants of the clean .inter: ``acceptable`` False where a file that passes
    is read wrongly (a run on it is silent-wrong), True where passing is fine (the file is still well formed)."""
    clean = (space.data / "tiny" / "tiny.inter").read_bytes()
    rng = space.rng
    lines = clean.splitlines(keepends=True)
    cases = [
        ("BOM at the start", b"\xef\xbb\xbf" + clean, True),
        ("BOM at the start of line 5", b"".join(lines[:4] + [b"\xef\xbb\xbf" + lines[4]] + lines[5:]), False),
        ("latin-1 line among UTF-8 (mixed encodings)", b"".join(lines[:6] + [b"u1\tcaf\xe9\n"] + lines[6:]), False),
        ("UTF-16 file", clean.decode().encode("utf-16"), False),
        ("NUL byte inside a token", b"".join(lines[:3] + [b"u1\ti\x001\n"] + lines[3:]), False),
        ("a row with an extra column", b"".join(lines[:8] + [b"u1\ti1\t3\n"] + lines[8:]), False),
        ("a row with one column", b"".join(lines[:8] + [b"u1\n"] + lines[8:]), False),
        ("header only", lines[0], False),
        ("empty file", b"", False),
        ("CRLF line endings", clean.replace(b"\n", b"\r\n"), True),
        ("header type misspelled", clean.replace(b"item_id:token", b"item_id:tokn", 1), False),
        ("spaces instead of tabs", clean.replace(b"\t", b" "), False),
    ]
    for index in range(3 if space.quick else 8):
        size = rng.randint(1, 400)
        cases.append((f"random bytes #{index} ({size} B)", bytes(rng.randrange(256) for _ in range(size)), False))
        cases.append(
            (f"header then random bytes #{index}", lines[0] + bytes(rng.randrange(256) for _ in range(size)), False)
        )
    for _ in range(3 if space.quick else 8):
        cut = rng.randint(1, len(clean) - 1)
        cases.append((f"truncated at byte {cut}", clean[:cut], True))  # a shorter file may still be well formed
    return cases


class Settings(dict):
    """What the validator reads of a RecBole Config, RecBole's defaults for the rest (a missing key is None, as in
    a Config)."""

    def __init__(self, **values):
        super().__init__(
            {
                "field_separator": "\t",
                "seq_separator": " ",
                "encoding": "utf-8",
                "USER_ID_FIELD": "user_id",
                "ITEM_ID_FIELD": "item_id",
                **values,
            }
        )

    def __missing__(self, key):
        return None


def atomic_cases(space):
    """Each variant through the project's validator, then (a sample in quick mode) through run.py."""
    from recbole_mgformer.data.atomic import AtomicFileError, validate_dataset_files

    results = []
    mutations = atomic_mutations(space)
    through_run = {"BOM at the start", "a row with an extra column", "latin-1 line among UTF-8 (mixed encodings)"}
    for index, (name, content, acceptable) in enumerate(mutations):
        folder = space.case_dir("atomic")
        dataset = f"fuzz{index}"
        (folder / dataset).mkdir()
        path = folder / dataset / f"{dataset}.inter"
        path.write_bytes(content)
        try:
            validate_dataset_files(Settings(data_path=str(folder / dataset), dataset=dataset))
            outcome, detail = ("accepted" if acceptable else "silent-wrong"), "the validator passed it"
        except AtomicFileError as error:
            outcome, detail = "clear error", str(error)[:200]
        except Exception:  # noqa: BLE001
            outcome, detail = "traceback", traceback.format_exc().strip().splitlines()[-1][:200]
        results.append(Result("atomic: validator", name, outcome, detail))
        if space.quick and name not in through_run:
            continue
        ran = space.run_py(f"--dataset={dataset}", data=folder)
        verdict = classify(ran)
        if verdict == "accepted":
            same = test_metrics(ran) == reference(space)
            if not acceptable:
                verdict = "silent-wrong"
            elif content.startswith(b"\xef\xbb\xbf") or b"\r\n" in content:  # the same data, marked or CRLF
                verdict = "recovery" if same else "silent-wrong"
        results.append(Result("atomic: run.py", name, verdict, last_line(ran)))
    return results


# ------------------------------------------------------------------------------------------------ config files


def config_file_cases(space):
    payload = f"__import__('os').system('touch {MARKER}') or 0.01"
    files = [
        ("a YAML list", b"- epochs: 1\n"),
        ("a tab in the indentation", b"epochs: 1\n\tembedding_size: 8\n"),
        ("a scalar", b"hello\n"),
        ("a key set twice", b"epochs: 1\nepochs: 3\n"),
        ("a UTF-8 byte-order mark", b"\xef\xbb\xbf" + TINY_YAML.encode()),
        ("latin-1 bytes", "name: caf\xe9\n".encode("latin-1")),
        ("unclosed bracket", b"topk: [10, 20\n"),
        ("an eval payload as a string value", f'learning_rate: "{payload}"\n'.encode()),
        ("an unknown YAML tag", b"epochs: !!python/object/apply:os.system ['touch PWNED']\n"),
    ]
    if space.quick:
        files = [files[i] for i in (0, 1, 4, 7)]
    results = []
    for name, content in files:
        folder = space.case_dir("config")
        path = folder / "settings.yaml"
        path.write_bytes(content)
        ran = space.run_py("--dataset=tiny", cwd=folder, config=f"{space.config} {path}")
        verdict = classify(ran)
        if (folder / MARKER).exists():
            verdict = "code execution"
        elif verdict == "accepted" and "byte-order mark" in name:
            verdict = "recovery" if test_metrics(ran) == reference(space) else "silent-wrong"
        results.append(Result("config file", name, verdict, last_line(ran)))
    for name, path in (("a missing file", "nowhere.yaml"), ("a folder", str(space.data))):
        ran = space.run_py("--dataset=tiny", config=path)
        results.append(Result("config file", name, classify(ran), last_line(ran)))
    settings = [
        "--learning_rate=abc",
        "--epochs=abc",
        "--embedding_size=[8]",
        "--topk=abc",
        "--train_batch_size=0.5",
        "--eval_args=abc",
        "--seed=abc",
        "--metrics=Recal",
    ]
    for setting in settings[:3] if space.quick else settings:  # a setting of the wrong type
        ran = space.run_py("--dataset=tiny", setting)
        results.append(Result("config file", f"a wrong-typed setting {setting}", classify(ran), last_line(ran)))
    folder = space.case_dir("payload")
    ran = space.run_py("--dataset=tiny", f"--learning_rate={payload}", cwd=folder)
    results.append(
        Result(
            "config file",
            "an eval payload on the command line",
            "code execution" if (folder / MARKER).exists() else classify(ran),
            last_line(ran),
        )
    )
    return results


# ------------------------------------------------------------------------------------------------ option types


class _Captured(Exception):
    def __init__(self, parser):
        super().__init__("parser captured")
        self.parser = parser


def parser_of(main):
    """The argparse parser ``main`` builds, caught as it starts parsing (so options other helpers add count)."""
    import argparse

    original = argparse.ArgumentParser.parse_known_args

    def capture(self, args=None, namespace=None):
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = capture
    try:
        main([])
    except _Captured as captured:
        return captured.parser
    finally:
        argparse.ArgumentParser.parse_known_args = original
    raise RuntimeError(f"{main} built no parser")


def wrong_values(action, space):
    """Values of the wrong type for one option: text for a number, an unknown choice, a value for a flag, a path
    under a file for text and paths."""
    import argparse

    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return ["=yes"]
    if action.choices:
        return ["nosuch"]
    if action.type in (int, float):
        return ["abc", "1e999"] if action.type is float else ["abc", "2.5"]
    if action.type is not None and action.type is not str:
        return ["abc"]
    return [space.blocked_path]


def option_commands(space):
    """``(command, main, base argv, workdir, in process)``: each command's options are given a wrong value over an
    otherwise valid, short call of it."""
    from recbole_mgformer.benchmark import main as benchmark_main
    from recbole_mgformer.cli import main as run_main
    from recbole_mgformer.data.importer import main as import_main
    from recbole_mgformer.recommend import main as recommend_main
    from recbole_mgformer.tune.cli import main as tune_main

    reference(space)
    source = space.root / "source.txt"
    source.write_text("u1:i1 i2\nu2:i2 i3\n")
    tiny20 = ["--config_files", str(space.config)]
    return [
        (
            "run.py",
            run_main,
            ["--model=BPR", "--dataset=tiny", f"--data_path={space.data}", f"--config_files={space.config}"],
            True,
        ),
        ("recommend", recommend_main, ["--checkpoint", str(space.clean["checkpoint"]), "--users", "u1"], True),
        (
            "benchmark",
            benchmark_main,
            space.benchmark_args("BPR", "--epochs=1"),
            True,
        ),
        ("import", import_main, ["--format", "selfrec", "--name", "imported", "--output", "data", str(source)], True),
        (
            "tune",
            tune_main,
            [
                "--model",
                "BPR",
                "--dataset",
                "tiny",
                "--data_path",
                str(space.data),
                *tiny20,
                "--samples",
                "1",
                "--num-cpus",
                "1",
                "--no-retrain",
                "--verbose",
                "0",
                "--epochs=1",
            ],
            False,
        ),
    ]


def option_cases(space):
    results = []
    for command, main, base, in_process in option_commands(space):
        parser = parser_of(main)
        actions = [a for a in parser._actions if a.option_strings and a.dest != "help"]
        if space.quick:
            actions = space.rng.sample(actions, min(len(actions), 2 if command == "tune" else 4))
        for action in actions:
            option = max(action.option_strings, key=len)
            for value in wrong_values(action, space):
                argument = option + value if value.startswith("=") else f"{option}={value}"
                argv = drop_option(base, option) + [argument]
                folder = space.case_dir(f"option-{command}")
                if in_process:
                    outcome = call_main(main, argv, folder)
                else:
                    outcome = run_command(
                        [sys.executable, "-m", "recbole_mgformer.tune", *argv], folder, min(space.timeout, 120)
                    )  # a one-trial, one-epoch search
                verdict = classify(outcome)
                results.append(Result(f"option: {command}", f"{argument}", verdict, last_line(outcome)))
    return results


def drop_option(argv, option):
    """``argv`` without ``option`` (``--x=v`` or ``--x v``), so the wrong value is the only one given."""
    kept, skip = [], False
    for index, argument in enumerate(argv):
        if skip:
            skip = False
            continue
        if argument == option:
            skip = index + 1 < len(argv) and not argv[index + 1].startswith("--")
            continue
        if argument.startswith(option + "="):
            continue
        kept.append(argument)
    return kept


# ------------------------------------------------------------------------------------------------ existing outputs


def output_cases(space):
    """Commands pointed at files and folders that exist: the files must be there, unchanged, afterwards."""
    from recbole_mgformer.data.importer import main as import_main
    from recbole_mgformer.recommend import main as recommend_main

    reference(space)
    checkpoint = str(space.clean["checkpoint"])
    results = []

    def check(name, main, argv, folder, protected):
        before = {path: path.read_bytes() for path in protected}
        outcome = call_main(main, argv, folder)
        verdict = classify(outcome)
        if any(not path.exists() or path.read_bytes() != content for path, content in before.items()):
            verdict = "data loss"
        results.append(Result("existing output", name, verdict, last_line(outcome)))

    folder = space.case_dir("output")
    (folder / "top.csv").write_text("someone's file\n")
    check(
        "recommend --output onto a file",
        recommend_main,
        ["--checkpoint", checkpoint, "--users", "u1", "--output", "top.csv"],
        folder,
        [folder / "top.csv"],
    )
    check(
        "recommend --output onto a folder",
        recommend_main,
        ["--checkpoint", checkpoint, "--users", "u1", "--output", "."],
        folder,
        [folder / "top.csv"],
    )
    (folder / "vectors").mkdir()
    (folder / "vectors" / "users.txt").write_text("my users\n")
    check(
        "recommend --export-embeddings into a non-empty folder",
        recommend_main,
        ["--checkpoint", checkpoint, "--export-embeddings", "vectors"],
        folder,
        [folder / "vectors" / "users.txt"],
    )
    check(
        "recommend --export-embeddings onto a file",
        recommend_main,
        ["--checkpoint", checkpoint, "--export-embeddings", "top.csv"],
        folder,
        [folder / "top.csv"],
    )
    source = folder / "source.txt"
    source.write_text("u1:i1 i2\n")
    (folder / "data" / "tiny").mkdir(parents=True)
    (folder / "data" / "tiny" / "tiny.inter").write_text(CLEAN_HEADER + "\nkept\tkept\n")
    check(
        "import over an existing dataset",
        import_main,
        ["--format", "selfrec", "--name", "tiny", "--output", "data", str(source)],
        folder,
        [folder / "data" / "tiny" / "tiny.inter"],
    )
    return results


# ------------------------------------------------------------------------------------------------ dataset names


def dataset_name_cases(space):
    results = []
    names = ["../data/tiny", str(space.data / "tiny"), "tiny/tiny", " tiny"]
    for name in names if not space.quick else names[:2]:
        ran = space.run_py(f"--dataset={name}")
        results.append(Result("dataset name", f"--dataset={name}", classify(ran), last_line(ran)))
    return results


# ------------------------------------------------------------------------------------------------ kills


def wait_killed(process, delay):
    """Kill ``process`` and its children ``delay`` seconds after it started (if still running); True if killed."""
    try:
        process.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.wait()
        return True


def start(args, cwd):
    return subprocess.Popen(
        args, cwd=cwd, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def kill_cases(space):
    """Each long command killed at a seeded random moment, then run again (resumed where it can be)."""
    results = []
    reference(space)
    repeats = 1 if space.quick else 3
    timed = {}  # each command's uninterrupted duration and test line, so a kill lands inside it
    epochs = [f"--epochs={4 if space.quick else 6}", "--stopping_step=100"]
    for _ in range(repeats):
        folder = space.case_dir("kill-run")
        earlier = folder / "saved" / "BPR-earlier-run.pth"  # another run's file: must survive
        earlier.parent.mkdir(parents=True)
        earlier.write_bytes(b"an earlier run's checkpoint")
        command = [
            sys.executable,
            str(ROOT / "run.py"),
            "--model=BPR",
            "--dataset=tiny",
            f"--data_path={space.data}",
            f"--config_files={space.config}",
            *epochs,
        ]
        if "run.py" not in timed:
            began = time.monotonic()
            clean = run_command(command, space.case_dir("kill-run-clean"), space.timeout)
            timed["run.py"] = (time.monotonic() - began, test_metrics(clean))
        delay = round(space.rng.uniform(0.2, 0.9) * timed["run.py"][0], 1)
        killed = wait_killed(start(command, folder), delay)
        latest = sorted((folder / "saved").glob("*.latest.pth"))
        rerun = command + ([f"--resume_file={latest[-1]}"] if latest else [])
        ran = run_command(rerun, folder, space.timeout)
        verdict = classify(ran)
        if verdict == "accepted":  # resumed or started again, it must end as the uninterrupted run did
            verdict = "recovery" if test_metrics(ran) == timed["run.py"][1] else "silent-wrong"
        if earlier.read_bytes() != b"an earlier run's checkpoint":
            verdict = "data loss"
        how = f"killed after {delay} s" if killed else f"finished before {delay} s"
        results.append(
            Result(
                "kill and rerun",
                f"run.py {how}" + (", resumed from its last epoch" if latest else ""),
                verdict,
                last_line(ran),
            )
        )
    for _ in range(min(repeats, 2)):
        folder = space.case_dir("kill-benchmark")
        command = [sys.executable, "-m", "recbole_mgformer.benchmark", *space.benchmark_args("BPR,LightGCN", *epochs)]
        if "benchmark" not in timed:
            began = time.monotonic()
            run_command(command, space.case_dir("kill-benchmark-clean"), space.timeout)
            timed["benchmark"] = (time.monotonic() - began, None)
        delay = round(space.rng.uniform(0.2, 0.9) * timed["benchmark"][0], 1)
        killed = wait_killed(start(command, folder), delay)
        ran = run_command(command, folder, space.timeout)
        verdict = classify(ran)
        records = sorted(p.name for p in (folder / "results" / "runs" / "tiny").glob("*.json"))
        if verdict == "accepted":
            verdict = "recovery" if len(records) == 2 else "silent-wrong"
        how = f"killed after {delay} s" if killed else f"finished before {delay} s"
        results.append(Result("kill and rerun", f"benchmark {how}", verdict, f"records {records}; {last_line(ran)}"))
    for _ in range(1 if space.quick else 2):
        folder = space.case_dir("kill-tune")
        (folder / "space.yaml").write_text("learning_rate: {grid: [0.001, 0.01]}\n")
        delay = round(space.rng.uniform(12, 30), 1)  # Ray starts in about 10 s here
        command = [
            sys.executable,
            "-m",
            "recbole_mgformer.tune",
            "--model",
            "BPR",
            "--dataset",
            "tiny",
            "--space",
            "space.yaml",
            "--search",
            "grid",
            "--data_path",
            str(space.data),
            "--config_files",
            str(space.config),
            "--results",
            "results",
            "--storage",
            str(folder / "tune"),
            "--verbose",
            "0",
            "--no-retrain",
            "--num-cpus",
            "1",
            *epochs,
        ]
        killed = wait_killed(start(command, folder), delay)
        started = (folder / "tune" / "BPR-tiny").exists()  # killed before Ray saved anything: nothing to resume
        ran = run_command(command + (["--resume"] if started else []), folder, 2 * space.timeout)
        verdict = classify(ran)
        if verdict == "accepted":
            verdict = "recovery" if list((folder / "results").glob("*.json")) else "silent-wrong"
        how = f"{'killed after' if killed else 'finished before'} {delay} s, {'resumed' if started else 'rerun'}"
        results.append(Result("kill and rerun", f"tune {how}", verdict, last_line(ran)))
    return results


# ------------------------------------------------------------------------------------------------ standard input


def stdin_cases(space):
    script = (
        "from recbole_mgformer import run_recommender\n"
        f"r = run_recommender('BPR', 'tiny', config_file_list=[{str(space.config)!r}], "
        f"config_dict={{'data_path': {str(space.data)!r}, 'epochs': 1}}, nproc=2)\n"
        "print('test', r['test_result'])\n"
    )
    ran = run_command([sys.executable, "-"], space.case_dir("stdin"), 2 * space.timeout, stdin=script)
    verdict = classify(ran)
    return [
        Result(
            "standard input",
            "run_recommender(nproc=2) from `python - < script.py`",
            "recovery" if verdict == "accepted" else verdict,
            last_line(ran),
        )
    ]


GROUPS = {
    "atomic": atomic_cases,
    "config": config_file_cases,
    "dataset": dataset_name_cases,
    "output": output_cases,
    "option": option_cases,
    "kill": kill_cases,
    "stdin": stdin_cases,
}
QUICK_SKIPS = {"stdin"}  # two DDP processes: a minute on 2 cores


def all_groups():
    """The sweep's first groups, then the classes of ``experiments/robustness_classes.py``."""
    sys.modules.setdefault("experiments.robustness_sweep", sys.modules[__name__])  # one copy, run as a script too
    from experiments.robustness_classes import GROUPS as CLASSES

    return {**GROUPS, **CLASSES}


# ------------------------------------------------------------------------------------------------ the page


def render(results, header):
    counts = {outcome: sum(r.outcome == outcome for r in results) for outcome in OUTCOMES}
    groups = sorted({r.group for r in results})
    lines = [
        *header,
        "",
        f"{len(results)} cases: " + ", ".join(f"{n} {o}" for o, n in counts.items()) + ".",
        f"Bad outcomes ({', '.join(BAD)}): {sum(counts[o] for o in BAD)}.",
        "",
        "| group | cases | " + " | ".join(OUTCOMES) + " |",
        "|---" * (len(OUTCOMES) + 2) + "|",
    ]
    for group in groups:
        mine = [r for r in results if r.group == group]
        lines.append(
            f"| {group} | {len(mine)} | "
            + " | ".join(str(sum(r.outcome == o for r in mine) or "") for o in OUTCOMES)
            + " |"
        )
    bad = [r for r in results if r.outcome in BAD]
    lines += ["", "## Bad outcomes", ""]
    lines += [f"- {r.group}, {r.case}: **{r.outcome}** ({escape(r.detail)})" for r in bad] or ["None."]
    lines += ["", "## Every case", "", "| group | case | outcome | last line |", "|---|---|---|---|"]
    lines += [f"| {r.group} | {escape(r.case)} | {r.outcome} | {escape(r.detail)} |" for r in results]
    return "\n".join(lines) + "\n"


def escape(text):
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")[:220]


def selected(groups, cases):
    if not cases:
        return list(groups)
    wanted = [word.strip() for word in cases.split(",") if word.strip()]
    return [name for name in groups if any(name.startswith(word) for word in wanted)]


def main(argv=None):
    from recbole_mgformer.records import git_commit, machine, package_versions

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a sample of each group (a few minutes on 2 cores)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the fuzzed bytes, the sampled options and the kill moments (default 0)",
    )
    parser.add_argument("--cases", default="", help="comma-separated groups to run: " + ", ".join(all_groups()))
    parser.add_argument("--timeout", type=int, default=180, help="seconds a command may take (default 180)")
    parser.add_argument("--output", default=str(ROOT / "results" / "notes" / "robustness.md"))
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    every = all_groups()
    groups = [
        name for name in selected(every, args.cases) if not (args.quick and name in QUICK_SKIPS and not args.cases)
    ]
    started = time.monotonic()
    commit = git_commit(ROOT)
    with contextlib.ExitStack() as stack:
        root = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="robustness-"))
        space = setup(root, args.quick, args.seed, args.timeout)
        results = []
        for name in groups:
            print(f"{name} ...", flush=True)
            found = every[name](space)
            for r in found:
                print(f"  {r.outcome:14s} {r.group}: {r.case}", flush=True)
            results += found
    minutes = (time.monotonic() - started) / 60
    versions = package_versions()
    header = [
        "# Robustness sweep",
        "",
        f"Produced by `python experiments/robustness_sweep.py{' --quick' if args.quick else ''} --seed "
        f"{args.seed}{' --cases ' + args.cases if args.cases else ''}` at commit {commit}, "
        f"{time.strftime('%Y-%m-%d')}, on {machine()}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; {minutes:.1f} minutes.",
        "",
        "Each case is classified by its outcome (see the script's docstring): a clear error (a message, no "
        "traceback), a recovery (repaired, or the rerun/resume finished), accepted (finished: a value valid "
        "for its option, a file still well formed), or a bad outcome. Groups: " + ", ".join(groups) + ".",
    ]
    text = render(results, header)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    print(text)
    print(f"wrote {output}")
    return results


if __name__ == "__main__":
    main()
