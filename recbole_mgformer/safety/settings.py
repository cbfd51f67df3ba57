"""Settings are read as literals and YAML with a safe loader: RecBole's Config and HyperTuning's parameter files.

RecBole's ``Config._convert_config_dict`` ``eval``s every string setting, its YAML loader builds Python objects from
tags, and ``HyperTuning`` ``eval``s each ``choice`` line of a parameter file; here they read values only.
"""

import ast
import contextlib
import re

import yaml


class UnsafeSettingError(ValueError):
    """A setting that only running code (Python, or an unpickled file) could honour."""


# ------------------------------------------------------------------------------------------------ YAML


# What a settings document may expand to once its aliases are followed: ample for any config or search space (a few
# hundred values), far below what would make the checks that walk every value hang (a "billion laughs": 1.5 KB of
# nested aliases expand to 10^9 values), and nesting well within Python's recursion limit.
MAX_YAML_VALUES = 100_000
MAX_YAML_DEPTH = 100


class YamlBombError(yaml.MarkedYAMLError):
    """A YAML document that expands past :data:`MAX_YAML_VALUES` values or :data:`MAX_YAML_DEPTH` levels through its
    aliases, or whose alias refers to a value it is inside."""


def _children(node):
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return ()


def _bomb(problem, mark):
    return YamlBombError(problem=f"{problem}; a settings file never needs that", problem_mark=mark)


def check_expansion(root):
    """Raise :class:`YamlBombError` when the composed ``root`` expands (aliases followed) past
    :data:`MAX_YAML_VALUES` values or :data:`MAX_YAML_DEPTH` levels, or holds an alias inside its own anchor (a
    cycle); returns the expanded count. Composing is linear in the text, since an alias is a second reference to its
    anchor's node; the count walks that graph once, memoizing each node's expanded size and depth."""
    size, depth, state = {}, {}, {}  # by id(node); state: 1 on the current path, 2 done
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _children(node)
            size[key] = 1 + sum(size[id(child)] for child in children)
            depth[key] = 1 + max((depth[id(child)] for child in children), default=0)
            state[key] = 2
            if size[key] > MAX_YAML_VALUES:
                raise _bomb(
                    f"the document expands to more than {MAX_YAML_VALUES:,} values through its aliases (*name "
                    "repeats what &name anchors), the bound this project sets so that reading and checking settings "
                    "cannot hang or fill the memory (a 'billion laughs'); write the values out instead of nesting "
                    "aliases",
                    node.start_mark,
                )
            if depth[key] > MAX_YAML_DEPTH:
                raise _bomb(f"values nest more than {MAX_YAML_DEPTH} levels deep through aliases", node.start_mark)
            continue
        if state.get(key) == 2:
            continue
        state[key] = 1
        stack.append((node, True))
        for child in _children(node):
            if state.get(id(child)) == 1:
                raise _bomb(
                    "an alias (*name) refers to a value it is inside, which would repeat without end; remove it",
                    child.start_mark,
                )
            if state.get(id(child)) != 2:
                stack.append((child, False))
    return size.get(id(root), 0)


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python objects from tags), bounded: a document nested deeper than
    :data:`MAX_YAML_DEPTH`, or that expands past :data:`MAX_YAML_VALUES` values through its aliases, or holds an alias
    inside its own anchor raises :class:`YamlBombError` (a ``yaml.YAMLError``) before anything is constructed. What
    ``yaml.safe_load`` reads, through :func:`load_plain_yaml`."""

    _depth = 0

    def compose_node(self, parent, index):
        if self._depth >= MAX_YAML_DEPTH:  # stop while reading: the scanner is quadratic in the nesting
            raise _bomb(f"values are nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        if node is not None:
            check_expansion(node)
        return node


class SafeLoader(BoundedLoader):
    """:class:`BoundedLoader` with RecBole's float resolver: ``1e-3`` is a float, as in RecBole's config files, where
    YAML 1.1 alone would read a string."""


SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _construct_int(loader, node):
    """YAML 1.1 reads ``016`` as the octal 14 (RecBole's loader too), where a user wrote sixteen: an error instead."""
    digits = node.value.replace("_", "")
    if re.fullmatch(r"[-+]?0[0-7]+", digits):
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{node.value} is an octal number to YAML ({int(digits, 8)}); write {int(digits, 10)} without the leading "
            "0, or quote it for text",
            node.start_mark,
        )
    return loader.construct_yaml_int(node)


SafeLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text):
    """A YAML document (text or a file object) as RecBole reads its config files, but with the safe loader."""
    return yaml.load(text, Loader=SafeLoader)


def load_plain_yaml(text):
    """``yaml.safe_load`` of ``text``, bounded as :class:`BoundedLoader` (YAML 1.1's floats: ``1e-3`` a string)."""
    return yaml.load(text, Loader=BoundedLoader)


