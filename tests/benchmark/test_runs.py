import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import TINY_METRICS, benchmark_args, held_elsewhere, write_split

from recbole_mgformer.benchmark import main
from recbole_mgformer.benchmark.render import records_by_dataset
from recbole_mgformer.benchmark.run_record import move_record
from recbole_mgformer.benchmark.runs import Run
from recbole_mgformer.benchmark.stats import read_per_user, write_per_user
from recbole_mgformer.model.precision import resolve_precision
from recbole_mgformer.training.checkpoint_files import load_checkpoint
from recbole_mgformer.training.resume import RunTimer


def test_runs_write_records_skip_them_on_rerun_and_render_the_leaderboard(tiny_data, tmp_path, capsys):
    args = benchmark_args("BPR,MGFormer[embedding_size=8]", tiny_data, tmp_path, "--epochs=2", *TINY_METRICS)
    assert main(args) == 0
    runs = tmp_path / "results" / "runs" / "tiny"
    written = json.loads((runs / "mgformer-embedding-size-8-seed0.json").read_text())
    assert written["overrides"] == {"embedding_size": 8} and written["config"]["embedding_size"] == 8
    assert written["epochs"] == 2 and 0 <= written["best_epoch"] < 2 and written["parameters"] > 0
    assert [epoch for epoch, _ in written["valid_history"]] == [0, 1]
    kept = load_checkpoint(tmp_path / "saved" / "tiny" / "mgformer-embedding-size-8-seed0.pth")
    assert kept["epoch"] == written["best_epoch"]  # the record names the epoch whose model was tested
    assert written["train_seconds_per_epoch"] > 0 and written["test_seconds"] > 0
    assert written["build_seconds"] > 0  # MGFormer's SVD: part of the time to fit (benchmark.cost)
    for key in ("commit", "machine", "versions", "device", "valid", "test", "seed"):
        assert key in written
    assert "[2/2] MGFormer embedding_size=8 on tiny, seed 0: test recall@20" in capsys.readouterr().out
    # what `precision: auto` ran in on this machine, so records of one CPU name but different bf16 support differ
    expected = "bf16" if resolve_precision(written["config"]["precision"], "cpu") == torch.bfloat16 else "fp32"
    assert written["matmul_precision"] == expected
    before = (runs / "bpr-seed0.json").read_text()
    assert json.loads(before)["matmul_precision"] is None  # BPR has no precision option
    assert main(args) == 0
    assert "record exists, skipped" in capsys.readouterr().out
    assert (runs / "bpr-seed0.json").read_text() == before
    leaderboard = (tmp_path / "results" / "tiny" / "leaderboard.md").read_text()
    assert "## tiny" in leaderboard and "| BPR | 1 |" in leaderboard
    groups = written["test_popularity"]
    assert set(groups) == {"Unpopular", "Normal", "Popular"} and sum(g["users"] for g in groups.values()) > 0
    popularity = (tmp_path / "results" / "tiny" / "popularity.md").read_text()
    assert "| BPR | 1 |" in popularity and "Unpopular = the 80% least interacted" in popularity
    assert (tmp_path / "results" / "tiny" / "popularity-tiny.png").read_bytes()[:4] == b"\x89PNG"
    # each test user's NDCG@20 beside the record, averaging to the record's, for the paired test

    per_user = read_per_user(runs / "mgformer-embedding-size-8-seed0.json")
    assert written["per_user"] == {"file": "mgformer-embedding-size-8-seed0.users.json.gz", "metric": "ndcg@20"}
    assert sum(per_user.values()) / len(per_user) == pytest.approx(written["test"]["ndcg@20"], abs=1e-4)
    assert written["tuning"] is None  # no equal-budget search chose its settings


def count_scoring_batches(monkeypatch):
    """A list that grows by one for every batch of users a trainer scores against every item."""
    from recbole.trainer import Trainer

    scored, batch_eval = [], Trainer._full_sort_batch_eval

    def counting(self, batched_data):
        scored.append(len(batched_data[0]))
        return batch_eval(self, batched_data)

    monkeypatch.setattr(Trainer, "_full_sort_batch_eval", counting)
    return scored


