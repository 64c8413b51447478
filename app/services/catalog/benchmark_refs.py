"""Benchmark references in paths: a version id, a name (its latest version) or ``name@vN``."""

from __future__ import annotations

import re
import uuid

from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion
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


def resolve_version(session: Session, ref: str, *, field: str = "benchmark") -> BenchmarkVersion:
    """The benchmark version ``ref`` names.

    ``ref`` is a version id (UUID), a benchmark name (its latest version) or ``name@vN``
    (version ``N`` of that name). An unknown reference is a 404 naming ``field`` and ``ref``.
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
    version = BenchmarkVersionRepository(session).by_name(name, number)  # one query when found
    if version is not None:
        return version
    if number is None or BenchmarkRepository(session).get_by_name(name) is None:
        raise NotFound(f"no benchmark named {name!r}", field=field)
    raise NotFound(f"benchmark {name!r} has no version {number}", field=field)
