"""The ids the importer lets through are the ids RecBole's reader (pandas, its defaults) reads back."""

import pandas
import pytest

from recbole_mgformer.data.tokens import FALLBACK_NA_VALUES, NA_VALUES, token_problem


def read_back(tmp_path, tokens):
    """``tokens`` as the item column of an atomic file, read as RecBole reads it (missing values as None)."""
    path = tmp_path / "x.inter"
    path.write_text("user_id:token\titem_id:token\n" + "".join(f"u\t{t}\n" for t in tokens), encoding="utf-8")
    frame = pandas.read_csv(path, delimiter="\t", dtype=str, engine="python")
    return [None if pandas.isna(v) else v for v in frame["item_id:token"].tolist()]


def test_every_na_string_is_one_pandas_reads_as_missing_and_is_refused(tmp_path):
    assert FALLBACK_NA_VALUES <= NA_VALUES
    tokens = sorted(NA_VALUES - {""})
    assert read_back(tmp_path, tokens) == [None] * len(tokens)
    assert all(token_problem(token) for token in NA_VALUES)


@pytest.mark.parametrize("token", ["[PAD]", '"x', '"', "a\tb", "a\rb", "\ufeffa", "a\0", " a", "a "])
def test_ids_that_would_become_another_id_or_split_the_line_are_refused(token):
    assert token_problem(token)


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="aN/#A.-1nulo <>\"'é|,;\t\r\n\0\ufeff", max_size=6), min_size=1, max_size=12))
def test_an_id_let_through_is_read_back_exactly(tmp_path_factory, tokens):
    accepted = [token for token in tokens if token_problem(token) is None]
    if accepted:
        assert read_back(tmp_path_factory.mktemp("tokens"), accepted) == accepted