@pytest.mark.parametrize("test_file", ["test", "valid"])
def test_a_run_scores_its_test_users_once_and_not_at_all_where_validation_is_the_test(tmp_path, monkeypatch, test_file):
    write_split(tmp_path / "split", "tiny", test_file)
    scored = count_scoring_batches(monkeypatch)
    args = benchmark_args("EASE,BPR", tmp_path / "split", tmp_path, "--epochs=2", *TINY_METRICS)
    assert main([*args, f"--benchmark_filename=[train, {test_file}, test]"]) == 0
    runs = tmp_path / "results" / "runs" / "tiny"
    reused = test_file == "test"
    for name in ("ease", "bpr"):
        record = json.loads((runs / f"{name}-seed0.json").read_text())
        assert record.get("test_from_valid_pass", False) is reused
        assert (record["test"] == record["valid"]) if reused else record["test_seconds"] > 0
        per_user = read_per_user(runs / f"{name}-seed0.json")  # from the same pass as the test's metrics
        assert len(per_user) == 40
        assert sum(per_user.values()) / len(per_user) == pytest.approx(record["test"]["ndcg@20"], abs=1e-4)
    # 40 users, one batch a pass: the validations (EASE 1, BPR 2), then a test pass each unless validation was it;
    # the per-user values and the popularity groups score nothing of their own
    assert scored == [40] * (3 if reused else 5)


def test_a_record_without_group_metrics_or_per_user_values_gets_them_from_its_checkpoint(tiny_data, tmp_path):
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS)
    main(args)
    path = tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json"
    record = json.loads(path.read_text())
    complete = record.pop("test_popularity")
    record.pop("per_user")

    per_user = path.with_name("bpr-seed0.users.json.gz")
    values = read_per_user(path)
    per_user.unlink()
    path.write_text(json.dumps(record))
    main(args)
    completed = json.loads(path.read_text())
    assert completed["test_popularity"] == complete and completed["per_user"]["file"] == per_user.name
    assert read_per_user(path) == values


def test_a_retired_record_pushes_an_earlier_run_of_its_seed_into_superseded(tmp_path):
    """The tuned run's predecessor moves to exploration; a rerun of the same seed retired there before moves on to
    superseded/<commit>/, so the exploration table counts the seed once and no record is lost."""
    results = tmp_path / "results"
    current, earlier = results / "runs" / "tiny", results / "exploration" / "runs" / "tiny"
    for folder, commit in ((current, "new4567"), (earlier, "old1234")):
        folder.mkdir(parents=True)
        record = {"model": "BPR", "variant": "BPR", "seed": 0, "commit": commit, "valid": {}, "test": {}}
        (folder / "bpr-seed0.json").write_text(json.dumps(record))
        (folder / "bpr-seed0.users.json.gz").write_bytes(commit.encode())
    lines = []
    run = Run("BPR", {}, "tiny", 0, runs_dir=results / "runs", data_path=tmp_path)
    assert run.retire(lines.append) == earlier / "bpr-seed0.json"
    assert json.loads((earlier / "bpr-seed0.json").read_text())["commit"] == "new4567"
    assert (earlier / "bpr-seed0.users.json.gz").read_bytes() == b"new4567"
    superseded = earlier / "superseded" / "old1234"
    assert json.loads((superseded / "bpr-seed0.json").read_text())["commit"] == "old1234"
    assert (superseded / "bpr-seed0.users.json.gz").read_bytes() == b"old1234"
    assert lines == [f"moved {superseded / 'bpr-seed0.json'}: an earlier run of the same seed"]
    assert not (current / "bpr-seed0.json").exists()
    assert [r["commit"] for r in records_by_dataset(results / "exploration" / "runs")["tiny"]] == ["new4567"]


