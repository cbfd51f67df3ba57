from recbole_mgformer.benchmark.context import render_page


def record(variant, dataset, auc, seed=2020, settings=None):
    return {
        "variant": variant,
        "model": variant.split()[0],
        "dataset": dataset,
        "seed": seed,
        "overrides": {},
        "settings": settings or {},
        "test": {"auc": auc, "logloss": 0.6},
        "seconds": 60,
        "command": "python -m recbole_mgformer.benchmark",
        "commit": "abc",
        "machine": "m",
        "versions": {"torch": "t", "recbole": "r"},
    }


def test_a_column_per_rho_a_row_per_variant_and_the_best_mean_in_bold():
    page = render_page(
        {
            "ml-100k-ctx-0.8": [
                record("CSA", "ml-100k-ctx-0.8", 0.77),
                record("CSA first_order=True", "ml-100k-ctx-0.8", 0.78),
                record("AutoInt", "ml-100k-ctx-0.8", 0.775),
                record("AutoInt", "ml-100k-ctx-0.8", 0.777, seed=2021),
            ],
            "ml-100k-ctx-0.2": [record("CSA", "ml-100k-ctx-0.2", 0.73, settings={"epochs": 1})],
        },
        "results/runs",
    )
    assert "| model | rho = 0.2 | rho = 0.8 |" in page  # columns from each dataset's split, in order
    assert "| CSA | **0.7300** | 0.7700 |" in page
    assert "| CSA first_order=True | – | **0.7800** |" in page
    assert "| AutoInt | – | 0.7760 ± 0.0014 |" in page
    assert "Overrides: {'epochs': 1}" in page  # a setting the variant's name does not show
