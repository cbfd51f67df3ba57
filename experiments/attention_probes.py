"""Short probes of MGFormer's attention designs beyond the paper: every variant with the same short schedule, its
per-popularity-group test recall beside the control ``attention=False``.

    python experiments/attention_probes.py --dataset ml-100k --seeds 0,1
    python experiments/attention_probes.py --dataset amazon-beauty --seeds 0,1,2 \
        --models "MGFormer[attention=False],MGFormer[token_propagation=2]"
    python experiments/attention_probes.py --dataset amazon-beauty --render-only

Entries use the benchmark's syntax (``MGFormer[token_propagation=2; attention=False]``, any model of the runner).
Every run shares ``--epochs``, ``--stopping_step``, ``--learning_rate`` and ``--train_batch_size`` (over each
model's defaults and the leaderboard's tuned file for the dataset, e.g. MGFormer's uniformity weight on Beauty);
other ``--key=value`` settings apply to every run too (``--embedding_size=64 --device=cuda``). Each run writes
``<results>/exploration/runs/<dataset>/probe-<variant>-seed<seed>.json`` (the benchmark's record, with the test
metrics by item popularity and the learned attention parameters at the best epoch), and a rerun skips it, so the
probes resume; a record made with another schedule is an error. The table goes to
``<results>/notes/attention-probes-<dataset>.md``.
"""

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBES = (
    "MGFormer[attention=False]",
    "MGFormer",
    "MGFormer[degree_mask=none]",
    "MGFormer[token_propagation=2; attention=False]",
    "MGFormer[token_propagation=2]",
    "MGFormer[attention_temperature=0.25]",
    "MGFormer[learn_temperature=True]",
    "MGFormer[value_projection=True]",
    "MGFormer[degree_gate=True]",
    "MGFormer[n_layers=2; residual_scale=learned]",
)
# A variant's control: the same tokens (these settings of the variant) with attention: False.
TOKEN_KEYS = ("token_propagation", "structural_encoding", "structural_scale", "embedding_size")
SCHEDULE_KEYS = ("epochs", "stopping_step", "learning_rate", "train_batch_size")


def attention_diagnostics(model):
    """What an MGFormer learned of its attention: z's spread (does the sin mask collapse?), and each layer's
    largest |W_Q| and |W_K| entries, temperature, residual scale, degree gate and distance of W_V from the identity;
    {} for other models."""
    import torch

    from recbole_mgformer.model.mgformer.attention_options import AttentionBlock, query_temperature

    if not hasattr(model, "degree_centrality") or not model.use_attention:
        return {}
    found = {}
    with torch.no_grad():
        if model.degree_mask == "sin":
            z = model.degree_centrality()
            found["z"] = {"min": z.min().item(), "median": z.median().item(), "max": z.max().item()}
        for index, layer in enumerate(model.layers):
            block = layer if isinstance(layer, AttentionBlock) else None
            attention = block.attention if block is not None else layer
            learned = {
                "query_max_abs": attention.query.weight.abs().max().item(),  # both near 0: a plain mean
                "key_max_abs": attention.key.weight.abs().max().item(),
            }
            if query_temperature(attention) is not None:
                learned["temperature"] = query_temperature(attention).item()
            if block is not None:
                learned["residual_scale"] = block.residual_scale.item()
                if block.log_degree is not None:
                    learned.update(gate_slope=block.gate_slope.item(), gate_bias=block.gate_bias.item())
                if block.value_weight is not None:
                    identity = torch.eye(block.value_weight.shape[-1], device=block.value_weight.device)
                    learned["value_weight_from_identity"] = (block.value_weight - identity).norm().item()
            found[f"layer{index}"] = learned
    return found


def probe_run_class():
    from recbole_mgformer.benchmark.runs import Run, record_path

    class ProbeRun(Run):
        """A benchmark run whose record is named ``probe-...`` (apart from other exploration records) and carries
        the probe's schedule and the attention's learned parameters."""

        def __init__(self, *args, schedule, **kwargs):
            super().__init__(*args, **kwargs)
            self.schedule = schedule
            self.record_path = record_path(kwargs["runs_dir"], self.dataset, "probe " + self.variant, self.seed)

        def best_epoch_fields(self, trainer, train_data, test_data, top_items):
            return {
                **super().best_epoch_fields(trainer, train_data, test_data, top_items),
                "probe_schedule": self.schedule,
                "attention_diagnostics": attention_diagnostics(trainer.model),
            }

        def check_schedule(self):
            import json

            if self.record_path.exists():
                recorded = json.loads(self.record_path.read_text()).get("probe_schedule")
                if recorded != self.schedule:
                    raise ValueError(
                        f"{self.record_path} was made with the schedule {recorded}, not {self.schedule}: "
                        "pass that schedule, or --results elsewhere to keep both"
                    )

    return ProbeRun


def _mean(values, spec=".4f"):
    values = [v for v in values if v is not None]
    if not values:
        return ""
    text = format(statistics.mean(values), spec)
    return text + (f" ± {format(statistics.stdev(values), spec.lstrip('+'))}" if len(values) > 1 else "")


def control_of(group, groups):
    """The variant whose records are ``group``'s tokens without attention, or None (a control has none)."""
    overrides = group[0]["overrides"]
    if group[0]["model"] != "MGFormer" or overrides.get("attention") is False:
        return None
    wanted = {"attention": False, **{k: v for k, v in overrides.items() if k in TOKEN_KEYS}}
    return next(
        (name for name, other in groups.items() if other[0]["model"] == "MGFormer" and other[0]["overrides"] == wanted),
        None,
    )


