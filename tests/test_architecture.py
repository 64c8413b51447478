"""The layering rules, checked on the source (AST) of every module in app/ and worker/.

* No private name crosses a module boundary: no ``from m import _x`` and no ``m._x`` on an
  imported name (a module's own ``_x`` is fine; dunders are fine). A private *module*
  (``pkg/_helpers.py``) may be imported by its own package only.
* ``app/`` never imports the ``worker`` package (the worker imports the app, not the reverse).
* ``app/core`` is pure computation: no web framework, ORM, queue or settings.
* Routes do no SQL: nothing under ``app/api/routes`` imports ``app.db`` or ``sqlalchemy``.
* Services say which field is at fault, not where it sits in an HTTP request: no ``"loc"``
  dict key in ``app/services`` (app/api/errors.py decides the location).
* No module in ``app/`` or ``worker/`` is longer than :data:`MAX_LINES` lines (issue 11): a file
  that grows past it is split along a real seam.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "worker")
CORE_FORBIDDEN = (
    "fastapi",
    "starlette",
    "sqlalchemy",
    "celery",
    "kombu",
    "redis",
    "pydantic_settings",
    "app.settings",
    "app.db",
    "app.api",
    "app.services",
    "worker",
)
ROUTES_FORBIDDEN = ("app.db", "sqlalchemy")
MAX_LINES = 600

# Offenders in files another change is rewriting (R-JOBS: services/analyses.py, services/jobs.py,
# worker/*, app/main.py, core/{protocol,analysis,planning}.py, routes analyses/jobs/subsets).
# Each entry is one exact violation string below; the lead empties this set when that lands.
KNOWN_UNTIL_RJOBS: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Module:
    path: Path
    name: str  # dotted, e.g. app.services.reliability.verdicts
    is_package: bool
    tree: ast.Module

    @property
    def rel(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def package(self) -> str:
        return self.name if self.is_package else self.name.rpartition(".")[0]


def modules() -> Iterator[Module]:
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            yield Module(path, ".".join(parts), is_package, ast.parse(path.read_text(), str(path)))


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` reads from, with relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(module: Module) -> Iterator[tuple[ast.stmt, str]]:
    """Every (statement, dotted module) the file imports, at any depth (lazy imports too);
    ``from a import b`` yields both ``a`` and ``a.b`` (b may be a submodule)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            source = absolute(module, node)
            yield node, source
            for alias in node.names:
                if not is_private(alias.name):  # a private name is the name check's business
                    yield node, f"{source}.{alias.name}"


