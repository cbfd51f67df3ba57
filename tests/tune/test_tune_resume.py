"""``--resume`` (``recbole_mgformer.tune.resume``): a search rebuilt from its own JSON records, never from Ray's
pickles; a folder that was edited, is stale or comes from an earlier version is refused; one copied to another
machine resumes there."""

import json
import pickle
import shutil
from pathlib import Path

import pytest
from conftest import eval_payload, write_payload

from recbole_mgformer.tune.draws import drawn_trials, plan_trials
from recbole_mgformer.tune.records import (
    REQUEST_FILE,
    claim_request,
    read_trial_records,
    records_folder,
    search_digest,
    write_trial_record,
)
from recbole_mgformer.tune.request import make_request
from recbole_mgformer.tune.resume import prepare_experiment
from recbole_mgformer.tune.space import TuneSetupError

SPACE = {"learning_rate": {"choice": [0.01, 0.001, 0.005]}, "embedding_size": {"choice": [8, 16]}}


@pytest.fixture
def started(tiny_data, tmp_path):
    """A search of BPR on the tiny data that started (its request claimed) and finished its trial 1."""
    (tmp_path / "tiny.yaml").write_text("epochs: 1\ntrain_batch_size: 64\n")
    request = make_request(
        "BPR",
        "tiny",
        SPACE,
        config_files=["tiny.yaml"],  # relative, as typed in the checkout (the current folder is tmp_path)
        data_path="data",
        samples=3,
        storage_dir=tmp_path / "tune",
    )
    claim_request(request)
    params = drawn_trials(request)[1]
    record = {
        "index": 1,
        "trial": "abc_00001",
        "search": search_digest(request),
        "status": "completed",
        "score": 0.1,
        "epochs": 1,
        "valid": {"ndcg@20": 0.1},
        "params": params,
        "error": None,
        "results": [[1, 0.1]],
        "defaults": False,
    }
    write_trial_record(request["experiment"], record)
    return request


def resumed(request):
    """What --resume runs: the rebuilt request, its finished trials and the plan of the rest."""
    rebuilt = prepare_experiment(request, resume=True)
    records = read_trial_records(records_folder(rebuilt), rebuilt)
    return rebuilt, records, plan_trials(rebuilt, records)


def stored_file(request):
    return Path(request["experiment"]) / REQUEST_FILE


def edit_stored(request, **changes):
    path = stored_file(request)
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def refuse_unpickling(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("a pickle was loaded")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refused)


def test_resume_rebuilds_the_search_from_its_records_and_never_loads_rays_pickles(started, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    experiment = Path(started["experiment"])
    for pickled in ("tuner.pkl", "ray-1/tuner.pkl", "ray-1/searcher-state.pkl", "ray-1/train_trial_1/params.pkl"):
        write_payload(experiment / pickled, marker)  # what a folder someone sends may hold
    (experiment / "ray-1" / "experiment_state-2026.json").write_text('{"checkpoints": []}')
    refuse_unpickling(monkeypatch)
    rebuilt, records, plan = resumed(started)
    assert not marker.exists()
    assert list(records) == [1] and plan.remaining == [0, 2] and plan.drawn == drawn_trials(started)
    assert {key: rebuilt[key] for key in ("space", "samples", "search_seed")} == {
        "space": SPACE,
        "samples": 3,
        "search_seed": 0,
    }


def test_a_folder_of_rays_pickles_alone_is_refused_without_loading_them(tiny_data, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    request = make_request("BPR", "tiny", SPACE, data_path=str(tiny_data), storage_dir=tmp_path / "tune")
    write_payload(Path(request["experiment"]) / "tuner.pkl", marker)
    refuse_unpickling(monkeypatch)
    with pytest.raises(TuneSetupError, match=rf"nothing to resume at .*it has no {REQUEST_FILE}"):
        prepare_experiment(request, resume=True)
    assert not marker.exists()


def test_a_pickle_among_the_records_is_refused_as_not_json(started, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    write_payload(Path(started["experiment"]) / "trials" / "0002.json", marker)
    refuse_unpickling(monkeypatch)
    with pytest.raises(TuneSetupError, match=r"0002.json: cannot read a trial record"):
        resumed(started)
    assert not marker.exists()


def test_a_search_from_before_the_records_is_refused_naming_why(started):
    stored = json.loads(stored_file(started).read_text())
    del stored["records"]
    stored_file(started).write_text(json.dumps(stored))
    with pytest.raises(TuneSetupError, match="kept its progress only in Ray's pickles; --resume never loads them"):
        prepare_experiment(started, resume=True)


@pytest.mark.parametrize("field", ["overrides", "space", "first_trial"])
def test_code_in_the_stored_request_is_refused_and_never_runs(started, tmp_path, field):
    marker = tmp_path / "pwned"
    payload = eval_payload(marker)
    value = {
        "overrides": {"epochs": 1, "learning_rate": payload},
        "space": {"learning_rate": {"choice": [payload]}, "embedding_size": {"choice": [8]}},
        "first_trial": {"learning_rate": payload, "embedding_size": 8},
    }[field]
    edit_stored(started, **{field: value})
    with pytest.raises(TuneSetupError, match=rf"{REQUEST_FILE}: setting learning_rate: .*never run as Python"):
        prepare_experiment(started, resume=True)
    assert not marker.exists()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"metric": "recall@20"}, "started with metric 'recall@20', but its settings now give 'ndcg@20'"),
        ({"samples": "3"}, "samples is '3', not what the command writes there"),
        ({"max_t": 5}, "started with max_t 5"),
        ({"search": "anneal"}, "unknown search 'anneal'"),
    ],
)
def test_an_edited_or_stale_request_is_refused_naming_the_field(started, changes, message):
    edit_stored(started, **changes)
    with pytest.raises(TuneSetupError, match=message):
        prepare_experiment(started, resume=True)


