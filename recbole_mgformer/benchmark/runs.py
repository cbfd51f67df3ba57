"""The life of one benchmark run: set up, train resumably, test, write its JSON record; a run whose record exists
is skipped, so a long benchmark survives a stopped or replaced machine."""

import json
import logging
import time
from pathlib import Path

from recbole.utils import init_seed

from recbole_mgformer.benchmark.claims import claim
from recbole_mgformer.benchmark.datasets import table_kind
from recbole_mgformer.benchmark.entries import slug, variant_name
from recbole_mgformer.benchmark.names import is_hybrid, recorded_choice
from recbole_mgformer.benchmark.run_record import (
    OneTestPass,
    cap_fields,
    move_record,
    per_user_fields,
    popularity_fields,
    record_config,
    record_head,
    record_path,
    record_tail,
    run_ranking_width,
    settings_changes,
    stored_values,
)
from recbole_mgformer.benchmark.scoring import score_variant, trained_entry, without_scoring
from recbole_mgformer.benchmark.tuning import search_info, settings_hash, tuned_file_for
from recbole_mgformer.evaluation import evaluate_with_top_items
from recbole_mgformer.integration.compat import init_logger
from recbole_mgformer.integration.registry import fits_once
from recbole_mgformer.quick_start import build_config, prepare
from recbole_mgformer.records import code_commit, write_record
from recbole_mgformer.training.resume import fit_resumably, forget_resume_state


def tuned_config_files(tuned, config_files):
    """The tuned file first, so the user's files and overrides win over it."""
    return ([tuned] if tuned else []) + list(config_files or [])


def setup_run(model, dataset, config_files, config_dict):
    """Config, model, trainer and (train, valid, test) data of one run, seeded, with RecBole's logger set up."""
    config, _ = build_config(model, dataset, config_files, config_dict)
    init_seed(config["seed"], config["reproducibility"])
    logging.getLogger().handlers.clear()  # RecBole's init_logger only configures a bare root logger
    init_logger(config)
    return config, *prepare(config)


