"""The package's house of imports: no circle between modules, folders in layers that import only from their own
layer or below, and a ground floor of at most 10 modules. Imports are read from the source (``ast``), at module
level and inside functions alike."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "recbole_mgformer"
NAME = PACKAGE.name

# Bottom to top; a unit is a folder of the package or a module directly in it, and the package itself (its
# ``__init__``: run_recommender, recommend, register) is the top floor.
LAYERS = (
    ("safety", "locks"),  # nothing RecBole loads runs code, the YAML and literal readers; advisory file locks
    ("config",),  # defaults, key and input checks, command lines
    ("model",),  # the models, RecBole style
    ("data",),  # importer, atomic files, dataset sources
    ("item_groups", "evaluation", "records"),  # popularity groups, per-user metrics, run records
    ("training",),  # trainers, device loop, checkpoints, resumption
    ("integration",),  # registry, RecBole patches, plugin hooks, checkpoint loading
    ("quick_start",),  # the runner
    ("tune",),  # searches over the runner
    ("benchmark",),  # runs, tuning and pages
    # run.py, the recommend command, the package's own entry functions, the registry's former address
    ("cli", "recommend", "registry", ""),
)
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def existing(name):
    """The longest prefix of ``name`` that is a module of the package (``a.b.func`` -> ``a.b``)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imported(module):
    """The package's modules that ``module`` imports: each imported module and every package above it that is not
    above ``module`` (importing ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__``)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])]
                )
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == NAME or name.startswith(NAME + "."):
                targets.add(existing(name))
    above = set()
    for target in targets:
        parts = target.split(".")
        above |= {".".join(parts[:i]) for i in range(1, len(parts))}
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
    return (targets | above) - own


GRAPH = {module: imported(module) for module in MODULES}


def unit(module):
    """``recbole_mgformer.training.trainer`` -> ``training``; the package itself -> ``""``."""
    return module.split(".")[1] if "." in module else ""


def test_every_unit_has_a_layer():
    assert {unit(module) for module in MODULES} <= set(LAYER_OF), "declare the new folder's layer in LAYERS"


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if LAYER_OF[unit(target)] > LAYER_OF[unit(module)]
    ]
    assert not upward


def find_cycle(graph):
    """A list of modules that import one another in a circle, or None."""
    done, path, on_path = set(), [], set()

    def visit(node):
        path.append(node)
        on_path.add(node)
        for target in sorted(graph[node]):
            if target in on_path:
                return path[path.index(target) :] + [target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        on_path.discard(path.pop())
        done.add(node)
        return None

    for node in sorted(graph):
        if node not in done:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle_between_modules():
    assert find_cycle(GRAPH) is None, " -> ".join(find_cycle(GRAPH))


def test_the_check_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_a_ground_floor_of_at_most_ten_modules():
    ground = sorted(path.name for path in PACKAGE.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))
    assert len(ground) <= 10, ground
