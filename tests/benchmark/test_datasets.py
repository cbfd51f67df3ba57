import pytest

from recbole_mgformer.benchmark.datasets import (
    OLDER_RUNS_HEADING,
    check_model_fits,
    page_of,
    table_kind,
    training_share,
    untuned_heading,
)
from recbole_mgformer.config.defaults import properties_dir


def test_each_shipped_dataset_names_its_table_and_page():
    kinds = {path.stem: table_kind(path.stem) for path in (properties_dir() / "dataset").glob("*.yaml")}
    assert kinds["amazon-beauty"] == kinds["ml-100k"] == "general"
    assert kinds["ml-100k-seq"] == kinds["amazon-beauty-seq"] == "sequential"
    assert {kinds[f"ml-100k-ctx-{rho}"] for rho in ("0.2", "0.4", "0.6", "0.8")} == {"context"}
    assert page_of("amazon-beauty") == "amazon-beauty" and page_of("ml-100k-seq") == "sequential"
    assert page_of("tiny") == "tiny" and table_kind("tiny") == "general"  # no config: a general page of its own
    assert [training_share(f"ml-100k-ctx-{rho}") for rho in ("0.2", "0.4", "0.6", "0.8")] == [0.2, 0.4, 0.6, 0.8]
    # LightGCN's splits: the carved and the select-on-test variant share a general page
    for name in ("gowalla", "yelp2018"):
        assert kinds[name] == kinds[f"{name}-full"] == "general"
        assert page_of(name) == page_of(f"{name}-full") == name
        check_model_fits("LightGCN", name)
        check_model_fits("LightGCN", f"{name}-full")


def test_an_unknown_table_is_refused_with_the_choices(dataset_configs):
    dataset_configs("odd", "benchmark_table: ranking\n")
    with pytest.raises(ValueError, match=r"odd.yaml: benchmark_table 'ranking' is not one of general, sequential"):
        table_kind("odd")


def test_runs_outside_a_search_are_older_runs_unless_the_dataset_names_them(dataset_configs):
    assert untuned_heading("ml-100k") == untuned_heading("tiny") == OLDER_RUNS_HEADING
    for name in ("gowalla-full", "yelp2018-full"):  # reproductions at the papers' settings, not older runs
        assert untuned_heading(name).startswith("At fixed settings, not searched")
    dataset_configs("odd", "benchmark_untuned_heading: [1, 2]\n")
    with pytest.raises(ValueError, match=r"odd.yaml: benchmark_untuned_heading must be one line of text, not \[1, 2\]"):
        untuned_heading("odd")


def test_a_model_runs_only_where_its_kind_of_table_is():
    check_model_fits("EAGPS", "ml-100k-seq")
    check_model_fits("AutoInt", "ml-100k-ctx-0.8")
    check_model_fits("Pop", "ml-100k")
    with pytest.raises(
        ValueError, match="EAGPS is a sequential model, but the runs of ml-100k-ctx-0.8 go into a context table"
    ):
        check_model_fits("EAGPS", "ml-100k-ctx-0.8")
    with pytest.raises(ValueError, match="BPR is a general model"):
        check_model_fits("BPR", "ml-100k-seq")


@pytest.mark.parametrize("model, dataset", [("GRU4Rec", "ml-100k-seq"), ("LR", "ml-100k-ctx-0.4")])
def test_a_dataset_reading_ml_100k_is_configured_as_ml_100k_under_its_protocol_was(model, dataset, tmp_path):
    """RecBole applies its own ml-100k settings by that name only (normalize_all orders equal timestamps):
    the retired scripts ran ``ml-100k`` with the protocol file, and the named dataset must run the same."""
    from recbole_mgformer.quick_start import build_config

    protocol = str(properties_dir() / "dataset" / f"{dataset}.yaml")
    before = build_config(model, "ml-100k", [protocol], {"data_path": str(tmp_path)})[0].final_config_dict
    after = build_config(model, dataset, None, {"data_path": str(tmp_path)})[0].final_config_dict
    # the name and folder differ, the knowledge-graph filters have no graph to filter, top-k no ranking to cut
    unused = {"dataset", "data_path", "entity_kg_num_interval", "relation_kg_num_interval", "topk"}
    assert {
        k: (before.get(k), after.get(k))
        for k in set(before) | set(after)
        if before.get(k) != after.get(k) and k not in unused
    } == {}