class Run:
    """One (model entry, dataset, seed) of a benchmark, with the settings every run shares.

    Its checkpoint (the best epoch so far) lives at ``checkpoint_dir/<dataset>/<variant>-seed<seed>.pth`` and an
    interrupted run resumes from it; its record at ``runs_dir/<dataset>/<variant>-seed<seed>.json``, the per-user
    test NDCG@20 of a general run beside it (``.users.json.gz``). Its tuned settings
    (:func:`recbole_mgformer.benchmark.tuning.tuned_file_for`, in ``tuned_dir``) are looked up when it starts, so
    a search that ran just before applies; when they come from an equal-budget search recorded under
    ``runs_dir/../tuning/``, the record names it (``tuning``) and the checkpoint name carries the settings' hash.

    A scoring-only variant (:mod:`recbole_mgformer.benchmark.scoring`) is not trained: it is scored from the
    checkpoint of the entry it trains as (:attr:`trained`, whose record is in ``trained_runs_dir``, by default
    ``runs_dir``), that entry trained first when it has no record; ``retrain_missing`` retrains an entry whose
    record exists without its checkpoint, and ``score_trained=False`` trains the variant end to end instead.
    """

    def __init__(
        self,
        model,
        overrides,
        dataset,
        seed,
        *,
        runs_dir,
        data_path,
        config_files=(),
        extra=None,
        checkpoint_dir="saved/benchmark",
        command=None,
        tuned_dir=None,
        trained_runs_dir=None,
        retrain_missing=False,
        score_trained=True,
        scores_variants=False,
        choice=None,
    ):
        self.model, self.overrides, self.dataset, self.seed = model, dict(overrides), dataset, seed
        self.variant = variant_name(model, overrides)
        self.kind = table_kind(dataset)
        self.record_path = record_path(runs_dir, dataset, self.variant, seed)
        self.results = Path(runs_dir).parent
        self.checkpoint_dir, self.tuned_dir = Path(checkpoint_dir), tuned_dir
        self.data_path, self.config_files, self.extra, self.command = data_path, config_files, extra or {}, command
        self.trained_runs_dir = Path(trained_runs_dir or runs_dir)
        self.retrain_missing, self.score_trained = retrain_missing, score_trained
        self.scores_variants = scores_variants  # the trained entry of a scoring-only variant: see check_record
        # where a hybrid's filter weight was chosen: {"choice_made_on": ..., "choice_dataset": ...} (names.py)
        self.choice = dict(choice or {})

    @property
    def trained(self):
        """The run of the entry this scoring-only variant is scored from, or None for a run that trains: an entry
        without scoring options, one trained end to end (``score_trained=False``), or one with a tuned file of its
        own (searched as itself, so it trains with other settings than the entry)."""
        overrides = trained_entry(self.model, self.overrides) if self.score_trained else None
        if overrides is None:
            return None
        trained = Run(
            self.model,
            overrides,
            self.dataset,
            self.seed,
            runs_dir=self.trained_runs_dir,
            data_path=self.data_path,
            config_files=self.config_files,
            extra=without_scoring(self.model, self.extra),
            checkpoint_dir=self.checkpoint_dir,
            command=self.command,
            tuned_dir=self.tuned_dir,
            scores_variants=True,
        )
        return trained if trained.tuned_file == self.tuned_file else None

    @property
    def tuned_file(self):
        return tuned_file_for(self.model, self.overrides, self.dataset, self.tuned_dir)

    @property
    def tuning(self):
        return search_info(self.tuned_file, self.results)

    @property
    def checkpoint(self):
        name = f"{slug(self.variant)}-seed{self.seed}"
        if self.tuning:  # never resume a checkpoint trained with other settings
            name += f"-tuned-{settings_hash(self.tuned_file)}"
        return self.checkpoint_dir / self.dataset / f"{name}.pth"

    @property
    def claim_path(self):
        """Claimed while this run trains, whatever settings it trains with."""
        return self.checkpoint_dir / self.dataset / f"{slug(self.variant)}-seed{self.seed}.lock"

    @property
    def record_claim_path(self):
        """Claimed beside the record while this run trains: processes that share the results folder but not the
        checkpoint folder never train one run twice (the second would replace the first's record)."""
        return self.record_path.with_name(f".{self.record_path.stem}.lock")

    @property
    def label(self):
        return f"{self.variant} on {self.dataset}, seed {self.seed}"

    def check_config(self):
        """Build the run's config alone (returned): an unknown key or a bad value fails now, not hours into the
        benchmark, and so does a record of this run trained with other settings (:meth:`check_record`)."""
        config, _ = build_config(
            self.model,
            self.dataset,
            tuned_config_files(self.tuned_file, self.config_files),
            {"data_path": str(self.data_path), **self.extra, **self.overrides, "seed": self.seed},  # as setup's
        )
        self.check_record(record_config(config))
        trained = self.trained if not self.record_path.exists() else None
        # to be scored from a record of the entry trained with other settings: fails now too, unless that record
        # moves aside to train the entry again (retrain_missing, without its checkpoint)
        if trained is not None and not (self.retrain_missing and not trained.checkpoint.exists()):
            trained.check_config()
        return config

    def check_record(self, settings):
        """A ValueError when this run's record exists with other ``settings``: skipping the run would keep the old
        run in the table under the new command. A record a new equal-budget search replaces moves aside when the
        run starts instead; a record without ``config`` (written before records kept it) cannot be compared and
        counts as this run, as before. The trained entry of a scoring-only variant leaves its model's scoring
        options out of the comparison: its record may come from a command that passed them to every run (e.g.
        ``--filter_residual_k=64``), which did not change how it trained."""
        if not self.record_path.exists():
            return
        record = json.loads(self.record_path.read_text())
        tuning = self.tuning
        if "config" not in record or (tuning and record.get("tuning") != tuning):
            return
        recorded = record["config"]
        if self.scores_variants:
            recorded, settings = without_scoring(self.model, recorded), without_scoring(self.model, settings)
        changed = settings_changes(recorded, settings)
        if changed:
            shown = "; ".join(f"{key}: {old!r} there, {new!r} here" for key, (old, new) in list(changed.items())[:5])
            more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
            raise ValueError(
                f"{self.record_path} records {self.label} trained with other settings ({shown}{more}); the "
                "benchmark would skip this run and keep the old one in its table. To rerun with these settings, move "
                f"the record (and its .users.json.gz) to {self.results / 'exploration' / 'runs' / self.dataset}/ "
                "or delete it; to keep it, rerun with the settings it records"
            )

    def best_epoch_fields(self, trainer, train_data, test_data, top_items):
        """The record's fields read from the model at its best epoch's weights: the popularity groups and the
        per-user values, from the test pass's ranking (``top_items``). A subclass adds its own here
        (``experiments/attention_probes.py``: the attention's state)."""
        return {
            **popularity_fields(self, train_data, top_items),
            **per_user_fields(self, trainer, test_data, top_items),
        }

    def setup(self, checkpoint):
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        config_dict = {
            "seed": self.seed,
            "data_path": str(self.data_path),
            "checkpoint_dir": str(checkpoint.parent),
            "show_progress": False,
            **self.extra,
            **self.overrides,
        }
        return setup_run(self.model, self.dataset, tuned_config_files(self.tuned_file, self.config_files), config_dict)

    def execute(self, log=print, announce=lambda: None):
        """Train and test unless the record exists; returns the new record, or None when skipped. ``announce()`` is
        called once the run is this process's and has work to do (not before a skip). A record that
        this run replaces (:meth:`replaced_because`: trained before an equal-budget search's settings, or a hybrid
        whose weight was chosen elsewhere) moves to ``<results>/exploration/runs/<dataset>/`` first. Raises
        :class:`~recbole_mgformer.benchmark.claims.Busy` when another process is training this run, into the same
        checkpoint folder or the same results folder."""
        with claim(self.claim_path), claim(self.record_claim_path):
            return self._execute(log, announce)

    def replaced_because(self, recorded):
        """Why this run replaces the record ``recorded`` of its name, or None: it was trained before the
        equal-budget search whose settings now apply, or it is a hybrid whose weight this run says was chosen
        elsewhere (``--choice-made-on`` / ``--choice-dataset``: a weight carried from another split's validation
        set gives the same name as one picked on the test items, and skipping would keep the test-picked row)."""
        tuning = self.tuning
        if tuning and recorded.get("tuning") != tuning:
            return f"trained before {tuning['search']}"
        if self.choice and is_hybrid({"overrides": self.overrides}):
            choice = recorded_choice(recorded)
            if choice != self.choice:
                return f"its weight was chosen as {choice or 'unstated'}, this run's as {self.choice}"
        return None

    def _execute(self, log, announce):
        if self.record_path.exists():
            because = self.replaced_because(json.loads(self.record_path.read_text()))
            if because:
                log(f"moved {self.retire(log)}: {because}")
        if self.record_path.exists():
            self.complete_record()
            return None
        trained = self.trained
        if trained is not None:
            return score_variant(self, trained, log, announce)
        announce()
        tuning = self.tuning
        commit = code_commit()  # the code this process imported, however long the run takes
        checkpoint = self.checkpoint
        config, model, trainer, (train_data, valid_data, test_data) = self.setup(checkpoint)
        started = time.perf_counter()
        test = OneTestPass(self, trainer, config, valid_data, test_data)
        with test.validations():
            best_valid_result, timer = fit_resumably(
                trainer, train_data, valid_data, checkpoint, self.label, config["show_progress"]
            )
        fit_seconds = time.perf_counter() - started
        construct_seconds = (getattr(model, "build_seconds", None) or 0.0) if fits_once(self.model) else 0.0
        test_result, top_items, test_seconds, reused = test.measure(
            best_valid_result, load_best_model=True, show_progress=config["show_progress"]
        )
        if reused:
            log(f"{self.label}: the test set is the validation set; its best validation pass is the test")
        record = {
            **record_head(
                self, config, tuning, best_valid_result, test_result, trainer, train_data, test_data, top_items
            ),
            **timer.summary(config["valid_metric_bigger"]),
            **cap_fields(config, timer),
            "test_seconds": round(test_seconds, 3),
            **({"test_from_valid_pass": True} if reused else {}),
            # this process's wall time, a resumed run's since its resume; the pages' "fit s" is benchmark.cost's
            "fit_seconds": round(fit_seconds + construct_seconds, 1),
            # training and evaluation of every process the run took, the data preparation left out
            "seconds": round(construct_seconds + sum(timer.train_seconds) + sum(timer.valid_seconds) + test_seconds, 1),
            "parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            **({"stored_values": stored_values(model)} if fits_once(self.model) else {}),
            # the model's construction (benchmark.cost); a traditional model (EASE, GF-CF, ...) fits there
            "build_seconds": getattr(model, "build_seconds", None),
            **record_tail(self, config, model, commit),
        }
        write_record(self.record_path, record, overwrite=False)  # a record written meanwhile stays (no flock here)
        forget_resume_state(checkpoint)
        return record

    def retire(self, log=print):
        """Move the record (and its per-user values) to ``<results>/exploration/runs/<dataset>/``; returns where.
        A record of the same name already there is an earlier run of this entry and seed, which the retiring one
        replaced: it moves on to ``superseded/<its commit>/`` there, outside every table, so no row counts a seed
        twice and no record is lost."""
        folder = self.results / "exploration" / "runs" / self.dataset
        earlier = folder / self.record_path.name
        if earlier.exists():
            commit = json.loads(earlier.read_text()).get("commit", "unknown")
            log(f"moved {move_record(earlier, folder / 'superseded' / commit)}: an earlier run of the same seed")
        return move_record(self.record_path, folder)

    def complete_record(self):
        """A general run recorded before the popularity groups or the per-user values existed gets them from its
        checkpoint."""
        record = json.loads(self.record_path.read_text())
        checkpoint = self.checkpoint
        missing = {"test_popularity", "per_user"} - set(record)
        if self.kind != "general" or not missing or not checkpoint.exists():
            return
        config, _, trainer, (train_data, _, test_data) = self.setup(checkpoint)
        _, top_items = evaluate_with_top_items(
            trainer, test_data, run_ranking_width(self, config), load_best_model=True, model_file=str(checkpoint)
        )
        if "test_popularity" in missing:
            record.update(popularity_fields(self, train_data, top_items))
        if "per_user" in missing:
            record.update(per_user_fields(self, trainer, test_data, top_items))
        write_record(self.record_path, record, overwrite=True)  # this run's record, completed
        print(f"added {' and '.join(sorted(missing))} to {self.record_path}", flush=True)
