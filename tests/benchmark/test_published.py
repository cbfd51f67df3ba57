"""Published numbers beside ours (properties/published/): what the files say, how they are checked, how a
table shows them."""

import pytest

from recbole_mgformer.benchmark import published as published_module
from recbole_mgformer.benchmark.general import published_lines, render_dataset
from recbole_mgformer.benchmark.published import Published, published_numbers


def record(variant, seed, recall, ndcg):
    return {
        "variant": variant,
        "model": variant.split()[0],
        "seed": seed,
        "test": {"recall@20": recall, "ndcg@20": ndcg},
        "valid": {"ndcg@20": ndcg},
        "machine": "cpu",
        "commit": "abc",
    }


def test_shipped_files_give_the_shared_readmes_numbers_under_our_model_names():
    gowalla, yelp = published_numbers("gowalla"), published_numbers("yelp2018")
    assert gowalla.numbers("LightGCN") == (0.1830, 0.1554) and yelp.numbers("XSimGCL") == (0.0723, 0.0604)
    assert gowalla.numbers("GFCF") == (0.1849, 0.1518) and gowalla.models["GFCF"]["name"] == "GF-CF"
    assert gowalla.numbers("SLIMElastic") == (0.1699, 0.1382) and gowalla.numbers("ItemKNN") == (0.1570, 0.1214)
    assert yelp.numbers("SGL") == (0.0675, 0.0555) and gowalla.numbers("SGL") is None  # no published Gowalla SGL
    assert published_numbers("gowalla-full") == gowalla  # the select-on-test variant: the same table
    assert "select on test" in gowalla.note and gowalla.label == "published"
    beauty = published_numbers("amazon-beauty")
    assert beauty.label == "paper" and beauty.numbers("MGFormer degree_mask=none") == (0.1501, 0.0739)
    assert published_numbers("ml-100k").models == {}


def test_rows_get_published_columns_the_relative_gap_sources_and_the_missing_models():
    records = [
        record("LightGCN", 0, 0.1800, 0.1500),
        record("LightGCN", 1, 0.1820, 0.1520),
        record("GFCF", 0, 0.1849, 0.1600),
        record("BPR", 0, 0.1, 0.05),
    ]
    page = render_dataset("gowalla", records)
    assert (
        "| model | seeds | test Recall@20 | test NDCG@20 | valid NDCG@20 | published Recall@20 | "
        "published NDCG@20 | vs published |"
    ) in page
    # ours / published - 1: 0.1810 / 0.1830 - 1 = -1.1%, 0.1510 / 0.1554 - 1 = -2.8%
    assert "| LightGCN | 2 | 0.1810 ± 0.0127 | 0.1510 ± 0.0127 | 0.1510 | 0.1830 | 0.1554 | -1.1% / -2.8% |" in page
    assert "| GFCF | 1 | **0.1849** | **0.1600** | 0.1600 | 0.1849 | 0.1518 | +0.0% / +5.4% |" in page
    assert "| BPR | 1 | 0.1000 | 0.0500 | 0.0500 |  |  |  |" in page
    assert "Published numbers select on test" in page
    assert "GFCF (published as GF-CF): GF-CF paper (Shen et al., CIKM 2021); BARS board" in page
    assert "Published, no row of ours yet: BSPM: BSPM paper (Choi et al., SIGIR 2023), 0.1920 / 0.1597;" in page
    assert "| paper Recall@20" not in page and "published Recall@20" not in render_dataset("ml-100k", records)


