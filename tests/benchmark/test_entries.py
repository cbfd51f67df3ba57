import pytest

from recbole_mgformer.benchmark.entries import ABLATION_OPTIONS, ABLATIONS, parse_entry, split_models


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
    from recbole_mgformer.registry import get_model

    for model, overrides in [
        ("MGFormer", {}),
        ("MGFormer", {"attention": False}),
        ("XSimGCL", {}),
        ("LightGCN", {"n_layers": 2}),
        ("DirectAU", {"gamma": 0.5, "n_layers": 1}),
    ]:
        assert get_model(stem_model(tuned_stem(model, overrides))).__name__ == model
