"""Imports go down the floors of README.md "Layout", never up or sideways, and never in a circle.

Our own AST walk over finops/, views/ and app.py (every import statement, inside functions too, but
not under ``if TYPE_CHECKING:``, which never runs). ``from finops.x import y`` is an import of the
module ``finops.x.y`` when that module exists, else of ``finops.x``.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from helpers import ROOT

# (floor, module prefixes). One entry is one unit: its modules may import one another; an import
# into another entry must go to a lower floor. Floor 4 has five entries: siblings, none imports another.
FLOORS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("finops", "finops.schema", "finops.errors", "finops.filters", "finops.sql", "finops.store",
         "finops.charts", "finops.jsonutil", "finops.catalogue", "finops.fmt", "finops.access",
         "finops.remote")),
    (1, ("finops.ingest",)),
    (2, ("finops.latency",)),
    (3, ("finops.spend",)),
    (4, ("finops.ops",)),
    (4, ("finops.capacity",)),
    (4, ("finops.cascade",)),
    (4, ("finops.gateway",)),
    (4, ("finops.scale",)),
    (5, ("finops.sample",)),
    (6, ("finops.commands", "finops.cli", "finops.__main__")),
    (7, ("views", "app")),
)

# Known edges that break the rule, each with why it is tolerated and until when.
ALLOWED: dict[tuple[str, str], str] = {}

# What a page may import from Streamlit: the package and its documented component API.
STREAMLIT_PUBLIC = {"streamlit", "streamlit.components.v1"}


# ---------------------------------------------------------------- reading the tree

def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for finops/, views/ and app.py."""
    files = [*sorted((root / "finops").rglob("*.py")), *sorted((root / "views").rglob("*.py")), root / "app.py"]
    return {module_name(p, root): p for p in files}


def _type_checking_only(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, int]]:
    """(dotted name, line) of everything ``tree`` imports; ``from a import b`` gives ``a.b`` (which
    :func:`_resolve` turns into ``a`` when ``b`` is not a module). Relative imports are resolved
    against ``module``."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            out.extend((f"{base}.{alias.name}", node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _resolve(name: str, known: set[str]) -> str | None:
    """The longest known module that ``name`` is or lies inside."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in known:
            return candidate
    return None


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, list[tuple[str, int]]]]:
    """(module -> our modules it imports, module -> every dotted name it imports with its line)."""
    files = source_files(root)
    known = set(files)
    graph: dict[str, set[str]] = {}
    raw: dict[str, list[tuple[str, int]]] = {}
    for module, path in files.items():
        names = imported_names(ast.parse(path.read_text(encoding="utf-8"), str(path)), module,
                               path.name == "__init__.py")
        raw[module] = names
        targets = set()
        for name, _ in names:
            if name.split(".")[0] in ("finops", "views", "app"):
                target = _resolve(name, known)
                if target and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph, raw


# ---------------------------------------------------------------- the checker

def floor_of(module: str, floors=FLOORS) -> tuple[int, int] | None:
    """(floor, entry index) of the longest matching prefix, or None for a module with no floor."""
    best: tuple[int, int, int] | None = None
    for i, (floor, prefixes) in enumerate(floors):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), floor, i)
    return None if best is None else (best[1], best[2])


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, first repeated last) per strongly connected component that has one
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        components.append(sorted(component))
    return [_a_cycle(graph, set(c), c[0]) for c in sorted(components)]


