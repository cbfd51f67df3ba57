import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recbole_mgformer.benchmark.entries import (
    ABLATION_OPTIONS,
    ABLATIONS,
    MAX_SLUG,
    parse_entry,
    parse_seeds,
    slug,
    split_models,
)


def test_model_entries_keep_bracketed_overrides_and_expand_ablations():
    entries = split_models("BPR, MGFormer[degree_mask=none; n_heads=2],MGFormer-ablations")
    assert entries[:2] == ["BPR", "MGFormer[degree_mask=none; n_heads=2]"]
    assert entries[2:] == ABLATIONS
    assert parse_entry("MGFormer[degree_mask=none; n_heads=2; attention=False]") == (
        "MGFormer",
        {"degree_mask": "none", "n_heads": 2, "attention": False},
    )
    with pytest.raises(ValueError, match="is not key=value"):
        parse_entry("MGFormer[degree_mask]")
    with pytest.raises(ValueError, match="must be NAME or NAME"):
        parse_entry("MG Former")
    with pytest.raises(ValueError, match="separate them with ';'"):
        parse_entry("BSPM[solver_sharpen=euler,T_s=1.2]")
    assert parse_entry("MGFormer[topk=[10,20]]") == ("MGFormer", {"topk": [10, 20]})
    spaced = parse_entry("MGFormer[ embedding_size = 8 ;degree_mask= none ]")
    assert spaced == ("MGFormer", {"embedding_size": 8, "degree_mask": "none"})  # the key, not 'embedding_size '


@pytest.mark.parametrize(
    "entry, message",
    [
        ("BPR[epochs=1]]", "its brackets do not pair up"),  # would set epochs to '1]'
        ("BPR[topk=[10, 20]", "its brackets do not pair up"),
        ("BPR[epochs=[1]", "its brackets do not pair up"),
        ("BPR[=1]", "'=1' is not key=value"),
        ("BPR[ =1; epochs=2]", "'=1' is not key=value"),
        ("MGFormer[attention=False;attention=True]", "sets attention twice; keep one attention=..."),
        ("MGFormer[attention=False; attention =True]", "sets attention twice"),
        ("BPR[topk=[10,]", "its brackets do not pair up"),
        ("BPR[eval_args={split: 1 order: 2}]", "--eval_args={split: 1 order: 2} is not a YAML list or mapping"),
    ],
)
def test_an_entry_with_unpaired_brackets_or_no_key_is_named(entry, message):
    with pytest.raises(ValueError, match=rf"model entry '{re.escape(entry)}': .*{re.escape(message)}"):
        parse_entry(entry)


def test_the_ablated_options_are_the_keys_parse_entry_reads_from_the_ablations():
    # read without parse_entry (which imports torch) so that rendering a page does not
    parsed = {key for entry in ABLATIONS for key in parse_entry(entry)[1]} - {"attention"}
    assert ABLATION_OPTIONS == parsed == {"structural_encoding", "degree_mask", "feature_map"}


def test_ablations_take_the_tuned_mgformers_settings_and_other_variants_are_searched_as_themselves():
    from recbole_mgformer.benchmark.entries import tuned_stem, tuning_target

    for entry in ABLATIONS:
        model, overrides = parse_entry(entry)
        expected = overrides if entry == "MGFormer[attention=False]" else {}
        assert tuning_target(model, overrides) == ("MGFormer", expected), entry
    assert tuning_target("DirectAU", {"gamma": 0.5}) == ("DirectAU", {"gamma": 0.5})
    assert tuned_stem("MGFormer", {}) == "MGFormer"
    assert tuned_stem("MGFormer", {"attention": False}) == "mgformer-attention-false"


def test_a_tuned_files_stem_names_its_model():
    from recbole_mgformer.benchmark.entries import stem_model, tuned_stem
    from recbole_mgformer.integration.registry import get_model

    for model, overrides in [
        ("MGFormer", {}),
        ("MGFormer", {"attention": False}),
        ("XSimGCL", {}),
        ("LightGCN", {"n_layers": 2}),
        ("DirectAU", {"gamma": 0.5, "n_layers": 1}),
    ]:
        assert get_model(stem_model(tuned_stem(model, overrides))).__name__ == model


