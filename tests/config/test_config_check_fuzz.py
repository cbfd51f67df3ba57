"""Generated evaluation settings (metrics, topk, valid_metric, the split, order, grouping, mode, seed) either pass
the checks and then build RecBole's Config, the data split and a first evaluation holding the validation metric, or
stop with a message (a ValueError of this package, printed without a traceback) naming the setting."""

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from recbole_mgformer.config.input_checks import _raised_here

METRIC_NAMES = ["Recall", "NDCG", "MRR", "Hit", "Precision", "MAP", "GAUC", "ItemCoverage", "AUC", "LogLoss", "Recal"]
SETTING_NAMES = ("metrics", "topk", "valid_metric", "eval_args", "split", "order", "group_by", "mode", "seed")
SETTING_NAMES += ("TIME_FIELD", "load_col")

metric_lists = st.lists(st.sampled_from(METRIC_NAMES[:6]), min_size=1, max_size=3, unique=True)
odd_metrics = st.one_of(st.sampled_from(METRIC_NAMES), st.lists(st.sampled_from(METRIC_NAMES), max_size=3))
cutoffs = st.integers(1, 25) | st.sampled_from([0, -1, 60, 61, 80])
cutoff_lists = st.lists(cutoffs, min_size=1, max_size=3, unique=True)
odd_topk = st.one_of(cutoffs, st.sampled_from(["20", "[5, 10]", [], (5, 10)]))
odd_valid_metric = st.builds(
    lambda name, at: name + at,
    st.sampled_from(METRIC_NAMES),
    st.sampled_from(["", "@5", "@10", "@20", "@61", "@x", "@05"]),
)
shares = st.sampled_from([0, 0.1, 0.2, 0.5, 0.8, 1, -0.1])
split = st.one_of(
    st.sampled_from([{"RS": [0.8, 0.1, 0.1]}, {"RS": [0.6, 0.2, 0.2]}, {"LS": "valid_and_test"}]),
    st.builds(lambda r: {"RS": r}, st.lists(shares, min_size=3, max_size=3)),
    st.builds(lambda r: {"RS": r}, st.lists(shares, min_size=2, max_size=4)),
    st.builds(lambda r: {"TS": r}, st.lists(shares, min_size=3, max_size=3)),
    st.sampled_from([{"LS": "valid_only"}, {"LS": "test_only"}, {"LS": "valid"}]),
)
eval_args = st.fixed_dictionaries(
    {"split": split},
    optional={
        "order": st.sampled_from(["RO", "TO", "XO"]),
        "group_by": st.sampled_from(["user", "none", None, "item"]),
        "mode": st.sampled_from(["full", "labeled", "uni10", "uni0", "pop5"]),
    },
)
seed = st.one_of(st.integers(-2, 2**32 + 1), st.sampled_from([0, 2**32 - 1, 2**32, 1.5, "abc", True, "7"]))


@st.composite
def drawn_settings(draw):
    """Settings a user might pass: each key present or not, mostly of a usable shape, the validation metric mostly
    one of the metrics at one of the top-k (a top-k metric at any cut-off), or anything."""
    drawn = {}
    if draw(st.booleans()):
        drawn["metrics"] = draw(metric_lists if draw(st.integers(0, 3)) else odd_metrics)
    if draw(st.booleans()):
        drawn["topk"] = draw(cutoff_lists if draw(st.integers(0, 3)) else odd_topk)
    if draw(st.booleans()) or ({"metrics", "topk"} & set(drawn) and draw(st.integers(0, 3))):
        # the protocol's own metrics and cut-off where the draw leaves them out (properties/protocol/general.yaml)
        names = drawn.get("metrics", ["Recall", "NDCG"])
        ks = drawn.get("topk", [20])
        if isinstance(names, list) and names and isinstance(ks, list) and ks and draw(st.integers(0, 2)):
            drawn["valid_metric"] = f"{draw(st.sampled_from(names))}@{draw(st.sampled_from(ks))}"
        else:
            drawn["valid_metric"] = draw(odd_valid_metric)
    for key, values in (("eval_args", eval_args), ("seed", seed)):
        if draw(st.booleans()):
            drawn[key] = draw(values)
    if draw(st.booleans()):
        drawn["load_col"] = {"inter": ["user_id", "item_id", "timestamp"]}
    return drawn


FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def timed_data(tmp_path_factory):
    """40 users, 12 interactions each, over 60 items, with a float timestamp."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("data") / "timed"
    folder.mkdir()
    lines = ["user_id:token\titem_id:token\ttimestamp:float"]
    for user in range(40):
        items = rng.choice(60, size=12, replace=False)
        lines += [f"u{user}\ti{item}\t{1000 * user + k}" for k, item in enumerate(items)]
    (folder / "timed.inter").write_text("\n".join(lines) + "\n")
    return folder.parent


def first_evaluation(config, train_data, eval_data):
    """The results of one evaluation of an untrained model, as the trainer computes them after an epoch."""
    from recbole_mgformer.integration.registry import get_model, get_trainer

    trainer = get_trainer(config["MODEL_TYPE"], "BPR")(config, get_model("BPR")(config, train_data._dataset))
    trainer.eval_collector.data_collect(train_data)  # as fit does first (item counts, for coverage and popularity)
    return trainer.evaluate(eval_data, load_best_model=False)


@FUZZ
@given(drawn_settings())
def test_settings_either_build_split_and_evaluate_or_are_named(timed_data, drawn):
    from recbole_mgformer.quick_start import build_config, prepare_data

    base = {"data_path": str(timed_data), "state": "ERROR", "show_progress": False, "epochs": 1}
    try:
        config, _ = build_config("BPR", "timed", config_dict={**base, **drawn})
        train_data, valid_data, test_data = prepare_data(config)
    except ValueError as error:
        assert _raised_here(error), f"{type(error).__name__} from a library: {error}"
        assert any(name in str(error) for name in SETTING_NAMES), str(error)
        event("refused")
        return
    event("accepted")
    valid, test = len(valid_data.dataset), len(test_data.dataset)
    assert valid or test
    if valid:
        assert config["valid_metric"].lower() in first_evaluation(config, train_data, valid_data)
    np.random.seed(config["seed"])  # the seed numpy takes, as RecBole's init_seed gives it
