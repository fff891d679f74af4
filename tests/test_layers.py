"""The package's layers point one way: no circle of modules, and the games import nothing of what is
built on them (the loop, the league, the `eval` command, the viewer, the command line), only the
statistics library below them (`selfplay_gen.stats`). Read from the source with `ast`, every import
counted, those inside functions and `if TYPE_CHECKING:` too: a late import is still a dependency.
Also: no seed a run plays from lies in the development or test split."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from selfplay_gen.evaluation.splits import DEV, TEST

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "selfplay_gen"
# what the games are below: none of their modules may import these (or modules inside them)
ABOVE_GAMES = (
    "selfplay_gen.iterate",
    "selfplay_gen.league",
    "selfplay_gen.evaluation",
    "selfplay_gen.viewer",
    "selfplay_gen.cli",
)
# the library every game's evaluation is built from: below the games, so it imports no layer above it
LIBRARY = "selfplay_gen.stats"


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: its dotted name -> (file, whether it is a package's __init__)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports() -> dict[str, dict[str, int]]:
    """module -> {imported module of the package: the first line importing it}. `from X import Y`
    names the module X.Y where Y is a submodule, else X; importing a module's parent packages
    implicitly is not counted (Python runs them once, whatever the order)."""
    known = modules()

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in known.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for target in targets:
                module = owner(target) if target.split(".")[0] == PACKAGE else None
                if module is not None and module != name:
                    edges.setdefault(module, node.lineno)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def within(module: str, layers: tuple[str, ...]) -> bool:
    return any(module == layer or module.startswith(layer + ".") for layer in layers)


def describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """A circle's imports, each as `file:line a -> b`."""
    members = set(component)
    lines = [
        f"{modules()[a][0].relative_to(ROOT)}:{line} {a} -> {b}"
        for a in component
        for b, line in graph[a].items()
        if b in members
    ]
    return "\n".join(lines)


def test_the_scan_sees_the_imports_it_checks():
    graph = imports()
    assert "selfplay_gen.stats.metrics" in graph["selfplay_gen.games.negotiation.evaluation"]
    assert "selfplay_gen.games" in graph["selfplay_gen.evaluation.protocol"]  # `from .. import games`
    assert "selfplay_gen.iterate.stages" in graph["selfplay_gen.iterate.trainers"]
    assert "selfplay_gen.runner" in graph["selfplay_gen.iterate.loop"]  # an import inside a method
    # a circle is found where there is one
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_no_circle_of_modules():
    graph = imports()
    found = circles(graph)
    assert not found, "modules that import each other, directly or around a circle:\n" + "\n\n".join(
        describe(graph, c) for c in found
    )


def test_the_games_import_nothing_built_on_them():
    graph = imports()
    games = [m for m in graph if within(m, ("selfplay_gen.games",))]
    assert len(games) > 20
    upward = [
        f"{modules()[m][0].relative_to(ROOT)}:{line} imports {target}"
        for m in games
        for target, line in graph[m].items()
        if within(target, ABOVE_GAMES)
    ]
    assert not upward, "a game imports a layer built on the games:\n" + "\n".join(upward)


def test_the_statistics_library_imports_no_game_and_no_layer_above_them():
    graph = imports()
    library = [m for m in graph if within(m, (LIBRARY,))]
    assert library
    upward = [
        f"{m} imports {target}"
        for m in library
        for target in graph[m]
        if within(target, (*ABOVE_GAMES, "selfplay_gen.games"))
    ]
    assert not upward, "\n".join(upward)


def seed_constants() -> list[tuple[str, str]]:
    """(module, name) of every module-level constant of the package named *_SEED: the first seed of
    a set of instances a run plays."""
    found = []
    for name, (path, _) in modules().items():
        for node in ast.parse(path.read_text()).body:
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            found += [(name, t.id) for t in targets if isinstance(t, ast.Name) and t.id.endswith("_SEED")]
    return found


def test_no_seed_constant_lies_in_the_development_or_test_split():
    found = seed_constants()
    assert {"WARM_SEED", "SKILL_SEED"} <= {name for _, name in found}
    for module, name in found:
        seed = getattr(importlib.import_module(module), name)
        assert isinstance(seed, int), f"{module}.{name} = {seed!r}: not a seed"
        for split in (DEV, TEST):
            assert seed not in split, f"{module}.{name} = {seed:_} lies in the {split}"
