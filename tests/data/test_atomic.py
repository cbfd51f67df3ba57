import pytest

from recbole_mgformer import run_recommender
from recbole_mgformer.data import AtomicFileError, validate_atomic_file


@pytest.mark.parametrize(
    "content, message",
    [
        ("user_id:token\titem_id\n1\t2\n", r"bad.inter:1: column 2 header 'item_id' must be 'name:type'"),
        ("user_id:token\titem_id:integer\n1\t2\n", r":1: column 2 header 'item_id:integer'"),
        ("user_id:token\titem_id:token\n1\t2\n3\t4\t5\n", r"bad.inter:3: 3 columns where the header has 2"),
        ("user_id:token item_id:token\n1 2\n", r":1: column 1 header 'user_id:token item_id:token'"),
        (
            "user_id:token\titem_id:token\trating:float\n1\t2\t4\n1\t3\tfive\n",
            r":3: column 3 is declared float.*'five'",
        ),
        ("", r":1: the file is empty"),
        # ' 196' and '196' would be two users: the old validator let them through
        (
            "user_id:token\titem_id:token\n196\t2\n 196\t3\n",
            r"bad.inter:3: column 1 \(user_id\) holds ' 196', with "
            r"whitespace around the token.*apart from '196'",
        ),
        ("user_id:token\titem_id:token\n1\t2 \n", r":2: column 2 \(item_id\) holds '2 '"),
        ("user_id:token\ttags:token_seq\n1\ta\u00a0 b\n", r":2: column 2 \(tags\) holds 'a\\xa0'"),
    ],
)
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


def latin1_dataset(folder, name="latin"):
    """A dataset whose item names are latin-1 bytes (``café``), not UTF-8."""
    (folder / name).mkdir(parents=True)
    lines = ["user_id:token\titem_id:token"] + [
        f"u{u}\t{item}{(u + k) % 12}" for u in range(20) for k in range(6) for item in ("caf\xe9",)
    ]
    (folder / name / f"{name}.inter").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return folder


def test_a_file_in_another_encoding_is_named_by_file_and_line(tmp_path):
    path = latin1_dataset(tmp_path) / "latin" / "latin.inter"
    with pytest.raises(
        AtomicFileError,
        match=r"latin.inter:2: byte 7 of the line \(b'\\xe9'\) is not utf-8; set "
        r"RecBole's encoding option .*--encoding=latin-1",
    ):
        validate_atomic_file(path)
    assert validate_atomic_file(path, encoding="latin-1").rows == 120


def test_the_runner_honours_recboles_encoding_option(tmp_path):
    data = latin1_dataset(tmp_path / "data")
    settings = {
        "data_path": str(data),
        "epochs": 1,
        "show_progress": False,
        "state": "WARNING",
        "metrics": ["Recall"],
        "topk": [5],
        "valid_metric": "Recall@5",
    }
    with pytest.raises(AtomicFileError, match="latin.inter:2: .* is not utf-8"):
        run_recommender("Pop", "latin", config_dict=settings, saved=False)
    result = run_recommender("Pop", "latin", config_dict={**settings, "encoding": "latin-1"}, saved=False)
    assert 0 <= result["test_result"]["recall@5"] <= 1


def test_an_interaction_file_with_a_header_only_is_named(tmp_path):
    folder = tmp_path / "data" / "hollow"
    folder.mkdir(parents=True)
    (folder / "hollow.inter").write_text("user_id:token\titem_id:token\n")
    with pytest.raises(AtomicFileError, match=r"hollow.inter: the file has a header but no interactions"):
        run_recommender("BPR", "hollow", config_dict={"data_path": str(tmp_path / "data")})


def test_repeated_pairs_are_counted_within_and_across_files(tmp_path):
    first, second = tmp_path / "a.inter", tmp_path / "b.inter"
    first.write_text("user_id:token\titem_id:token\trating:float\n1\t2\t5\n1\t2\t4\n2\t2\t3\n")
    second.write_text("item_id:token\tuser_id:token\n2\t1\n3\t1\n")
    seen = set()
    assert validate_atomic_file(first, pair_fields=("user_id", "item_id"), seen_pairs=seen) == (3, 1)
    assert validate_atomic_file(second, pair_fields=("user_id", "item_id"), seen_pairs=seen) == (2, 1)
    assert validate_atomic_file(first) == (3, 0)  # no pair fields: nothing counted


def test_a_byte_order_mark_reads_as_utf8_and_trains_as_without_it(tmp_path):
    from conftest import TINY_CONFIG, write_interactions

    data = write_interactions(tmp_path / "data")
    inter = data / "tiny" / "tiny.inter"
    (data / "marked").mkdir()
    (data / "marked" / "marked.inter").write_bytes(b"\xef\xbb\xbf" + inter.read_bytes())
    settings = {**TINY_CONFIG, "data_path": str(data), "epochs": 1}
    plain = run_recommender("BPR", "tiny", config_dict=settings, saved=False)
    marked = run_recommender("BPR", "marked", config_dict=settings, saved=False)
    assert marked["test_result"] == plain["test_result"]  # the same users and items, not a '\ufeffuser_id' column


@pytest.mark.parametrize("inserted, what", [("\ufeff", "a byte-order mark"), ("\0", "a NUL byte")])
def test_an_invisible_character_inside_the_file_is_named(tmp_path, inserted, what):
    """Two files saved with a byte-order mark, concatenated: user '\\ufeffu3' would be a user of its own."""
    path = tmp_path / "joined.inter"
    path.write_text(f"user_id:token\titem_id:token\nu1\ti1\nu3\t{inserted}i2\n")
    with pytest.raises(AtomicFileError, match=f"joined.inter:3: column 2 holds {what}"):
        validate_atomic_file(path)