@pytest.mark.parametrize("entry", ["BPR[seed=5]", "MGFormer[n_heads=2; seed=0]"])
def test_an_entry_may_not_set_the_seed_that_seeds_gives(entry):
    """``BPR[seed=5]`` with ``--seeds 0,1`` trained both runs at seed 5 and published "2 seeds ± 0.0000"."""
    with pytest.raises(ValueError, match=r"sets seed=\d.*each run's seed comes from --seeds.*--seeds 5"):
        parse_entry(entry)


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "BPR[model=LightGCN]",
            r"'BPR\[model=LightGCN\]' sets model, .*write that model's entry instead \(e\.g\. LightGCN\[",
        ),
        ("BPR[epochs=1; dataset=ml-100k]", r"sets dataset, which an entry cannot change: list it in --datasets"),
    ],
)
def test_an_entry_may_not_name_another_model_or_dataset(entry, message):
    """RecBole takes the run's model over the entry's: ``BPR[model=LightGCN]`` trained BPR under that row name."""
    with pytest.raises(ValueError, match=message):
        parse_entry(entry)


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,a", r"'a' is not a seed; give whole numbers from 0 to 4294967295"),
        ("-1", r"'-1' is not a seed"),
        (str(2**32), r"is not a seed"),
        ("0,1,0", r"seed 0 is given twice"),
        (",", r"names no seed"),
    ],
)
def test_seeds_numpy_cannot_take_or_given_twice_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


def test_seeds_parse_in_order():
    assert parse_seeds(" 2, 0,1 ") == [2, 0, 1] and parse_seeds(str(2**32 - 1)) == [2**32 - 1]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--models", "BPR[seed=5]", "--seeds", "0,1"], "model entry 'BPR[seed=5]' sets seed=5"),
        (["--models", "BPR", "--seeds", "0,1", "--seed=5"], "--seed=5 sets the seed of every run"),
    ],
)
def test_the_benchmark_refuses_a_seed_beside_seeds_before_any_run(tmp_path, capsys, arguments, message):
    """``--seed=5`` was also taken for an abbreviation of ``--seeds``, replacing them."""
    from recbole_mgformer.benchmark import main as benchmark_main

    with pytest.raises(SystemExit) as stopped:
        benchmark_main([*arguments, "--datasets", "ml-100k", "--results", str(tmp_path), "--data_path", str(tmp_path)])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and message in error and "--seeds" in error
    assert not (tmp_path / "runs").exists()


def test_a_models_ablations_expand_by_name_and_take_the_tuned_models_settings():
    from recbole_mgformer.benchmark.entries import ABLATION_SETS, tuning_target

    assert split_models("SASRec,eagps-ablations") == ["SASRec", *ABLATION_SETS["EAGPS"]]
    for entry in ABLATION_SETS["EAGPS"]:
        model, overrides = parse_entry(entry)
        assert tuning_target(model, overrides) == ("EAGPS", {}), entry
    assert tuning_target("EAGPS", {"n_heads": 2}) == ("EAGPS", {"n_heads": 2})  # not an ablation: searched itself
    assert split_models("SASRec-ablations") == ["SASRec-ablations"]  # no such set: an entry, refused by the registry


def test_a_slug_of_a_short_entry_is_its_words_joined():
    assert slug("MGFormer attention=False filter_residual_weight=0.25") == (
        "mgformer-attention-false-filter-residual-weight-0-25"
    )


@given(st.text(alphabet="abcXYZ019 =.;_-", max_size=600), st.text(alphabet="abc019", min_size=1, max_size=8))
def test_a_long_entrys_slug_is_bounded_and_kept_apart_from_one_that_differs_at_its_end(text, tail):
    """Records, checkpoints and claims are named by the slug: a name over 255 bytes cannot be created."""
    name = slug(text)
    assert len(name) <= MAX_SLUG and name == slug(text)
    assert not name.startswith("-") and not name.endswith("-")
    if len(slug(text + " " + tail)) > MAX_SLUG:
        assert slug(text + " " + tail) != slug(text)
    if len(re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")) <= MAX_SLUG:
        assert name == re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()  # names of shorter entries unchanged