def is_submodule(dotted: str) -> bool:
    """``dotted`` names a module or package file of this repository."""
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def private_module_violation(module: Module, dotted: str) -> bool:
    """``dotted`` goes through a private module or package outside the importer's package."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if is_private(part):
            owner = ".".join(parts[:i])  # the package the private part belongs to
            inside = module.name == owner or module.name.startswith(owner + ".")
            own = module.name == ".".join(parts[: i + 1])
            return not (inside or own)
    return False


def private_name_violations(module: Module) -> Iterator[str]:
    bound: set[str] = set()  # names this module binds by importing
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            source = absolute(module, node)
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if not is_private(alias.name) or source == module.name:
                    continue
                dotted = f"{source}.{alias.name}"
                if is_submodule(dotted) and not private_module_violation(module, dotted):
                    continue  # a package's own private module, imported from inside it
                yield f"{module.rel}:{node.lineno} imports {alias.name} from {source}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
    for node, dotted in imported_modules(module):
        if dotted.split(".")[0] in PACKAGES and private_module_violation(module, dotted):
            yield f"{module.rel}:{node.lineno} imports private module {dotted}"
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                yield f"{module.rel}:{node.lineno} uses {ast.unparse(node)}"


def forbidden_imports(module: Module, prefixes: tuple[str, ...]) -> Iterator[str]:
    seen = set()
    for node, dotted in imported_modules(module):
        for prefix in prefixes:
            if (dotted == prefix or dotted.startswith(prefix + ".")) and (node, prefix) not in seen:
                seen.add((node, prefix))
                yield f"{module.rel}:{node.lineno} imports {prefix}"


def loc_keys(module: Module) -> Iterator[str]:
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value == "loc":
                    yield f'{module.rel}:{key.lineno} writes a "loc" key'


def violations() -> list[str]:
    found: list[str] = []
    for module in modules():
        found += private_name_violations(module)
        if module.name.startswith("app"):
            found += forbidden_imports(module, ("worker",))
        if module.name.startswith("app.core"):
            found += forbidden_imports(module, CORE_FORBIDDEN)
        if module.name.startswith("app.api.routes"):
            found += forbidden_imports(module, ROUTES_FORBIDDEN)
        if module.name.startswith("app.services"):
            found += loc_keys(module)
    return sorted(set(found))


def _location_free(entries: set[str]) -> set[str]:
    """Violations without their line numbers (line numbers move with unrelated edits)."""
    return {e.split(":", 1)[0] + ":" + e.split(" ", 1)[1] for e in entries}


def test_layering_rules_hold() -> None:
    found = set(violations())
    unexpected = _location_free(found) - _location_free(set(KNOWN_UNTIL_RJOBS))
    assert not unexpected, "\n".join(sorted(e for e in found if _location_free({e}) & unexpected))


def test_known_offenders_are_still_offending() -> None:
    """An entry that no longer offends must leave KNOWN_UNTIL_RJOBS (the set only shrinks)."""
    stale = _location_free(set(KNOWN_UNTIL_RJOBS)) - _location_free(set(violations()))
    assert not stale, sorted(stale)


def test_the_checks_catch_what_they_should(tmp_path: Path) -> None:
    """The detectors fire on a planted example of each rule (so a passing run means something)."""
    source = (
        "import worker.tasks\n"
        "from app.core import protocol\n"
        "from app.core.reliability.protocol import _STATE, __all__\n"
        "from app.core._validation import check\n"
        "from app.core import _validation\n"
        "import sqlalchemy\n"
        "x = protocol._prepare_payload, protocol.__doc__, self_obj._own\n"
        "errors = [{'loc': ['body'], 'message': 'm'}]\n"
    )
    tree = ast.parse(source)
    fake = Module(ROOT / "app" / "services" / "fake.py", "app.services.fake", False, tree)
    private = list(private_name_violations(fake))
    assert any("imports _STATE from app.core.reliability.protocol" in v for v in private)
    assert not any("__all__" in v or "__doc__" in v or "_own" in v for v in private)
    assert any("private module app.core._validation" in v for v in private)
    assert any("uses protocol._prepare_payload" in v for v in private)
    assert list(forbidden_imports(fake, ("worker",)))
    assert list(forbidden_imports(fake, CORE_FORBIDDEN))
    assert list(loc_keys(fake))
    assert any("imports _validation from app.core" in v for v in private)
    insider = Module(ROOT / "app" / "core" / "x.py", "app.core.x", False, tree)
    inside = list(private_name_violations(insider))
    assert not any("_validation" in v for v in inside), inside
    assert any("imports _STATE from app.core.reliability.protocol" in v for v in inside)


def too_long(limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` for every .py file under app/ and worker/ longer than ``limit``."""
    found = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            n = len(path.read_text().splitlines())
            if n > limit:
                found.append(f"{path.relative_to(ROOT).as_posix()}: {n} lines (limit {limit})")
    return found


def test_no_module_is_longer_than_the_limit() -> None:
    offenders = too_long()
    assert not offenders, "split along a real seam:\n" + "\n".join(offenders)


def test_the_length_check_can_fail() -> None:
    """With a limit below the longest module the check names it with its count."""
    longest = max(
        (len(p.read_text().splitlines()), p.relative_to(ROOT).as_posix())
        for top in PACKAGES
        for p in (ROOT / top).rglob("*.py")
    )
    offenders = too_long(longest[0] - 1)
    assert f"{longest[1]}: {longest[0]} lines (limit {longest[0] - 1})" in offenders