def _a_cycle(graph: dict[str, set[str]], members: set[str], start: str) -> list[str]:
    """A shortest path from ``start`` back to itself inside ``members`` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def layer_violations(graph: dict[str, set[str]], floors=FLOORS,
                     allowed: dict[tuple[str, str], str] | None = None) -> list[str]:
    """Every edge that goes up a floor or sideways into a sibling, and every module with no floor."""
    allowed = ALLOWED if allowed is None else allowed
    out = []
    for src in sorted(graph):
        fs = floor_of(src, floors)
        if fs is None:
            out.append(f"{src} has no floor (add it to FLOORS)")
            continue
        for dst in sorted(graph[src]):
            fd = floor_of(dst, floors)
            if fd is None or (src, dst) in allowed:
                continue
            if fd[1] != fs[1] and fd[0] >= fs[0]:
                how = "a sibling on floor" if fd[0] == fs[0] else "up to floor"
                out.append(f"{src} (floor {fs[0]}) imports {dst}: {how} {fd[0]}")
    return out


# ---------------------------------------------------------------- the checker can fail

SYNTHETIC_FLOORS = ((0, ("core",)), (1, ("mid",)), (2, ("top_a",)), (2, ("top_b",)))


def test_checker_reports_a_cycle():
    graph = {"core": set(), "mid.a": {"mid.b"}, "mid.b": {"mid.c"}, "mid.c": {"mid.a", "core"}, "top_a": {"mid.a"}}
    assert find_cycles(graph) == [["mid.a", "mid.b", "mid.c", "mid.a"]]
    assert find_cycles({"x": {"x"}}) == [["x", "x"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_checker_reports_an_upward_a_sideways_and_an_unplaced_import():
    graph = {"core": {"mid.a"}, "mid.a": {"core"}, "top_a": {"top_b", "mid.a"}, "top_b": set(), "stray": set()}
    assert layer_violations(graph, SYNTHETIC_FLOORS, allowed={}) == [
        "core (floor 0) imports mid.a: up to floor 1",
        "stray has no floor (add it to FLOORS)",
        "top_a (floor 2) imports top_b: a sibling on floor 2",
    ]
    assert layer_violations(graph, SYNTHETIC_FLOORS, allowed={("core", "mid.a"): "why", ("top_a", "top_b"): "why"}
                            ) == ["stray has no floor (add it to FLOORS)"]


def test_imports_are_read_inside_functions_relative_and_as_submodules(tmp_path):
    (tmp_path / "finops" / "pkg").mkdir(parents=True)
    (tmp_path / "finops" / "__init__.py").write_text("")
    (tmp_path / "finops" / "store.py").write_text("")
    (tmp_path / "finops" / "pkg" / "__init__.py").write_text("from . import inner\n")
    (tmp_path / "finops" / "pkg" / "inner.py").write_text("")
    (tmp_path / "finops" / "pkg" / "user.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import finops.store\n"
        "def f():\n    from finops.pkg import inner\n    from .. import store\n    return inner, store\n")
    (tmp_path / "views").mkdir()
    (tmp_path / "app.py").write_text("import finops.pkg.user as u\n")
    graph, _ = import_graph(tmp_path)
    assert graph["finops.pkg.user"] == {"finops.pkg.inner", "finops.store"}
    assert graph["finops.pkg"] == {"finops.pkg.inner"}
    assert graph["app"] == {"finops.pkg.user"}


# ---------------------------------------------------------------- the tree

def test_no_import_cycle():
    graph, _ = import_graph()
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_imports_only_go_down_the_floors():
    graph, _ = import_graph()
    violations = layer_violations(graph)
    assert not violations, "\n".join(violations)


def test_allowed_exceptions_still_exist():
    """An allowed edge that is gone must leave ALLOWED too, or it would excuse its return."""
    graph, _ = import_graph()
    assert [edge for edge in ALLOWED if edge[1] not in graph.get(edge[0], ())] == []


def _streamlit_internal(name: str) -> bool:
    if name in STREAMLIT_PUBLIC or not name.startswith("streamlit."):
        return False
    # ``from streamlit import x`` reads as "streamlit.x": internal only when x is a module
    top = importlib.util.find_spec("streamlit")
    first = name.split(".")[1]
    return any((Path(loc) / first).is_dir() or (Path(loc) / f"{first}.py").exists()
               for loc in top.submodule_search_locations)


def test_finops_never_imports_streamlit_and_pages_use_only_its_public_api():
    _, raw = import_graph()
    in_finops = [f"{m}:{line} {name}" for m, names in raw.items() if m.split(".")[0] == "finops"
                 for name, line in names if name == "streamlit" or name.startswith("streamlit.")]
    assert in_finops == []
    internals = [f"{m}:{line} {name}" for m, names in raw.items() if m.split(".")[0] in ("views", "app")
                 for name, line in names if _streamlit_internal(name)]
    assert internals == []
