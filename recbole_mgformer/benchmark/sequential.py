"""The sequential table: leave-one-out, full ranking, Recall, MRR and NDCG at 5 and 10 over seeds, one section per
dataset (EAGPS against RecBole's SASRec and GRU4Rec)."""

import statistics

from recbole_mgformer.records import by_variant, mean_std, provenance

HEADLINE = ("recall@10", "ndcg@10")
METRICS = ("recall@5", "recall@10", "mrr@5", "mrr@10", "ndcg@5", "ndcg@10")
ORDER = ("EAGPS", "SASRec", "GRU4Rec")  # the paper's model first, then its baselines
SHOWN = {"recall": "Recall", "mrr": "MRR", "ndcg": "NDCG"}


def render_dataset(dataset, records):
    header = ["variant", "seeds", "valid NDCG@10"] + [f"test {SHOWN[m.split('@')[0]]}@{m.split('@')[1]}"
                                                       for m in METRICS] + ["minutes"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    groups = by_variant(records)
    rank = {model: i for i, model in enumerate(ORDER)}
    for name in sorted(groups, key=lambda n: (rank.get(groups[n][0]["model"], len(rank)), n)):
        group = groups[name]
        cells = [mean_std([r["valid"]["ndcg@10"] for r in group])]
        cells += [mean_std([r["test"][metric] for r in group]) for metric in METRICS]
        minutes = statistics.mean(r["seconds"] for r in group) / 60
        rows.append(f"| {name} | {len(group)} | " + " | ".join(cells) + f" | {minutes:.1f} |")
    return [f"## {dataset}", "", f"Protocol: `properties/dataset/{dataset}.yaml`.", "", *rows, ""]


def render_page(by_dataset, runs_shown):
    records = [r for dataset in sorted(by_dataset) for r in by_dataset[dataset]]
    lines = ["# Sequential recommendation: EAGPS, SASRec, GRU4Rec", "",
             "Leave-one-out on each user's time-ordered history (last item: test, the one before: validation), "
             "every item ranked, the epoch with the best valid NDCG@10 tested. Each model runs with its defaults "
             "(`properties/model/EAGPS.yaml`; RecBole 1.2.1's own for SASRec and GRU4Rec); a variant's name lists "
             "the overrides it ran with (the commands below give every run's settings). Values are means ± standard "
             "deviation over seeds.", "",
             f"Records: `{runs_shown}/<dataset>/`.", ""]
    for dataset in sorted(by_dataset):
        lines += render_dataset(dataset, by_dataset[dataset])
    commands = sorted({r["command"] for r in records if r.get("command")})
    lines += ["Commands: " + "; ".join(f"`{c}`" for c in commands) + ".", "",
              f"Runs: {provenance(records)}; seeds {sorted({r['seed'] for r in records})}.", ""]
    return "\n".join(lines)