# ------------------------------------------------------------------------------------------------ literal settings

_CODE_NODES = (
    ast.Call,
    ast.Lambda,
    ast.NamedExpr,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Await,
    ast.Yield,
    ast.YieldFrom,
    ast.FormattedValue,
    ast.Starred,
)
_VALUE_TYPES = (str, int, float, list, tuple, dict, bool)  # what RecBole kept of an eval (no sets, bytes, complex)


def _refusal(key, text, why):
    return UnsafeSettingError(
        f"setting {key}: {text!r} {why}; settings are read as values (a number, true/false, None, a word or path, "
        f"a list or dict of them), never run as Python. Write the value itself, e.g. --{key}=0.01, "
        f"--{key}=[64,64] or `{key}: relu` in a config file"
    )


def literal_setting(key, text):
    """RecBole's reading of a string setting (``eval``, then the string itself where that fails), without ``eval``.

    A Python literal becomes its value (``"0.01"``, ``"[64, 64]"``, ``"{'RS': [0.8, 0.1, 0.1]}"``, ``"None"``,
    ``"8,2"`` a tuple), ``true``/``false`` in any case a bool, and words, paths and metric names (``none``,
    ``amazon-beauty``, ``saved/model.pth``, ``NDCG@20``) stay strings, as under RecBole. What only running
    Python gives (a call, a lambda, a comprehension, arithmetic such as ``1/3``) raises UnsafeSettingError."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    else:
        return value if value is None or isinstance(value, _VALUE_TYPES) else text
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None  # not Python: a word or path as it is
    if tree is not None:
        nodes = list(ast.walk(tree))
        if any(isinstance(node, _CODE_NODES) for node in nodes):
            raise _refusal(key, text, "is code (it calls a function or builds a value by running Python)")
        if not any(isinstance(node, ast.Name) for node in nodes):  # '1/3', '2**10', "'a' * 3": arithmetic
            raise _refusal(key, text, "is an expression RecBole would have computed; write its value instead")
    lowered = text.lower()
    return True if lowered == "true" else False if lowered == "false" else text


def literal_settings(settings):
    """``settings`` with every string value read by :func:`literal_setting` (RecBole's ``_convert_config_dict``)."""
    for key, value in settings.items():
        if isinstance(value, str):
            settings[key] = literal_setting(key, value)
    return settings


def check_literal_strings(settings, source):
    """Refuse strings that are code in settings read as they are (a config file's values): they are not run here,
    but would be the moment they pass through a ``config_dict`` (a search's best configuration, a retrain)."""
    for key, value in (settings or {}).items():
        if isinstance(value, str):
            try:
                literal_setting(key, value)
            except UnsafeSettingError as error:
                raise UnsafeSettingError(f"{source}: {error}") from None


# ------------------------------------------------------------------------------------------------ RecBole's Config


def install_config():
    """RecBole's Config reads YAML with :class:`SafeLoader` and string settings with :func:`literal_settings`, and
    refuses a config file's string that is code."""
    from recbole.config import Config

    load_files = Config._load_config_files

    def _build_yaml_loader(self=None):
        return SafeLoader

    def _convert_config_dict(self, config_dict):
        return literal_settings(config_dict)

    def _load_config_files(self, file_list):
        settings = {}
        for path in file_list or []:
            loaded = load_files(self, [path])
            check_literal_strings(loaded, f"config file {path}")
            settings.update(loaded)
        return settings

    Config._build_yaml_loader = _build_yaml_loader
    Config._convert_config_dict = _convert_config_dict
    Config._load_config_files = _load_config_files


def _literal_choice(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise UnsafeSettingError(
            f"HyperTuning parameter file: choice {text!r} is not a list of values, e.g. "
            "[0.01,0.001]; the file's values are read, never run as Python"
        ) from None


def install_hyper_tuning():
    """``HyperTuning._build_space_from_file`` evals each ``choice`` line's values: a literal reading instead."""
    from recbole.trainer import hyper_tuning

    build = hyper_tuning.HyperTuning._build_space_from_file

    def _build_space_from_file(file):
        with patched_builtin_eval(_literal_choice, hyper_tuning):
            return build(file)

    hyper_tuning.HyperTuning._build_space_from_file = staticmethod(_build_space_from_file)


@contextlib.contextmanager
def patched_builtin_eval(function, module):
    """``eval`` inside ``module``'s functions is ``function`` (a module global shadows the builtin)."""
    missing = object()
    saved = module.__dict__.get("eval", missing)
    module.eval = function
    try:
        yield
    finally:
        if saved is missing:
            del module.eval
        else:
            module.eval = saved