def paired_delta(group, control):
    """Test NDCG@20 of a variant minus the control's, over the seeds both have: 'mean ± std (n)', or ''."""
    control_by_seed = {r["seed"]: r["test"]["ndcg@20"] for r in control}
    deltas = [r["test"]["ndcg@20"] - control_by_seed[r["seed"]] for r in group if r["seed"] in control_by_seed]
    return f"{_mean(deltas, '+.4f')} ({len(deltas)})" if deltas else ""


def render_table(dataset, records):
    """The probes' markdown: a row per variant, test metrics, per-group test Recall@20, cost per epoch."""
    from recbole_mgformer.item_groups import GROUP_RULE, GROUPS
    from recbole_mgformer.records import by_variant, provenance

    records = [r for r in records if "probe_schedule" in r]
    groups = by_variant(records)
    header = (
        [
            "variant",
            "seeds",
            "valid NDCG@20",
            "test NDCG@20",
            "test Recall@20",
            "Δ test NDCG@20 vs its control (paired seeds)",
            "control",
        ]
        + [f"{g} Recall@20" for g in GROUPS]
        + ["z median", "best epoch", "epochs", "s / epoch"]
    )
    lines = [
        f"# Attention probes on {dataset}",
        "",
        "Produced by `python experiments/attention_probes.py`: each variant with the same short "
        "schedule; test metrics at the epoch with the best validation NDCG@20, mean ± std over seeds.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    ordered = sorted(groups.items(), key=lambda item: -statistics.mean(r["valid"]["ndcg@20"] for r in item[1]))
    for variant, group in ordered:
        by_group = [
            _mean([r["test_popularity"][g]["recall@20"] for r in group if "test_popularity" in r]) for g in GROUPS
        ]
        z = [r["attention_diagnostics"]["z"]["median"] for r in group if "z" in r.get("attention_diagnostics", {})]
        control = control_of(group, groups)
        cells = [
            variant,
            str(len(group)),
            _mean([r["valid"]["ndcg@20"] for r in group]),
            _mean([r["test"]["ndcg@20"] for r in group]),
            _mean([r["test"]["recall@20"] for r in group]),
            paired_delta(group, groups[control]) if control else "",
            control or "",
            *by_group,
            _mean(z, ".3f"),
            _mean([r["best_epoch"] for r in group], ".0f"),
            _mean([r["epochs"] for r in group], ".0f"),
            _mean([r["train_seconds_per_epoch"] for r in group], ".1f"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    schedules = sorted({str(r["probe_schedule"]) for r in records})
    lines += [
        "",
        f"Schedule: {'; '.join(schedules)}. Control: the same tokens ({', '.join(TOKEN_KEYS)} of the "
        f"variant) with attention: False. Groups: {GROUP_RULE}.",
        "Learned attention parameters (temperature, gate, residual scale, W_V): `attention_diagnostics` of "
        "each record.",
        "",
        f"Runs: {provenance(records)}.",
        "",
    ]
    return "\n".join(lines)


def write_table(results, dataset, runs_dir):
    from recbole_mgformer.records import read_records

    path = Path(results) / "notes" / f"attention-probes-{dataset}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_table(dataset, read_records(runs_dir / dataset)))
    return path


def main(argv=None):
    from recbole_mgformer.benchmark import parse_entry, split_models
    from recbole_mgformer.benchmark.claims import Busy
    from recbole_mgformer.benchmark.entries import comma_list
    from recbole_mgformer.config.command_line import parse_overrides

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ml-100k")
    parser.add_argument("--models", default=",".join(PROBES))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--stopping_step", type=int, default=5)
    parser.add_argument("--learning_rate", type=float, default=0.005)
    parser.add_argument("--train_batch_size", type=int, default=1024)
    parser.add_argument("--data_path", default=str(ROOT / "dataset"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    parser.add_argument("--checkpoint_dir", default="saved/attention-probes", help="per-run checkpoints, for resuming")
    parser.add_argument("--render-only", action="store_true")
    args, rest = parser.parse_known_args(argv)
    runs_dir = Path(args.results) / "exploration" / "runs"
    if not args.render_only:
        schedule = {key: getattr(args, key) for key in SCHEDULE_KEYS}
        extra = {**parse_overrides(rest), **schedule}
        ProbeRun = probe_run_class()
        try:
            runs = [
                ProbeRun(
                    model,
                    overrides,
                    args.dataset,
                    int(seed),
                    runs_dir=runs_dir,
                    data_path=args.data_path,
                    extra=extra,
                    checkpoint_dir=args.checkpoint_dir,
                    schedule=schedule,
                    command=" ".join(["python", "experiments/attention_probes.py", *(argv or sys.argv[1:])]),
                )
                for seed in comma_list(args.seeds)
                for model, overrides in map(parse_entry, split_models(args.models))
            ]
            for run in runs:
                run.check_schedule()  # the schedule first: the plainer reason a record differs
                run.check_config()
        except ValueError as error:
            parser.error(str(error))
        for index, run in enumerate(runs, start=1):
            try:
                record = run.execute()
            except Busy as busy:  # another process sharing these folders trains it
                print(f"[{index}/{len(runs)}] {run.label}: skipped, {busy}", flush=True)
                continue
            outcome = (
                "record exists, skipped"
                if record is None
                else (
                    f"test NDCG@20 {record['test']['ndcg@20']:.4f}, best epoch {record['best_epoch']} of "
                    f"{record['epochs']}, {record['train_seconds_per_epoch']:.1f} s/epoch"
                )
            )
            print(f"[{index}/{len(runs)}] {run.label}: {outcome}", flush=True)
    print(f"wrote {write_table(args.results, args.dataset, runs_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