def test_a_config_file_edited_since_the_search_started_is_refused(started, tmp_path):
    (tmp_path / "tiny.yaml").write_text("epochs: 1\ntrain_batch_size: 32\n")
    with pytest.raises(TuneSetupError, match=r"config file .*tiny.yaml changed since the search started"):
        prepare_experiment(started, resume=True)


def test_a_search_copied_to_another_machine_resumes_there(started, tmp_path, monkeypatch):
    """Only the search's folder is copied: the request's absolute paths are the old machine's."""
    machine = tmp_path / "new-machine"
    checkout = machine / "checkout"
    (checkout / "data").mkdir(parents=True)
    shutil.copytree(tmp_path / "data" / "tiny", checkout / "data" / "tiny")
    shutil.copy(tmp_path / "tiny.yaml", checkout / "tiny.yaml")
    storage = machine / "saved" / "tune"
    shutil.copytree(started["experiment"], storage / "BPR-tiny")
    edit_stored(
        {"experiment": str(storage / "BPR-tiny")},
        data_path="/old-machine/checkout/data",
        config_files=["/old-machine/checkout/tiny.yaml"],
        experiment="/old-machine/checkout/saved/tune/BPR-tiny",
    )
    monkeypatch.chdir(checkout)
    here = make_request("BPR", "tiny", SPACE, data_path="data", storage_dir=storage)
    rebuilt, records, plan = resumed(here)
    assert rebuilt["data_path"] == str(checkout / "data")
    assert rebuilt["config_files"] == [str(checkout / "tiny.yaml")]
    assert rebuilt["experiment"] == str(storage / "BPR-tiny") and list(records) == [1]
    assert plan.drawn == drawn_trials(started) and plan.remaining == [0, 2]
    (checkout / "tiny.yaml").unlink()
    with pytest.raises(TuneSetupError, match=r"config file .*tiny.yaml is not here; put it there"):
        prepare_experiment(here, resume=True)


def test_a_new_search_in_a_folder_with_trial_records_is_refused(started):
    (Path(started["experiment"]) / REQUEST_FILE).unlink()  # the request deleted, its trials left
    with pytest.raises(TuneSetupError, match=rf"trials holds the trial records of a search whose {REQUEST_FILE}"):
        prepare_experiment(started, resume=False)


# ------------------------------------------------------------------------------------------------ --records


def request_with_records(tmp_path, records, storage, **settings):
    return make_request(
        "BPR",
        "tiny",
        SPACE,
        config_files=[str(tmp_path / "tiny.yaml")],
        data_path=str(tmp_path / "data"),
        storage_dir=storage,
        records_dir=records,
        **{"samples": 3, **settings},
    )


