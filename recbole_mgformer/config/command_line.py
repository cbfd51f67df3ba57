"""``--key=value`` command lines as settings, for every command line of the project (run.py, tune, benchmark)."""

import argparse
import re
import shlex

import yaml

from recbole_mgformer.safety import UnsafeSettingError, literal_setting, load_yaml

# RecBole's intervals (--user_inter_num_interval=[5,inf), "(0,1];[3,4)"): a half-open one is no YAML, and stays text
INTERVALS = re.compile(r"\s*[\[(][^;\[\]()]*,[^;\[\]()]*[\])](\s*;\s*[\[(][^;\[\]()]*,[^;\[\]()]*[\])])*\s*")


def parse_overrides(arguments):
    """``["--key=value", ...]`` -> ``{key: value}``, values parsed as YAML like RecBole's config files (a safe
    loader), and a string value that is Python code (``--lr="__import__('os')..."``) refused: RecBole's Config
    would ``eval`` it, this project reads it as a literal (:func:`recbole_mgformer.safety.literal_setting`)."""
    overrides = {}
    for argument in arguments:
        key, sep, raw = argument[2:].partition("=") if argument.startswith("--") else ("", "", "")
        if not key or not sep:
            raise SystemExit(f"error: cannot read argument {argument!r}; write config overrides as --key=value")
        if key in overrides:  # the last would win silently, as a YAML key set twice would
            raise SystemExit(f"error: --{key} is given twice; keep one --{key}=... on the command line")
        try:
            overrides[key] = load_yaml(raw) if raw else None
        except yaml.YAMLError as error:
            if INTERVALS.fullmatch(raw):
                overrides[key] = raw
            elif raw.lstrip().startswith(("[", "{")):  # a list or mapping written wrong: never a string instead
                problem = getattr(error, "problem", None) or str(error).splitlines()[0]
                raise SystemExit(
                    f"error: --{key}={raw} is not a YAML list or mapping ({problem}); write a list as [a, b] and a "
                    "mapping as {key: value}, the whole value quoted for the shell (--topk='[10, 20]')"
                ) from None
            else:
                overrides[key] = raw  # text YAML cannot read plain (',', '@x'), as RecBole keeps what it cannot read
        if isinstance(overrides[key], str):
            try:
                literal_setting(key, overrides[key])
            except UnsafeSettingError as error:
                raise SystemExit(f"error: --{key}=...: {error}") from None
    return overrides


def split_config_files(text):
    """The files of ``--config_files``: space-separated, as RecBole reads them, and a path holding spaces in quotes
    (``--config_files="'my settings.yaml' b.yaml"``); quotes are read only where there are some, so a backslash of
    a Windows path stays."""
    if not any(quote in text for quote in "'\""):
        return text.split()
    try:
        return shlex.split(text)
    except ValueError as error:  # "No closing quotation"
        raise SystemExit(f"error: --config_files {text!r}: {error}; close each quoted path") from None


def config_settings(args, rest):
    """``(config files, overrides)`` of a command line: ``--config_files`` (:func:`split_config_files`; None without
    it) and the other ``--key=value`` arguments ``rest``, read by :func:`parse_overrides`."""
    return (split_config_files(args.config_files) if args.config_files else None), parse_overrides(rest)


class GivenOnce(argparse.Action):
    """An option that may be given once: argparse keeps the last of ``--model=BPR --model=LightGCN`` without a word,
    as :func:`parse_overrides` refuses a setting given twice."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", set())
        if self.dest in given:
            parser.error(f"{option_string} is given twice; keep one")
        given.add(self.dest)
        setattr(namespace, self.dest, values)
