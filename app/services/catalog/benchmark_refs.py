"""Benchmark references in paths: a version id, a name (its latest version) or ``name@vN``."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion, Project
from app.db.repositories.benchmarks import BenchmarkRepository, BenchmarkVersionRepository
from app.errors import NotFound

_VERSIONED = re.compile(r"^(?P<name>.+)@v(?P<version>[1-9][0-9]{0,8})$")


def ambiguous_name(name: str) -> str | None:
    """Why ``name`` cannot name a benchmark (it would read as a version reference), else None."""
    try:
        uuid.UUID(name.strip())
    except ValueError:
        pass
    else:
        return "a benchmark name cannot be a UUID: paths would read it as a version id"
    if _VERSIONED.match(name.strip()):
        return "a benchmark name cannot end in @vN: paths would read it as name@version"
    return None


def owner_project(session: Session, ref: str) -> Project | None:
    """The project of the benchmark a name or ``name@vN`` reference names, if it exists."""
    ref = ref.strip()
    if "\x00" in ref:
        return None
    match = _VERSIONED.match(ref)
    benchmark = BenchmarkRepository(session).get_by_name(match["name"] if match else ref)
    return benchmark.project if benchmark is not None else None


def missing(ref: str, *, field: str = "benchmark") -> NotFound:
    """The 404 a reference to nothing gets (also given for a benchmark the caller may not read,
    so the answer does not tell whether it exists)."""
    ref = ref.strip()
    try:
        uuid.UUID(ref)
    except ValueError:
        match = _VERSIONED.match(ref)
        return NotFound(f"no benchmark named {match['name'] if match else ref!r}", field=field)
    return NotFound(f"benchmark version {ref} not found", field=field)


def resolve_version(
    session: Session, ref: str, *, field: str = "benchmark", include_retired: bool = False
) -> BenchmarkVersion:
    """The benchmark version ``ref`` names.

    ``ref`` is a version id (UUID), a benchmark name (its latest version that is not retired)
    or ``name@vN`` (version ``N`` of that name, unless retired). A retired version stays
    reachable by its id (and by every reference with ``include_retired``). An unknown reference
    is a 404 naming ``field`` and ``ref``.
    """
    ref = ref.strip()
    if "\x00" in ref:  # Postgres text cannot hold NUL: no stored name has one (was a 500 on /ui)
        raise NotFound(f"no benchmark named {ref!r}", field=field)
    try:
        version_id = uuid.UUID(ref)
    except ValueError:
        version_id = None
    if version_id is not None:
        version = BenchmarkVersionRepository(session).get(version_id)
        if version is None:
            raise NotFound(f"benchmark version {ref} not found", field=field)
        return version
    match = _VERSIONED.match(ref)
    name, number = (match["name"], int(match["version"])) if match else (ref, None)
    versions = BenchmarkVersionRepository(session)
    version = versions.by_name(name, number, include_retired=include_retired)  # one query
    if version is not None:
        return version
    if BenchmarkRepository(session).get_by_name(name) is None:
        raise NotFound(f"no benchmark named {name!r}", field=field)
    if number is None:
        raise NotFound(
            f"every version of benchmark {name!r} is retired (un-retire one by its id)",
            field=field,
        )
    if versions.by_name(name, number, include_retired=True) is not None:
        raise NotFound(
            f"version {number} of benchmark {name!r} is retired (un-retire it to use it)",
            field=field,
        )
    raise NotFound(f"benchmark {name!r} has no version {number}", field=field)
