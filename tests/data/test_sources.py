import pytest

from recbole_mgformer.data.sources import ensure_dataset, shared_datasets_dir


def test_known_dataset_is_imported_once_from_the_shared_folder(tmp_path, monkeypatch):
    source = tmp_path / "shared" / "datasets" / "amazon-beauty"
    source.mkdir(parents=True)
    (source / "train.txt").write_text("1:1 2\n2:2\n")
    (source / "test.txt").write_text("1:3\n2:1\n")
    monkeypatch.setenv("RECBOLE_MGFORMER_SHARED", str(tmp_path / "shared"))
    target = ensure_dataset("amazon-beauty", tmp_path / "dataset")
    assert target == tmp_path / "dataset" / "amazon-beauty" / "amazon-beauty.inter"
    assert len(target.read_text().splitlines()) == 1 + 5
    target.write_text("user_id:token\titem_id:token\n")  # an existing import is left alone
    assert ensure_dataset("amazon-beauty", tmp_path / "dataset").read_text() == "user_id:token\titem_id:token\n"


def test_missing_sources_say_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setenv("RECBOLE_MGFORMER_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="RECBOLE_MGFORMER_SHARED"):
        ensure_dataset("amazon-beauty", tmp_path / "dataset")
    assert ensure_dataset("ml-100k", tmp_path / "dataset") is None  # not ours to import: RecBole finds it


@pytest.mark.skipif(not (shared_datasets_dir() / "amazon-beauty").is_dir(), reason="shared Beauty files absent")
def test_real_beauty_matches_the_papers_table_1(tmp_path):
    lines = ensure_dataset("amazon-beauty", tmp_path).read_text().splitlines()[1:]
    users = {line.split("\t")[0] for line in lines}
    items = {line.split("\t")[1] for line in lines}
    assert (len(lines), len(users), len(items)) == (198_502, 22_363, 12_101)
