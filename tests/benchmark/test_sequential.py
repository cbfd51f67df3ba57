from recbole_mgformer.benchmark.sequential import render_page


def record(variant, model, dataset, ndcg, seed=2020):
    metrics = {m: ndcg for m in ("recall@5", "recall@10", "mrr@5", "mrr@10", "ndcg@5", "ndcg@10")}
    return {
        "variant": variant,
        "model": model,
        "dataset": dataset,
        "seed": seed,
        "valid": metrics,
        "test": metrics,
        "seconds": 120,
        "command": "python -m recbole_mgformer.benchmark",
        "commit": "abc",
        "machine": "m",
        "versions": {"torch": "t", "recbole": "r"},
    }


def test_the_papers_model_leads_each_section_and_seeds_are_averaged():
    page = render_page(
        {
            "ml-100k-seq": [
                record("SASRec", "SASRec", "ml-100k-seq", 0.06),
                record("EAGPS", "EAGPS", "ml-100k-seq", 0.05),
                record("EAGPS", "EAGPS", "ml-100k-seq", 0.07, seed=2021),
            ]
        },
        "results/runs",
    )
    assert page.index("| EAGPS | 2 | 0.0600 ± 0.0141 |") < page.index("| SASRec | 1 | 0.0600 |")
    assert "Protocol: `properties/dataset/ml-100k-seq.yaml`." in page and "| 2.0 |" in page
    assert "Commands: `python -m recbole_mgformer.benchmark`." in page
    assert "Runs: commit abc, m, torch t, recbole r; seeds [2020, 2021]." in page