def test_a_published_number_shown_beside_a_row_of_another_key_is_not_listed_as_missing():
    def entry(recall, ndcg, name):
        return {"recall@20": recall, "ndcg@20": ndcg, "source": f"{name}'s paper", "name": name}

    models = {
        "XSimGCL": entry(0.0723, 0.0604, "XSimGCL"),
        "XSimGCL lambda=0.2 epochs=20": entry(0.0723, 0.0604, "XSimGCL"),  # the same number, our run at its settings
        "SGL": entry(0.0675, 0.0555, "SGL-ED"),
    }
    published = Published(label="published", note="", models=models, path="yelp2018.yaml")
    text = "\n".join(published_lines(published, {"XSimGCL lambda=0.2 epochs=20", "BPR"}))
    assert "Sources (published;" in text and "XSimGCL lambda=0.2 epochs=20 (published as XSimGCL)" in text
    assert "no row of ours yet: SGL (published as SGL-ED): SGL-ED's paper, 0.0675 / 0.0555." in text
    missing = "\n".join(published_lines(published, {"BPR"}))  # without a row, each published number once
    assert "no row of ours yet: XSimGCL: XSimGCL's paper, 0.0723 / 0.0604; SGL (published as SGL-ED)" in missing
    assert "XSimGCL lambda=0.2 epochs=20" not in missing


def write(tmp_path, name, text):
    (tmp_path / f"{name}.yaml").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "text, message",
    [
        ("models: {A: {recall@20: 0.1, source: s}}", r"bad.yaml: model 'A': missing ndcg@20"),
        ("models: {A: {recall@20: 0.1, ndcg@20: 0.2, source: s, ndcg@10: 0.1}}", r"model 'A': unknown ndcg@10"),
        (
            "models: {A: {recall@20: 18.3, ndcg@20: 0.2, source: s}}",
            r"model 'A': recall@20 must be a number in \(0, 1\]",
        ),
        (
            "models: {A: {recall@20: '0.1', ndcg@20: 0.2, source: s}}",
            r"recall@20 must be a number in \(0, 1\], got '0.1'",
        ),
        ("table: {}", r"bad.yaml: expected a mapping with `models:"),
        ("models: {}\nsource: s", r"bad.yaml: unknown key\(s\) source"),
        ("datasets: bad\nmodels: {}", r"datasets must be a list"),
    ],
)
def test_a_malformed_file_is_named_with_the_model_and_the_fix(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        published_numbers("bad", write(tmp_path, "bad", text))


def test_a_dataset_in_two_files_is_refused(tmp_path):
    write(tmp_path, "a", "datasets: [x]\nmodels: {}")
    write(tmp_path, "b", "datasets: [x, y]\nmodels: {}")
    with pytest.raises(ValueError, match=r"x is listed by .*a.yaml and .*b.yaml"):
        published_numbers("x", tmp_path)
    assert published_numbers("y", tmp_path).models == {}


def test_the_page_reads_the_files_it_is_given(tmp_path, monkeypatch):
    write(
        tmp_path,
        "tiny",
        "label: theirs\nnote: Selected somehow.\nmodels: {BPR: {recall@20: 0.2, ndcg@20: 0.1, source: a table}}",
    )
    monkeypatch.setattr(published_module, "published_dir", lambda: tmp_path)
    page = render_dataset("tiny", [record("BPR", 0, 0.1, 0.05)])
    assert "| theirs Recall@20 | theirs NDCG@20 | vs theirs |" in page
    assert "| 0.2000 | 0.1000 | -50.0% / -50.0% |" in page
    assert "Selected somehow." in page and "BPR: a table" in page


def test_a_row_at_other_settings_takes_the_papers_entry_it_points_at(tmp_path):
    text = 'models:\n  A: &A {recall@20: 0.2, ndcg@20: 0.1, source: a table}\n  "A epochs=5": {<<: *A, name: A}\n'
    table = published_numbers("tiny", write(tmp_path, "tiny", text))
    assert table.numbers("A epochs=5") == (0.2, 0.1)
    assert table.source_text("A epochs=5") == "A epochs=5 (published as A): a table"
    yelp = published_numbers("yelp2018")  # the shipped aliases: the paper's numbers and source under our row's name
    assert yelp.numbers("SimGCL epochs=20") == yelp.numbers("SimGCL")
    assert (
        yelp.models[
            "SGL n_layers=3 ssl_tau=0.2 ssl_weight=0.1 drop_ratio=0.1 reg_weight=0.0001 learning_rate=0.001 "
            "train_batch_size=2048 epochs=20"
        ]["name"]
        == "SGL-ED"
    )
