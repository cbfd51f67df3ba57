"""The benchmark's command-line entries: model entries (``NAME``, ``NAME[key=value; ...]``, ``MGFormer-ablations``)
and the names runs and records take from them."""

import hashlib
import re

# ``NAME-ablations`` on the command line: the model and its paper's ablations, each one override (or two) away
ABLATION_SETS = {
    "MGFormer": [  # Table 3, and the attention-free tokens
        "MGFormer",
        "MGFormer[structural_encoding=none]",
        "MGFormer[degree_mask=none]",
        "MGFormer[degree_mask=adjacency]",
        "MGFormer[feature_map=elu]",
        "MGFormer[feature_map=focused]",
        "MGFormer[attention=False]",
    ],
    "EAGPS": [  # Table 5's variants that are options of the model
        "EAGPS",
        "EAGPS[external_attention=False]",  # GPS_OEA
        "EAGPS[decoder=max_pool]",  # GPS_OPT
        "EAGPS[mask_ratio=0.0]",  # GPS_OMA's nearest: the decoder's mask off
        "EAGPS[external_attention=False; decoder=max_pool]",  # GPS_Basic
    ],
}
ABLATIONS = ABLATION_SETS["MGFormer"]
# ablation entries searched as themselves: the attention-free tokens are a model of their own on the boards
SEARCHED_AS_THEMSELVES = frozenset({"MGFormer[attention=False]"})


def split_models(text):
    """Split on commas outside brackets, and expand ``NAME-ablations`` (:data:`ABLATION_SETS`)."""
    entries, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(current.strip())
            current = ""
        else:
            current += char
    entries.append(current.strip())
    expanded = []
    for entry in filter(None, entries):
        expanded += _ablation_set(entry) or [entry]
    return list(dict.fromkeys(expanded))


def ablation_variants(model):
    """The variant names (:func:`variant_name`) of ``model``'s ablation entries, read without :func:`parse_entry`
    (which imports torch) so that rendering a page does not: each entry's values are written as they print."""
    return [" ".join(re.sub(r"[\[\];]", " ", entry).split()) for entry in ABLATION_SETS.get(model, ())]


def _ablation_set(entry):
    """The entries ``NAME-ablations`` stands for, or None for any other entry."""
    by_name = {f"{model.lower()}-ablations": entries for model, entries in ABLATION_SETS.items()}
    return by_name.get(entry.lower())


