import pytest

from recbole_mgformer import run_recommender
from recbole_mgformer.data import AtomicFileError, validate_atomic_file


@pytest.mark.parametrize("content, message", [
    ("user_id:token\titem_id\n1\t2\n", r"bad.inter:1: column 2 header 'item_id' must be 'name:type'"),
    ("user_id:token\titem_id:integer\n1\t2\n", r":1: column 2 header 'item_id:integer'"),
    ("user_id:token\titem_id:token\n1\t2\n3\t4\t5\n", r"bad.inter:3: 3 columns where the header has 2"),
    ("user_id:token item_id:token\n1 2\n", r":1: column 1 header 'user_id:token item_id:token'"),
    ("user_id:token\titem_id:token\trating:float\n1\t2\t4\n1\t3\tfive\n", r":3: column 3 is declared float.*'five'"),
    ("", r":1: the file is empty"),
])
def test_malformed_files_name_the_file_line_and_fix(tmp_path, content, message):
    path = tmp_path / "bad.inter"
    path.write_text(content)
    with pytest.raises(AtomicFileError, match=message):
        validate_atomic_file(path)


def test_a_well_formed_file_passes(tmp_path):
    path = tmp_path / "good.inter"
    path.write_text("user_id:token\titem_id:token\trating:float\ttags:token_seq\n1\t2\t4.5\ta b\n1\t3\t\t\n")
    validate_atomic_file(path)


def test_the_runner_rejects_a_malformed_dataset_before_training(tmp_path):
    folder = tmp_path / "data" / "broken"
    folder.mkdir(parents=True)
    (folder / "broken.inter").write_text("user_id:token\titem_id:token\n1\t2\n1\n")
    with pytest.raises(AtomicFileError, match=r"broken.inter:3: 1 columns where the header has 2"):
        run_recommender("MGFormer", "broken", config_dict={"data_path": str(tmp_path / "data")})


def test_the_runner_explains_a_missing_dataset(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset folder .* does not exist"):
        run_recommender("MGFormer", "nowhere", config_dict={"data_path": str(tmp_path)})
