"""LightGCN's public splits (gowalla, yelp2018) as RecBole benchmark files: the published test set exactly, a
seeded validation set carved from each user's training items, or (``-full``) the test set as validation."""

import numpy as np
import pytest
import scipy.sparse as sp

from recbole_mgformer.data.importer import import_npz, main
from recbole_mgformer.data.npz_splits import carve_validation
from recbole_mgformer.data.sources import NPZ_SEED, NPZ_SOURCES, ensure_dataset, shared_datasets_dir
from recbole_mgformer.quick_start import build_config, prepare


def random_split(n_users=30, n_items=50, seed=0):
    """(train, test) users x items, disjoint; user 0 has one training item, every user at least one test item."""
    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items)) < 0.3).astype(np.float64)
    dense[0] = 0.0
    dense[0, :2] = 1.0
    test = np.zeros_like(dense)
    for user in range(n_users):
        items = np.flatnonzero(dense[user])
        test[user, items[-1]], dense[user, items[-1]] = 1.0, 0.0
    return sp.csr_matrix(dense), sp.csr_matrix(test)


def entries(matrix):
    coo = sp.coo_matrix(matrix)
    return set(zip(coo.row.tolist(), coo.col.tolist()))


def test_carve_moves_a_rounded_tenth_of_each_users_items_seeded():
    train, _ = random_split()
    kept, valid = carve_validation(train, 0.1, seed=3)
    assert entries(kept) | entries(valid) == entries(train) and not entries(kept) & entries(valid)
    counts, taken = np.diff(train.indptr), np.diff(valid.indptr)
    expected = [0 if n < 2 else min(max(1, int(np.floor(0.1 * n + 0.5))), n - 1) for n in counts]
    assert taken.tolist() == expected and counts[0] == 1 and taken[0] == 0  # one item: kept for training
    assert (np.diff(kept.indptr) >= 1).all()
    again_kept, again_valid = carve_validation(train, 0.1, seed=3)
    assert entries(again_valid) == entries(valid) and entries(again_kept) == entries(kept)
    assert entries(carve_validation(train, 0.1, seed=4)[1]) != entries(valid)
    assert np.diff(carve_validation(train, 0.5, seed=3)[1].indptr).tolist() == [
        0 if n < 2 else min(max(1, int(np.floor(0.5 * n + 0.5))), n - 1) for n in counts
    ]


@pytest.mark.parametrize("share", [0, 1, -0.1, 1.5])
def test_a_share_outside_zero_one_is_refused(share):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        carve_validation(sp.csr_matrix(np.ones((2, 3))), share, seed=0)


def read_inter(path):
    lines = path.read_text().splitlines()
    assert lines[0] == "user_id:token\titem_id:token"
    return {tuple(int(x) for x in line.split("\t")) for line in lines[1:]}


