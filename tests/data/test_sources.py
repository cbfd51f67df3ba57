import pytest

from recbole_mgformer.data import sources
from recbole_mgformer.data.sources import ensure_dataset, shared_datasets_dir, source_folder


def shared_beauty(tmp_path, monkeypatch):
    """A shared folder holding a two-user Beauty in SELFRec's format."""
    source = tmp_path / "shared" / "datasets" / "amazon-beauty"
    source.mkdir(parents=True)
    (source / "train.txt").write_text("1:1 2\n2:2\n")
    (source / "test.txt").write_text("1:3\n2:1\n")
    monkeypatch.setenv("RECBOLE_MGFORMER_SHARED", str(tmp_path / "shared"))


def test_known_dataset_is_imported_once_from_the_shared_folder(tmp_path, monkeypatch):
    shared_beauty(tmp_path, monkeypatch)
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


def test_a_dataset_with_a_source_reads_its_files_under_its_own_name(tmp_path):
    target = ensure_dataset("ml-100k-seq", tmp_path)  # properties/dataset/ml-100k-seq.yaml: dataset_source ml-100k
    assert target == tmp_path / "ml-100k-seq" / "ml-100k-seq.inter"
    original = source_folder("ml-100k", tmp_path)
    assert target.read_bytes() == (original / "ml-100k.inter").read_bytes()
    assert (tmp_path / "ml-100k-seq" / "ml-100k-seq.user").is_file()  # side features travel with it
    assert not list((tmp_path / "ml-100k-seq").glob("*.tmp"))
    target.write_text("kept\n")  # an existing copy is left alone
    assert ensure_dataset("ml-100k-seq", tmp_path).read_text() == "kept\n"


def test_a_source_from_the_shared_folder_is_imported_first(tmp_path, monkeypatch):
    shared_beauty(tmp_path, monkeypatch)
    target = ensure_dataset("amazon-beauty-seq", tmp_path / "dataset")
    assert target.read_text() == (tmp_path / "dataset" / "amazon-beauty" / "amazon-beauty.inter").read_text()


def test_a_dataset_source_naming_itself_is_refused(tmp_path, monkeypatch):
    config = tmp_path / "loop.yaml"
    config.write_text("dataset_source: loop\n")
    monkeypatch.setattr(sources, "dataset_config_file", lambda name: str(config) if name == "loop" else None)
    with pytest.raises(ValueError, match="dataset_source must name another dataset"):
        ensure_dataset("loop", tmp_path)
