"""The rooms of app/core and app/services (issue 22): which room may import which, no import cycle
anywhere in app/, no route importing another route, no flat pile of modules.

The import graph counts every import at any depth (a lazy import inside a function is still an
arrow), resolved to the longest module path of this repository.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

import pytest

from tests.test_architecture import ROOT, Module, imported_modules, modules

# room -> rooms it may import (besides itself). The order is the layering, lowest first.
CORE_ROOMS: dict[str, set[str]] = {
    "results": set(),
    "_validation": set(),
    "irt": {"_validation", "results"},
    "estimation": {"irt", "_validation", "results"},
    "selectors": {"estimation", "irt", "_validation", "results"},
    "reliability": {"selectors", "estimation", "irt", "_validation", "results"},
    "scoring": {"reliability", "selectors", "estimation", "irt", "_validation", "results"},
    "sequential": {"reliability", "estimation", "irt", "_validation", "results"},
    "ranking": {"estimation", "_validation", "results"},
    "items": {"irt", "_validation", "results"},
}
SERVICE_ROOMS: dict[str, set[str]] = {
    "platform": set(),
    "access": {"platform"},
    "limits": {"access", "platform"},
    "catalog": {"access", "platform"},
    "selection": {"catalog", "access", "platform"},
    "reliability": {"selection", "catalog", "limits", "access", "platform"},
    "evaluation": {"selection", "catalog", "limits", "access", "platform"},
    "ranking": {"selection", "catalog", "limits", "access", "platform"},
    # the composition root: the table of job kinds names every room's handlers
    "job_kinds": {
        "reliability",
        "evaluation",
        "ranking",
        "selection",
        "catalog",
        "limits",
        "access",
        "platform",
    },
}
MAX_FLAT_MODULES = 10


def import_graph(mods: Iterable[Module]) -> dict[str, set[str]]:
    """module -> the modules of this repository it imports (a package's own submodules and the
    package a module sits in are not arrows: Python runs them as one unit)."""
    table = {m.name: m for m in mods}

    def resolve(dotted: str) -> str | None:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in table:
                return candidate
        return None

    graph: dict[str, set[str]] = {}
    for name, module in table.items():
        edges = set()
        for _, dotted in imported_modules(module):
            target = resolve(dotted)
            if target is None or target == name:
                continue
            if table[target].is_package and name.startswith(target + "."):
                continue  # a module importing its own package
            edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def room_of(module: str, root: str) -> str | None:
    if not module.startswith(root + "."):
        return None
    return module[len(root) + 1 :].split(".")[0]


def arrow_violations(
    graph: dict[str, set[str]], root: str, allowed: dict[str, set[str]]
) -> list[str]:
    found = []
    for source, targets in graph.items():
        room = room_of(source, root)
        if room is None:
            continue
        if room not in allowed:
            found.append(f"{source}: room {room!r} of {root} is not in the table")
            continue
        for target in sorted(targets):
            other = room_of(target, root)
            if other is not None and other != room and other not in allowed[room]:
                found.append(f"{source} imports {target} ({room} -> {other} is not allowed)")
    return found


def route_violations(mods: Iterable[Module]) -> list[str]:
    found = []
    for module in mods:
        if not module.name.startswith("app.api.routes.") or module.is_package:
            continue
        lines = set()
        for node, dotted in imported_modules(module):
            if dotted.startswith("app.api.routes.") and node.lineno not in lines:
                lines.add(node.lineno)
                found.append(f"{module.rel}:{node.lineno} imports from app.api.routes")
    return found


def flat_piles(limit: int = MAX_FLAT_MODULES) -> list[str]:
    """Folders of app/core and app/services holding more than ``limit`` modules side by side."""
    found = []
    for top in ("app/core", "app/services"):
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
            if count > limit and "__pycache__" not in folder.parts:
                found.append(f"{folder.relative_to(ROOT).as_posix()}: {count} modules")
    return found


@pytest.fixture(scope="module")
def repo_graph() -> dict[str, set[str]]:
    return import_graph(modules())


def test_no_import_cycle_in_app(repo_graph: dict[str, set[str]]) -> None:
    app_only = {
        k: {t for t in v if t.startswith("app")}
        for k, v in repo_graph.items()
        if k.startswith("app")
    }
    assert not cycles(app_only), cycles(app_only)


def test_core_rooms_import_only_lower_rooms(repo_graph: dict[str, set[str]]) -> None:
    assert not arrow_violations(repo_graph, "app.core", CORE_ROOMS)


def test_service_rooms_import_only_lower_rooms(repo_graph: dict[str, set[str]]) -> None:
    assert not arrow_violations(repo_graph, "app.services", SERVICE_ROOMS)


def test_no_route_imports_another_route() -> None:
    assert not route_violations(modules())


def test_no_flat_pile_of_modules() -> None:
    assert not flat_piles()


def test_every_room_has_a_docstring_saying_what_goes_there() -> None:
    missing = []
    for top, rooms in (("app/core", CORE_ROOMS), ("app/services", SERVICE_ROOMS)):
        for room in rooms:
            init = ROOT / top / room / "__init__.py"
            if init.exists() and not ast.get_docstring(ast.parse(init.read_text())):
                missing.append(init.relative_to(ROOT).as_posix())
    assert not missing


def test_the_room_checks_catch_what_they_should() -> None:
    """Planted examples: a cycle, a forbidden arrow, a route importing a route, a flat pile."""

    def fake(name: str, source: str) -> Module:
        path = ROOT.joinpath(*name.split(".")).with_suffix(".py")
        return Module(path, name, False, ast.parse(source))

    planted = [
        fake("app.services.platform.a", "from app.services.catalog import b\n"),
        fake("app.services.catalog.b", "def f():\n    from app.services.platform import a\n"),
        fake("app.api.routes.x", "from app.api.routes.y import thing\n"),
        fake("app.api.routes.y", "thing = 1\n"),
    ]
    graph = import_graph(planted)
    assert cycles(graph) == [["app.services.catalog.b", "app.services.platform.a"]]
    assert any(
        "platform -> catalog is not allowed" in v
        for v in arrow_violations(graph, "app.services", SERVICE_ROOMS)
    )
    assert route_violations(planted) == ["app/api/routes/x.py:1 imports from app.api.routes"]
    biggest = max(
        len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        for folder in (ROOT / "app" / "core").rglob("*")
        if folder.is_dir()
    )
    assert flat_piles(biggest - 1)
