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


def test_each_eagps_ablation_is_judged_against_the_tuned_eagps_alone(tmp_path):
    from recbole_mgformer.benchmark.entries import ablation_variants
    from recbole_mgformer.benchmark.sequential import verdict_lines
    from recbole_mgformer.benchmark.stats import write_per_user

    shifts = {"EAGPS": 0.0, "EAGPS decoder=max_pool": -0.1, "EAGPS mask_ratio=0.0": 0.0, "SASRec": 0.1}
    groups = {}
    for variant, shift in shifts.items():
        for seed in (0, 1):
            path = tmp_path / f"{variant}-{seed}.json"
            write_per_user(path, {f"u{u}": (u % 7) / 7 + shift + 0.001 * u * seed for u in range(60)}, "ndcg@10")
            rec = record(variant, variant.split()[0], "ml-100k-seq", 0.05 + shift, seed=seed)
            groups.setdefault(variant, []).append({**rec, "_path": str(path), "per_user": {"metric": "ndcg@10"}})
    lines = verdict_lines(groups)
    ablations = [line for line in lines if line.startswith("Ablation: ")]
    assert [line.split(" is ")[0] for line in ablations] == [
        "Ablation: EAGPS decoder=max_pool",
        "Ablation: EAGPS mask_ratio=0.0",
    ]
    assert "**behind** EAGPS" in ablations[0] and "**level** with EAGPS" in ablations[1]
    # only the tuned EAGPS competes with the other models: an ablation is judged against EAGPS alone
    assert [line.split(" is ")[0] for line in lines if line.startswith(("Verdict: ", "Against each model: "))] == [
        "Verdict: EAGPS"
    ]
    assert "EAGPS decoder=max_pool" in ablation_variants("EAGPS")
    # a row shown by a short name (results/names.yaml) is matched by its record's own name
    groups["EAGPS no mask"] = [{**r, "variant": "EAGPS no mask"} for r in groups.pop("EAGPS mask_ratio=0.0")]
    for r in groups["EAGPS no mask"]:
        r["full_variant"] = "EAGPS mask_ratio=0.0"
    assert "Ablation: EAGPS no mask is **level** with EAGPS" in "\n".join(verdict_lines(groups))
    # without the tuned EAGPS in the section, no ablation has a row to depart from
    assert not [line for line in verdict_lines({k: v for k, v in groups.items() if k != "EAGPS"}) if "Ablation" in line]


def test_a_whole_sequence_or_bf16_row_is_judged_against_the_row_it_departs_from_and_competes_with_no_model(tmp_path):
    from recbole_mgformer.benchmark.sequential import verdict_lines
    from recbole_mgformer.benchmark.stats import write_per_user

    rows = {  # variant: (model, overrides, shift)
        "EAGPS": ("EAGPS", {}, 0.0),
        "EAGPS train_protocol=sequence": ("EAGPS", {"train_protocol": "sequence"}, -0.1),
        "EAGPS precision=bf16": ("EAGPS", {"precision": "bf16"}, 0.3),  # the best mean, and still no model's rival
        "SASRec": ("SASRec", {}, -0.05),
        "SASRec train_protocol=sequence": ("SASRec", {"train_protocol": "sequence"}, 0.2),
        "GRU4Rec train_protocol=sequence": ("GRU4Rec", {"train_protocol": "sequence"}, 0.0),  # no prefix row
        "GRU4Rec precision=bf16": ("GRU4Rec", {"precision": "bf16"}, 0.0),  # no fp32 row
    }
    groups = {}
    for variant, (model, overrides, shift) in rows.items():
        for seed in (0, 1):
            path = tmp_path / f"{variant}-{seed}.json"
            write_per_user(path, {f"u{u}": (u % 7) / 7 + shift + 0.001 * u * seed for u in range(60)}, "ndcg@10")
            rec = {**record(variant, model, "ml-100k-seq", 0.05 + shift, seed=seed), "overrides": overrides}
            groups.setdefault(variant, []).append({**rec, "_path": str(path), "per_user": {"metric": "ndcg@10"}})
    lines = verdict_lines(groups)
    protocol = [line for line in lines if line.startswith("Protocol: ")]
    assert [line.split(" by ")[0] for line in protocol] == [
        "Protocol: EAGPS train_protocol=sequence is **behind** EAGPS",
        "Protocol: SASRec train_protocol=sequence is **ahead** of SASRec",
    ]
    precision = [line for line in lines if line.startswith("Precision: ")]
    assert [line.split(" by ")[0] for line in precision] == ["Precision: EAGPS precision=bf16 is **ahead** of EAGPS"]
    verdicts = [line for line in lines if line.startswith(("Verdict: ", "Against each model: "))]
    assert verdicts and all("train_protocol" not in line and "bf16" not in line for line in verdicts)  # EAGPS, SASRec
    assert verdicts[0].startswith("Verdict: EAGPS is **ahead** of SASRec")


def test_each_search_is_listed_once_under_its_model_however_many_rows_were_trained_from_it():
    from recbole_mgformer.benchmark.sequential import searches_line

    def tuned(variant, model, page):
        return {**record(variant, model, "ml-100k-seq", 0.05), "tuning": {"search": page}}

    line = searches_line(
        [
            tuned("EAGPS", "EAGPS", "results/tuning/s/EAGPS.md"),
            tuned("EAGPS decoder=max_pool", "EAGPS", "results/tuning/s/EAGPS.md"),
            tuned("EAGPS precision=bf16", "EAGPS", "results/tuning/s/EAGPS.md"),
            tuned("SASRec", "SASRec", "results/tuning/s/SASRec.md"),
            record("GRU4Rec", "GRU4Rec", "ml-100k-seq", 0.05),  # not searched: no page to name
        ]
    )
    assert line == "Searches: EAGPS `results/tuning/s/EAGPS.md`; SASRec `results/tuning/s/SASRec.md`."