def saved_split(folder, seed=0):
    train, test = random_split(seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    sp.save_npz(folder / "train.npz", train)
    sp.save_npz(folder / "test.npz", test)
    return train, test


def test_import_keeps_test_exactly_and_carves_validation_from_train(tmp_path):
    train, test = saved_split(tmp_path / "src")
    summary = import_npz(tmp_path / "src" / "train.npz", tmp_path / "src" / "test.npz", "toy", tmp_path / "out")
    folder = tmp_path / "out" / "toy"
    parts = {split: read_inter(folder / f"toy.{split}.inter") for split in ("train", "valid", "test")}
    assert parts["test"] == entries(test)
    assert parts["train"] | parts["valid"] == entries(train) and not parts["train"] & parts["valid"]
    assert parts["valid"] == entries(carve_validation(train, 0.1, 0)[1])
    assert summary.interactions == train.nnz + test.nnz and summary.repeated_pairs == 0
    # validation on test: no validation file (the config reads the test file twice), the whole training set
    import_npz(tmp_path / "src" / "train.npz", tmp_path / "src" / "test.npz", "toyfull", tmp_path / "out", "test")
    assert read_inter(tmp_path / "out" / "toyfull" / "toyfull.train.inter") == entries(train)
    assert not (tmp_path / "out" / "toyfull" / "toyfull.valid.inter").exists()


def test_import_refuses_mismatched_or_unreadable_matrices(tmp_path, capsys):
    saved_split(tmp_path / "src")
    sp.save_npz(tmp_path / "src" / "other.npz", sp.csr_matrix(np.ones((3, 4))))
    with pytest.raises(ValueError, match=r"is 30 x 50 but .*other.npz is 3 x 4"):
        import_npz(tmp_path / "src" / "train.npz", tmp_path / "src" / "other.npz", "toy", tmp_path / "out")
    (tmp_path / "src" / "bad.npz").write_text("not a matrix")
    args = [
        "--format",
        "npz",
        "--name",
        "toy",
        "--output",
        str(tmp_path / "out"),
        "--test",
        str(tmp_path / "src" / "test.npz"),
    ]
    assert main(args + ["--train", str(tmp_path / "src" / "bad.npz")]) == 2
    assert "bad.npz: not a scipy sparse .npz matrix" in capsys.readouterr().err
    assert main(args + ["--train", str(tmp_path / "src" / "train.npz"), "--valid-share", "0.2"]) == 0
    assert "toy.valid.inter" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(args + ["--train", str(tmp_path / "src" / "train.npz"), "--valid-share", "a tenth"])


@pytest.fixture
def shared_toy(tmp_path, monkeypatch):
    """A shared folder whose gowalla is a small random split."""
    monkeypatch.setenv("RECBOLE_MGFORMER_SHARED", str(tmp_path / "shared"))
    return saved_split(tmp_path / "shared" / "datasets" / "gowalla")


def recbole_splits(name, data_path):
    config, _ = build_config(
        "Pop", name, None, {"data_path": str(data_path), "state": "WARNING", "show_progress": False}
    )
    _, trainer, data = prepare(config)
    splits = []
    for part in data:
        dataset = part._dataset
        users = dataset.id2token("user_id", dataset.inter_feat["user_id"].numpy()).astype(int)
        items = dataset.id2token("item_id", dataset.inter_feat["item_id"].numpy()).astype(int)
        splits.append(set(zip(users.tolist(), items.tolist())))
    return config, trainer, data, splits


def test_recbole_reads_exactly_the_published_test_set_and_a_disjoint_validation(tmp_path, shared_toy):
    train, test = shared_toy
    config, _, (train_data, _, _), (fit, valid, tested) = recbole_splits("gowalla", tmp_path / "dataset")
    assert config["benchmark_filename"] == ["train", "valid", "test"]
    assert tested == entries(test)  # RecBole's remapping undone: the very pairs of test.npz
    assert fit | valid == entries(train) and not fit & valid and not valid & tested
    assert valid == entries(carve_validation(train, NPZ_SOURCES["gowalla"][1], NPZ_SEED)[1])
    assert (train_data._dataset.user_num - 1, train_data._dataset.item_num - 1) == train.shape  # [PAD] aside


def test_the_full_variant_trains_on_all_of_train_and_selects_on_test(tmp_path, shared_toy):
    train, test = shared_toy
    config, trainer, (train_data, valid_data, test_data), (fit, valid, tested) = recbole_splits(
        "gowalla-full", tmp_path / "dataset"
    )
    assert fit == entries(train) and valid == tested == entries(test)
    assert config["benchmark_page"] == "gowalla"
    trainer.fit(train_data, valid_data, saved=False, show_progress=False)
    # the same items masked in both (training items only), so validation and test scores are the same numbers
    assert trainer.evaluate(valid_data, load_best_model=False) == trainer.evaluate(test_data, load_best_model=False)


def test_an_import_is_done_once_and_missing_sources_say_where_they_go(tmp_path, shared_toy, monkeypatch):
    target = ensure_dataset("gowalla", tmp_path / "dataset")
    assert target == tmp_path / "dataset" / "gowalla" / "gowalla.test.inter"
    target.write_text("user_id:token\titem_id:token\n0\t1\n")  # an existing import is left alone
    assert ensure_dataset("gowalla", tmp_path / "dataset").read_text() == "user_id:token\titem_id:token\n0\t1\n"
    monkeypatch.setenv("RECBOLE_MGFORMER_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"yelp2018/train.npz.*RECBOLE_MGFORMER_SHARED.*--format npz"):
        ensure_dataset("yelp2018", tmp_path / "dataset")


PUBLISHED = {"gowalla": (29_858, 40_981, 810_128, 217_242), "yelp2018": (31_668, 38_048, 1_237_259, 324_147)}


@pytest.mark.slow  # writes and reads back 1 to 1.5 million rows: about a minute each on 2 shared cores
@pytest.mark.parametrize("name", sorted(PUBLISHED))
@pytest.mark.skipif(not (shared_datasets_dir() / "gowalla").is_dir(), reason="shared gowalla/yelp2018 absent")
def test_real_splits_have_the_published_counts(tmp_path, name):
    users, items, n_train, n_test = PUBLISHED[name]
    ensure_dataset(name, tmp_path)
    parts = {split: read_inter(tmp_path / name / f"{name}.{split}.inter") for split in ("train", "valid", "test")}
    assert len(parts["train"]) + len(parts["valid"]) == n_train and len(parts["test"]) == n_test
    assert not parts["train"] & parts["valid"] and not parts["valid"] & parts["test"]
    everything = set().union(*parts.values())
    assert (len({u for u, _ in everything}), len({i for _, i in everything})) == (users, items)
    published_test = sp.load_npz(shared_datasets_dir() / name / "test.npz")
    assert parts["test"] == entries(published_test)
