"""How dense each dataset is (benchmark/data_properties.py): measured from its source files, written as the JSON
the summary of results/README.md reads, and the committed JSON is what its command computes."""

import json
from pathlib import Path

import pytest
import scipy.sparse as sp

from recbole_mgformer.benchmark.data_properties import (
    SOURCES,
    main,
    measure,
    properties_of,
    read_properties,
)
from recbole_mgformer.data.sources import shared_datasets_dir

ROOT = Path(__file__).resolve().parents[2]


def test_properties_count_users_items_and_every_interaction():
    pairs = [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u2", "a")]  # a repeated pair counts twice, as RecBole keeps it
    assert properties_of(pairs) == {
        "users": 2,
        "items": 2,
        "interactions": 4,
        "interactions_per_item": 2.0,
        "interactions_per_user": 2.0,
        "density": 1.0,
    }


def tiny_shared(folder):
    (folder / "ml-100k").mkdir(parents=True)
    (folder / "ml-100k" / "ml-100k.inter").write_text(
        "user_id:token\titem_id:token\trating:float\n1\t10\t3\n1\t11\t4\n2\t10\t5\n"
    )
    (folder / "amazon-beauty").mkdir()
    (folder / "amazon-beauty" / "train.txt").write_text("1:1 2 3\n2:2\n")
    (folder / "amazon-beauty" / "test.txt").write_text("1:4\n3:1\n")
    for name in ("gowalla", "yelp2018"):
        (folder / name).mkdir()
        sp.save_npz(folder / name / "train.npz", sp.csr_matrix([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
        sp.save_npz(folder / name / "test.npz", sp.csr_matrix([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    return folder


def test_every_source_format_is_measured(tmp_path):
    measured = measure(tiny_shared(tmp_path / "shared"))
    assert list(measured) == list(SOURCES)
    assert measured["ml-100k"]["users"] == 2 and measured["ml-100k"]["items"] == 2
    assert measured["ml-100k"]["interactions"] == 3 and measured["ml-100k"]["density"] == 0.75
    assert (measured["amazon-beauty"]["users"], measured["amazon-beauty"]["items"]) == (3, 4)
    assert measured["amazon-beauty"]["interactions"] == 6
    assert measured["gowalla"]["interactions"] == 4 and measured["gowalla"]["interactions_per_item"] == 1.33


def test_the_command_writes_the_json_the_summary_reads_and_a_missing_file_is_named(tmp_path, capsys):
    shared = tiny_shared(tmp_path / "shared")
    output = tmp_path / "results" / "data_properties.json"
    assert main(["--shared", str(shared), "--output", str(output)]) == 0
    assert read_properties(output)["yelp2018"]["users"] == 2
    (shared / "yelp2018" / "test.npz").unlink()
    with pytest.raises(SystemExit) as stop:
        main(["--shared", str(shared), "--output", str(output)])
    assert stop.value.code == 2
    assert "yelp2018: missing" in capsys.readouterr().err


def test_a_damaged_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "data_properties.json"
    path.write_text('{"datasets": ')
    with pytest.raises(ValueError, match="data_properties.json: not readable JSON"):
        read_properties(path)
    path.write_text("[]")
    with pytest.raises(ValueError, match="expected"):
        read_properties(path)
    assert read_properties(tmp_path / "absent.json") == {}


@pytest.mark.skipif(not (shared_datasets_dir() / "yelp2018" / "train.npz").is_file(), reason="no shared datasets")
def test_the_committed_properties_are_what_the_files_give():
    committed = json.loads((ROOT / "results" / "data_properties.json").read_text())
    assert committed["datasets"] == measure(shared_datasets_dir())