@pytest.fixture
def kept_apart(started, tmp_path):
    """The ``started`` search's records moved to a folder of their own (``--records``), Ray's storage gone."""
    records = tmp_path / "results" / "BPR.records"
    shutil.copytree(started["experiment"], records)
    shutil.rmtree(tmp_path / "tune")
    return records


def test_records_kept_apart_from_rays_folder_resume_with_a_new_storage(kept_apart, started, tmp_path):
    here = request_with_records(tmp_path, kept_apart, tmp_path / "new-storage")
    assert here["records_dir"] == str(kept_apart) and here["experiment"] == str(tmp_path / "new-storage" / "BPR-tiny")
    rebuilt, records, plan = resumed(here)
    assert rebuilt["records_dir"] == str(kept_apart) and rebuilt["experiment"] == here["experiment"]
    assert list(records) == [1] and plan.remaining == [0, 2] and plan.drawn == drawn_trials(started)
    assert not (tmp_path / "new-storage").exists()  # nothing of Ray's was needed


def test_a_new_search_writes_its_records_where_given_and_refuses_a_folder_holding_one(kept_apart, tmp_path):
    fresh = tmp_path / "results" / "BPR-other.records"
    request = request_with_records(tmp_path, fresh, tmp_path / "tune")
    claim_request(prepare_experiment(request, resume=False))
    assert [p.name for p in fresh.iterdir()] == [REQUEST_FILE] and not (tmp_path / "tune").exists()
    write_trial_record(fresh, {"index": 0})
    assert (fresh / "trials" / "0000.json").is_file()
    with pytest.raises(TuneSetupError, match=rf"{kept_apart} already holds a search; --resume continues it"):
        prepare_experiment(request_with_records(tmp_path, kept_apart, tmp_path / "tune"), resume=False)


def test_records_of_another_search_in_the_records_folder_are_refused(kept_apart, tmp_path):
    """Another seed or sample count is refused by name; a trial record of another search by its digest."""
    for settings, option in (({"search_seed": 5}, "--search-seed"), ({"samples": 4}, "--samples")):
        other = request_with_records(tmp_path, kept_apart, tmp_path / "tune", **settings)
        with pytest.raises(TuneSetupError, match=rf"the search at {kept_apart} cannot change on --resume \({option}"):
            prepare_experiment(other, resume=True, given=set(settings))
    other = request_with_records(tmp_path, tmp_path / "elsewhere", tmp_path / "tune", search_seed=5)
    claim_request(other)
    foreign = {**json.loads((kept_apart / "trials" / "0001.json").read_text()), "search": search_digest(other)}
    (kept_apart / "trials" / "0001.json").write_text(json.dumps(foreign))
    with pytest.raises(TuneSetupError, match=r"BPR.records/trials/0001.json: it belongs to another search"):
        resumed(request_with_records(tmp_path, kept_apart, tmp_path / "tune"))


def test_a_report_written_on_another_machine_is_this_searchs_when_its_records_lie_at_the_same_place(started, tmp_path):
    from recbole_mgformer.tune.search import report_paths

    old = "/old-machine/checkout"
    here = request_with_records(tmp_path, tmp_path / "results" / "BPR.records", tmp_path / "tune")
    report = {
        "request": {
            **here,
            "experiment": f"{old}/saved/tune/BPR-tiny",
            "records_dir": f"{old}/results/BPR.records",
        },
        "markdown": f"{old}/results/BPR.md",
    }
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "BPR.json").write_text(json.dumps(report, sort_keys=True))  # as write_report writes it
    assert report_paths(here, tmp_path / "results", "BPR")["md"] == tmp_path / "results" / "BPR.md"
    for request in (
        request_with_records(tmp_path, tmp_path / "results" / "elsewhere.records", tmp_path / "tune"),
        request_with_records(tmp_path, tmp_path / "results" / "BPR.records", tmp_path / "tune", search_seed=2),
    ):
        with pytest.raises(TuneSetupError, match=r"BPR.(md|json) is the report of another search"):
            report_paths(request, tmp_path / "results", "BPR")