def test_a_run_another_process_trains_into_the_same_results_folder_is_skipped(tiny_data, tmp_path, capsys):
    # The claim beside the checkpoints did not see a process with its own checkpoint folder: both trained, and the
    # second's record replaced the first's without a word.
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS)
    runs = tmp_path / "results" / "runs" / "tiny"
    with held_elsewhere(runs / ".bpr-seed0.lock") as holder:
        assert main(args) == 0
    assert f"BPR on tiny, seed 0: skipped, another process (pid {holder.pid}) holds {runs}/.bpr-seed0.lock" in (
        capsys.readouterr().out
    )
    assert not (runs / "bpr-seed0.json").exists() and not list((tmp_path / "saved" / "tiny").glob("*.pth"))
    assert main(args) == 0 and json.loads((runs / "bpr-seed0.json").read_text())["seed"] == 0
    assert sorted(p.name for p in runs.iterdir()) == ["bpr-seed0.json", "bpr-seed0.users.json.gz"]  # lock released


def test_a_record_that_appears_while_a_run_trains_is_kept_and_the_run_stops_naming_it(
    tiny_data, tmp_path, monkeypatch, capsys
):
    # where claims do not work (no flock: Windows, some network filesystems), the record's name is still claimed
    import recbole_mgformer.benchmark.runs as runs_module

    record = tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json"
    real_fit = runs_module.fit_resumably

    def another_run_finishes_first(*args, **kwargs):
        fitted = real_fit(*args, **kwargs)
        write_per_user(record, {"u0": 0.5})  # as a run writes them: its values, then its record
        record.write_text('{"theirs": true}\n')
        return fitted

    monkeypatch.setattr(runs_module, "fit_resumably", another_run_finishes_first)
    with pytest.raises(SystemExit) as stopped:
        main(benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS))
    assert stopped.value.code == 2 and record.read_text() == '{"theirs": true}\n'
    assert read_per_user(record) == {"u0": 0.5}
    assert f"the recorded run {record} has its values there already" in capsys.readouterr().err
    assert sorted(p.name for p in record.parent.iterdir()) == ["bpr-seed0.json", "bpr-seed0.users.json.gz"]


def test_moving_a_record_never_replaces_one_that_appears_at_its_target(tmp_path, monkeypatch):
    source = tmp_path / "runs" / "bpr-seed0.json"
    source.parent.mkdir()
    source.write_text('{"ours": true}')
    target = tmp_path / "exploration" / "bpr-seed0.json"
    real_mkdir = Path.mkdir

    def another_move_meanwhile(self, *args, **kwargs):  # between a check for the target and the move
        real_mkdir(self, *args, **kwargs)
        if self == target.parent and not target.exists():
            target.write_text('{"theirs": true}')

    monkeypatch.setattr(Path, "mkdir", another_move_meanwhile)
    with pytest.raises(FileExistsError, match="a record is there already"):
        move_record(source, target.parent)
    assert source.read_text() == '{"ours": true}' and target.read_text() == '{"theirs": true}'


@pytest.mark.parametrize(
    "bigger, scores, kept",
    [
        (True, [0.05, 0.06, 0.06, 0.055], 2),  # a tie replaces the best, as in RecBole's early_stopping
        (False, [0.5, 0.4, 0.45, 0.4], 3),
        (True, [], None),
    ],
)
def test_the_best_epoch_is_the_one_early_stopping_kept(bigger, scores, kept):
    trainer = SimpleNamespace(_train_epoch=None, _valid_epoch=None, best_valid_score=None)
    history = {"valid_scores": list(enumerate(scores))}
    assert RunTimer(trainer, history).best_epoch(bigger) == kept