def parse_entry(entry):
    """``'MGFormer[degree_mask=none; n_heads=2]'`` -> ``('MGFormer', {'degree_mask': 'none', 'n_heads': 2})``."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*(?:\[(.*)\])?\s*", entry)
    if not match:
        raise ValueError(f"model entry {entry!r} must be NAME or NAME[key=value; key=value]")
    name, inside = match.groups()
    overrides = {}
    if inside:
        if not _balanced(inside):  # 'BPR[epochs=1]]' would set epochs to '1]'
            raise ValueError(
                f"model entry {entry!r}: its brackets do not pair up; write NAME[key=value; key=value], with a "
                "list value in brackets of its own (e.g. BPR[topk=[10, 20]])"
            )
        pairs = [p.strip() for p in inside.split(";") if p.strip()]
        bad = [p for p in pairs if "=" not in p or not p.split("=", 1)[0].strip()]
        if bad:
            raise ValueError(f"model entry {entry!r}: {bad[0]!r} is not key=value")
        comma_joined = [p for p in pairs if re.search(r",\s*[A-Za-z_]\w*\s*=", p)]
        if comma_joined:  # a comma would silently become part of the first value
            raise ValueError(
                f"model entry {entry!r}: {comma_joined[0]!r} holds several overrides; separate them with ';', "
                f"as in {name}[key=value; key=value]"
            )
        from recbole_mgformer.config.command_line import parse_overrides  # only for entries with overrides

        keys = [p.split("=", 1)[0].strip() for p in pairs]  # MGFormer[ n_heads = 2 ] is n_heads=2
        twice = next((key for i, key in enumerate(keys) if key in keys[:i]), None)
        if twice:
            raise ValueError(f"model entry {entry!r}: it sets {twice} twice; keep one {twice}=...")
        try:
            overrides = parse_overrides([f"--{key}={p.split('=', 1)[1].strip()}" for key, p in zip(keys, pairs)])
        except SystemExit as refused:  # the command line's words for a value it cannot read, said of the entry
            raise ValueError(f"model entry {entry!r}: {str(refused).removeprefix('error: ')}") from None
        if "seed" in overrides:
            raise ValueError(seed_conflict(f"model entry {entry!r} sets seed={overrides['seed']}"))
        # RecBole would train NAME on --datasets' data, and the table would show the entry's name for that run
        if "model" in overrides:
            raise ValueError(
                f"model entry {entry!r} sets model, which an entry cannot change: write that model's entry "
                f"instead (e.g. {overrides['model']}[...])"
            )
        if "dataset" in overrides:
            raise ValueError(f"model entry {entry!r} sets dataset, which an entry cannot change: list it in --datasets")
    return name, overrides


def _balanced(text):
    """Whether every ``]`` of ``text`` closes a ``[`` before it and every ``[`` is closed."""
    depth = 0
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


SEED_BOUND = 2**32  # numpy's seeding takes 0 <= seed < 2**32


def seed_conflict(where):
    """Why a seed set elsewhere than ``--seeds`` is refused: every run of the entry would train at that one seed
    and the table would show them as seeds apart (``± 0.0000``)."""
    return (
        f"{where}, but each run's seed comes from --seeds: the runs of --seeds would all train at that one seed and "
        "count as different seeds; remove it and pass the seeds with --seeds (e.g. --seeds 5 or --seeds 0,1,2)"
    )


def parse_seeds(text):
    """``'0,1,2'`` -> ``[0, 1, 2]``: whole numbers numpy can seed with, each once, at least one."""
    seeds = []
    for part in comma_list(text):
        try:
            seed = int(part)
        except ValueError:
            seed = None
        if seed is None or not 0 <= seed < SEED_BOUND:
            raise ValueError(f"--seeds {text}: {part!r} is not a seed; give whole numbers from 0 to {SEED_BOUND - 1}")
        if seed in seeds:
            raise ValueError(f"--seeds {text}: seed {seed} is given twice; give each seed once")
        seeds.append(seed)
    if not seeds:
        raise ValueError(f"--seeds {text!r} names no seed; give one or more, e.g. --seeds 0,1,2")
    return seeds


# the options Table 3 ablates one at a time (attention=False has its own comparison, the "Attention:" line): the
# keys of the entries' overrides, read without parse_entry, which imports the runner (and torch) to parse values
ABLATION_OPTIONS = frozenset(re.findall(r"[\[;]\s*(\w+)\s*=", " ".join(ABLATIONS))) - {"attention"}


def variant_name(model, overrides):
    if not overrides:
        return model
    return model + " " + " ".join(f"{k}={v}" for k, v in overrides.items())


def tuned_stem(model, overrides):
    """The file stem of an entry's tuned settings, ``properties/benchmark/<dataset>/<stem>.yaml``: the model's name
    (``MGFormer``), or for an entry with overrides its variant's slug (``mgformer-attention-false``)."""
    return slug(variant_name(model, overrides)) if overrides else model


def stem_model(stem):
    """The inverse of :func:`tuned_stem` up to case: the model a tuned file is for (``MGFormer`` from
    ``MGFormer.yaml`` and from ``mgformer-attention-false.yaml``); ``registry.get_model`` resolves either spelling."""
    return stem.split("-")[0]


def tuning_target(model, overrides):
    """The (model, overrides) whose search gives an entry its settings: a paper's ablations (the entries of
    ``NAME-ablations`` but ``SEARCHED_AS_THEMSELVES``) are ablations of the tuned model, so they take its settings
    with their overrides; every other entry is searched as itself, its overrides fixed."""
    entry = model + ("[" + "; ".join(f"{k}={v}" for k, v in overrides.items()) + "]" if overrides else "")
    if overrides and entry in ABLATION_SETS.get(model, ()) and entry not in SEARCHED_AS_THEMSELVES:
        return model, {}
    return model, dict(overrides)


# a file name may hold 255 bytes; a run's files add up to 42 to its slug (".<slug>-seed<n>-tuned-<hash>.latest.json")
MAX_SLUG = 180


def slug(text):
    """``'MGFormer attention=False'`` -> ``'mgformer-attention-false'``, the name of an entry's files, at most
    :data:`MAX_SLUG` characters (:func:`bounded_name`)."""
    return bounded_name(re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower(), MAX_SLUG)


def bounded_name(name, limit):
    """``name`` when it has at most ``limit`` characters, else its head and a hash of the whole: an entry with many
    settings still names files the system can create, and two such entries that differ only at the end never share
    one."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:12]
    return f"{name[: limit - len(digest) - 1].rstrip('-')}-{digest}"


def comma_list(text):
    """``'a,b,,c'`` -> ``['a', 'b', 'c']``."""
    return [part.strip() for part in text.split(",") if part.strip()]