def test_an_interrupted_run_continues_from_its_last_epoch(tiny_data, tmp_path, monkeypatch, capsys):
    args = benchmark_args("BPR", tiny_data, tmp_path, *TINY_METRICS, "--stopping_step=50")

    def stop(*_):
        raise KeyboardInterrupt  # the machine goes away after training, before the record is written

    monkeypatch.setattr(RunTimer, "best_epoch", stop)
    with pytest.raises(KeyboardInterrupt):
        main(args + ["--epochs=3"])
    saved = tmp_path / "saved" / "tiny"
    # the timings travel inside the last epoch's checkpoint, which loads with weights_only=True
    latest = load_checkpoint(saved / "bpr-seed0.latest.pth")
    assert latest["epoch"] == 2 and len(latest["run_state"]["history"]["train_seconds"]) == 3
    assert not (saved / "bpr-seed0.latest.json").exists()
    monkeypatch.undo()

    main(args + ["--epochs=5"])
    assert "resuming BPR on tiny, seed 0 at epoch 3" in capsys.readouterr().out
    record = json.loads((tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json").read_text())
    assert record["epochs"] == 5 and record["resumed_from_epoch"] == 3
    assert [epoch for epoch, _ in record["train_history"]] == [0, 1, 2, 3, 4]
    assert not (saved / "bpr-seed0.latest.pth").exists() and (saved / "bpr-seed0.pth").exists()


@pytest.mark.parametrize("timed_epochs, history_kept", [(3, True), (2, False)])
def test_a_run_started_before_the_timings_moved_into_the_checkpoint_resumes_with_its_json(
    tiny_data, tmp_path, monkeypatch, timed_epochs, history_kept
):
    args = benchmark_args("BPR", tiny_data, tmp_path, *TINY_METRICS, "--stopping_step=50")
    monkeypatch.setattr(RunTimer, "best_epoch", lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        main(args + ["--epochs=3"])
    monkeypatch.undo()
    saved = tmp_path / "saved" / "tiny"
    # rewrite the last epoch as the old code left it: no run_state, the timings in a json beside it,
    # an epoch short when the run was killed between the two writes
    latest = load_checkpoint(saved / "bpr-seed0.latest.pth")
    history = latest.pop("run_state")["history"]
    torch.save(latest, saved / "bpr-seed0.latest.pth")
    history = {key: values[:timed_epochs] for key, values in history.items()}
    (saved / "bpr-seed0.latest.json").write_text(json.dumps(history))

    main(args + ["--epochs=4"])
    record = json.loads((tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json").read_text())
    assert record["epochs"] == 4 and record["resumed_from_epoch"] == 3
    # a history that does not cover the epochs before the resume is dropped, not spliced in shifted
    assert [epoch for epoch, _ in record["valid_history"]] == ([0, 1, 2, 3] if history_kept else [2, 3])
    assert [epoch for epoch, _ in record["train_history"]] == ([0, 1, 2, 3] if history_kept else [3])
    assert not list(saved.glob("*.latest.*"))


def test_a_tuned_config_applies_to_its_model_and_dataset_and_the_users_overrides_win(tiny_data, tmp_path, monkeypatch):
    import recbole_mgformer.benchmark.runs as runs

    tuned = tmp_path / "MGFormer.yaml"
    tuned.write_text("embedding_size: 8\nuniformity_weight: 2.0\n")
    monkeypatch.setattr(
        runs,
        "tuned_file_for",
        lambda model, overrides, dataset, folder: str(tuned) if (model, dataset) == ("MGFormer", "tiny") else None,
    )
    models = "MGFormer,MGFormer[uniformity_weight=0.5],BPR"
    args = benchmark_args(models, tiny_data, tmp_path, "--epochs=1", *TINY_METRICS)
    assert main(args) == 0
    runs = tmp_path / "results" / "runs" / "tiny"
    default = json.loads((runs / "mgformer-seed0.json").read_text())
    assert default["config"]["embedding_size"] == 8 and default["config"]["uniformity_weight"] == 2.0
    assert default["tuned_config"] == str(tuned)
    overridden = json.loads((runs / "mgformer-uniformity-weight-0-5-seed0.json").read_text())
    assert overridden["config"]["uniformity_weight"] == 0.5 and overridden["config"]["embedding_size"] == 8
    assert json.loads((runs / "bpr-seed0.json").read_text())["tuned_config"] is None
    leaderboard = (tmp_path / "results" / "tiny" / "leaderboard.md").read_text()
    assert f"MGFormer (and its variants) `{tuned}`" in leaderboard


def test_an_entry_with_many_settings_runs_and_names_files_the_system_can_create(tiny_data, tmp_path, capsys):
    """Its words joined (300 characters) would name files over the system's 255 bytes."""
    settings = (
        "embedding_size=8; structural_size=8; feature_map=simrf; degree_mask=sin; degree_embedding_size=16; "
        "max_exact_degree=128; uniformity_weight=0.3; structural_scale=1.0; attention_weight=1.0; residual=True; "
        "layer_norm=False; qk_init=xavier; score=dot; attention_temperature=1.0; learn_temperature=False"
    )
    args = benchmark_args(f"MGFormer[{settings}]", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS)
    assert main(args) == 0
    (record,) = (tmp_path / "results" / "runs" / "tiny").glob("*-seed0.json")
    assert json.loads(record.read_text())["overrides"]["learn_temperature"] is False
    written = [*(tmp_path / "results").rglob("*"), *(tmp_path / "saved").rglob("*")]
    assert max(len(path.name.encode()) for path in written) <= 255
    assert main(args) == 0
    assert "record exists, skipped" in capsys.readouterr().out


def test_shipped_tuned_configs_name_known_models_and_datasets():
    """A tuned file is named after its model (``MGFormer.yaml``) or, searched as itself, after its variant's slug
    (``mgformer-attention-false.yaml``, whose header names the variant ``MGFormer attention=False``)."""
    from recbole_mgformer.benchmark.entries import slug, stem_model
    from recbole_mgformer.config.defaults import properties_dir
    from recbole_mgformer.integration.registry import get_model

    for path in (properties_dir() / "benchmark").glob("*/*.yaml"):
        assert (properties_dir() / "dataset" / f"{path.parent.name}.yaml").is_file(), path
        header = path.read_text().splitlines()[0]
        variant = header.removeprefix("# ").split(f" on {path.parent.name}")[0]
        if path.stem == variant:
            get_model(path.stem)
        else:
            assert path.stem == slug(variant), (path, header)
            assert get_model(stem_model(path.stem)) is get_model(variant.split()[0])


def write_histories(folder, name="tinyseq", n_users=20, n_items=25, length=8):
    """Users walking forward through the items, with timestamps and ratings, as RecBole atomic interactions."""
    path = folder / name
    path.mkdir(parents=True)
    lines = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    for user in range(n_users):
        lines += [f"u{user}\ti{(3 * user + step) % n_items}\t{1 + (user + step) % 5}\t{step}" for step in range(length)]
    (path / f"{name}.inter").write_text("\n".join(lines) + "\n")
    return folder


SEQUENTIAL = (
    "benchmark_table: sequential\nbenchmark_page: sequential\nload_col: "
    "{inter: [user_id, item_id, timestamp]}\n"
    "eval_args: {split: {LS: valid_and_test}, order: TO, group_by: user, mode: full}\n"
    "metrics: [Recall, MRR, NDCG]\ntopk: [5, 10]\nvalid_metric: NDCG@10\ntrain_neg_sample_args: ~\n"
)
CONTEXT = (
    "benchmark_table: context\nbenchmark_page: context\nload_col: {inter: [user_id, item_id, rating]}\n"
    "threshold: {rating: 4}\neval_args: "
    "{split: {RS: [0.56, 0.24, 0.2]}, order: RO, group_by: ~, mode: labeled}\n"
    "train_neg_sample_args: ~\nmetrics: [AUC, LogLoss]\nvalid_metric: AUC\n"
)


@pytest.mark.parametrize(
    "kind, protocol, model, own_settings, headline",
    [
        ("sequential", SEQUENTIAL, "GRU4Rec", ["--hidden_size=8"], "test recall@10"),
        ("context", CONTEXT, "LR", [], "test auc"),  # LR reads no hidden_size: passing one would be an unknown key
    ],
)
def test_every_kind_of_model_runs_records_and_renders_the_same_way(
    dataset_configs, tmp_path, capsys, kind, protocol, model, own_settings, headline
):
    dataset_configs("tinyseq", protocol)  # the dataset's config gives the protocol and the table
    settings = ["--epochs=2", "--train_batch_size=16", "--stopping_step=50", "--state=WARNING", *own_settings]
    data = write_histories(tmp_path / "data")
    args = benchmark_args(f"{model}[embedding_size=8]", data, tmp_path, *settings, dataset="tinyseq", seeds="1")
    assert main(args) == 0
    assert f"[1/1] {model} embedding_size=8 on tinyseq, seed 1: {headline}" in capsys.readouterr().out
    record = json.loads(
        (tmp_path / "results" / "runs" / "tinyseq" / f"{model.lower()}-embedding-size-8-seed1.json").read_text()
    )
    assert record["epochs"] == 2 and [epoch for epoch, _ in record["valid_history"]] == [0, 1]
    assert record["seconds"] >= 0 and record["settings"]["epochs"] == 2 and "--epochs=2" in record["command"]
    assert "test_popularity" not in record  # popularity groups are a general table's
    assert not list((tmp_path / "saved" / "tinyseq").glob("*.latest.*"))
    page = (tmp_path / "results" / kind / "leaderboard.md").read_text()
    assert f"| {model} embedding_size=8 |" in page and not (tmp_path / "results" / kind / "popularity.md").exists()
    assert main(args) == 0
    assert "record exists, skipped" in capsys.readouterr().out


def test_a_model_of_another_kind_stops_the_command_before_any_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--models", "BPR,EAGPS", "--datasets", "ml-100k-seq", "--results", str(tmp_path / "results")])
    assert "BPR is a general model, but the runs of ml-100k-seq go into a sequential table" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_a_rerun_with_other_settings_is_refused_never_skipped(tiny_data, tmp_path, capsys):
    # The old benchmark skipped the run because its record existed, and the table kept the 1-epoch run.
    one, three = tmp_path / "one.yaml", tmp_path / "three.yaml"
    one.write_text("epochs: 1\n")
    three.write_text("epochs: 3\n")
    args = benchmark_args("BPR", tiny_data, tmp_path, *TINY_METRICS)  # the epochs come from the config files
    assert main([*args, "--config_files", str(one)]) == 0
    record = tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json"
    before = record.read_text()
    with pytest.raises(SystemExit) as stopped:
        main([*args, "--config_files", str(three)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "bpr-seed0.json records BPR on tiny, seed 0 trained with other settings (epochs: 1 there, 3 here)" in error
    assert "exploration/runs/tiny/" in error and record.read_text() == before
    louder = [arg for arg in args if arg != "--state=WARNING"] + ["--state=INFO"]  # a setting is given once
    assert main([*louder, "--config_files", str(one)]) == 0  # the log level changes no result
    assert "record exists, skipped" in capsys.readouterr().out


def test_a_record_without_its_config_counts_as_the_run_as_before(tiny_data, tmp_path, capsys):
    # Records written before they kept their config (most of results/runs/) cannot be compared: kept, skipped.
    args = benchmark_args("BPR", tiny_data, tmp_path, "--epochs=1", *TINY_METRICS)
    assert main(args) == 0
    path = tmp_path / "results" / "runs" / "tiny" / "bpr-seed0.json"
    record = json.loads(path.read_text())
    del record["config"]
    path.write_text(json.dumps(record))
    assert main([a if not a.startswith("--epochs") else "--epochs=2" for a in args]) == 0
    assert "record exists, skipped" in capsys.readouterr().out and json.loads(path.read_text()) == record


def test_settings_changes_ignore_runtime_keys_and_keys_one_side_lacks():
    from recbole_mgformer.benchmark.run_record import settings_changes

    recorded = {"epochs": 1, "device": "cuda", "use_gpu": True, "data_path": "/a", "eval_batch_size": 4096, "old": 1}
    current = {"epochs": 3, "device": "cpu", "use_gpu": False, "data_path": "/b", "eval_batch_size": 256, "new": 2}
    assert settings_changes(recorded, current) == {"epochs": (1, 3)}


def _with_timestamps(data):
    """The toy dataset with a timestamp per interaction, for a split the seed does not draw (``order: TO``)."""
    path = data / "tiny" / "tiny.inter"
    header, *lines = path.read_text().splitlines()
    path.write_text("\n".join([header + "\ttimestamp:float"] + [f"{line}\t{i}" for i, line in enumerate(lines)]) + "\n")
    return data


@pytest.mark.parametrize("order, seeds_run", [("TO", [0]), ("RO", [0, 1])])
def test_a_closed_form_model_runs_one_seed_where_the_seed_does_not_draw_the_split(
    tiny_data, tmp_path, capsys, order, seeds_run
):
    split = f"--eval_args={{split: {{RS: [0.8, 0.1, 0.1]}}, order: {order}, group_by: user, mode: full}}"
    columns = "--load_col={inter: [user_id, item_id, timestamp]}"
    data = _with_timestamps(tiny_data)
    args = benchmark_args(
        "EASE,ItemKNN,SLIMElastic,BPR", data, tmp_path, "--epochs=2", *TINY_METRICS, split, columns, seeds="0,1"
    )
    assert main(args) == 0
    runs = tmp_path / "results" / "runs" / "tiny"
    for model in ("ease", "itemknn", "slimelastic"):
        assert sorted(json.loads(p.read_text())["seed"] for p in runs.glob(f"{model}-seed*.json")) == seeds_run
    assert len(list(runs.glob("bpr-seed*.json"))) == 2  # BPR trains from random weights: every seed
    ease = json.loads((runs / "ease-seed0.json").read_text())
    assert ease["deterministic"] is (order == "TO") and ease["epochs"] == 1
    # its fit is its constructor, counted in its cost (the records round these to 0.1 s)
    assert ease["build_seconds"] > 0 and ease["seconds"] >= round(ease["build_seconds"], 1)
    assert json.loads((runs / "bpr-seed0.json").read_text())["deterministic"] is False
    # the checkpoint loads weights-only and holds no scipy or numpy matrix: EASE refits them when rebuilt
    assert load_checkpoint(tmp_path / "saved" / "tiny" / "ease-seed0.pth")["other_parameter"] == {}
    leaderboard = (tmp_path / "results" / "tiny" / "leaderboard.md").read_text()
    assert ("| EASE | 1 (deterministic) |" in leaderboard) is (order == "TO")
    assert ("| EASE | 2 |" in leaderboard) is (order == "RO")


def test_stored_values_count_dense_entries_and_sparse_nonzeros_once():
    import numpy as np
    import scipy.sparse as sp
    import torch

    from recbole_mgformer.benchmark.run_record import stored_values

    class Fitted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("dense", torch.zeros(3, 4))
            self.register_buffer("sparse", torch.eye(5).to_sparse_csr())
            self.similarity = np.zeros((2, 2))
            self.interactions = sp.csr_matrix(np.eye(6))
            self.other_parameter_name = ["similarity", "interactions", "dense"]

    assert stored_values(Fitted()) == 12 + 5 + 4 + 6


def test_the_cap_rule_flags_a_run_the_cap_ended_while_early_stopping_had_not():
    from recbole_mgformer.benchmark.run_record import hit_cap

    assert hit_cap(best_epoch=29, epochs=30, cap=30, stopping_step=10)  # best at the last epoch: still improving
    assert hit_cap(best_epoch=19, epochs=30, cap=30, stopping_step=10)  # 10 epochs without gain: not yet stopped
    assert not hit_cap(best_epoch=18, epochs=30, cap=30, stopping_step=10)  # the stop fired at the cap's last epoch
    assert not hit_cap(best_epoch=5, epochs=17, cap=30, stopping_step=10)  # stopped early
    assert hit_cap(best_epoch=10, epochs=30, cap=30, stopping_step=4, eval_step=5)  # evaluated every 5 epochs
    assert not hit_cap(best_epoch=None, epochs=30, cap=30, stopping_step=10)
