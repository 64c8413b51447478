"""Benchmarks: create a version from an item list (content-hashed, idempotent), list, describe.

Services validate and flush; the request (or CLI) owns the transaction.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.sequential.cost import item_cost_summary, predicted_subset_cost
from app.db.base import utcnow
from app.db.models.access import Project
from app.db.models.benchmark import Benchmark, BenchmarkVersion
from app.db.repositories.access import ProjectRepository
from app.db.repositories.benchmarks import BenchmarkRepository, BenchmarkVersionRepository
from app.db.repositories.model_results import ModelResultRepository
from app.errors import Conflict, FieldIssue, InvalidInput, NotFound
from app.ingest import ParsedResults
from app.ingest.costs import COST_FIELDS
from app.schemas.benchmarks import (
    AccuracySummary,
    BenchmarkCreate,
    BenchmarkDetail,
    BenchmarkPage,
    BenchmarkPublic,
    CostUnitSummary,
    ItemCreate,
    ModelSummary,
    SubtaskCount,
)
from app.schemas.subsets import SubsetCost
from app.services.access import projects
from app.services.access.access import Visibility, check_role
from app.services.access.keys import Principal
from app.services.catalog.benchmark_refs import ambiguous_name
from app.services.platform.caching import MB, BoundedCache
from app.services.platform.pagination import decode_cursor, encode_cursor

DEFAULT_SUBTASK = "all"
MAX_PAGE = 200


def items_hash(ids: Sequence[str], subtasks: Sequence[str], extra: Sequence[object] | None) -> str:
    """sha256 of the ordered item list (ids, subtasks, optional text/metadata)."""
    h = hashlib.sha256()
    h.update(json.dumps([list(ids), list(subtasks)], separators=(",", ":")).encode())
    if extra is not None:
        h.update(json.dumps(list(extra), sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()


def _encode_subtasks(subtasks: Sequence[str]) -> tuple[list[str], bytes]:
    names, codes = np.unique(np.asarray(subtasks, dtype=str), return_inverse=True)
    return [str(n) for n in names], codes.astype("<i4").tobytes()


def create_version(
    session: Session,
    name: str,
    ids: Sequence[str],
    subtasks: Sequence[str | None],
    extra: Sequence[dict | None] | None = None,
    description: str | None = None,
    *,
    project: Project | None = None,
) -> tuple[BenchmarkVersion, bool]:
    """Return ``(version, created)``: the existing version when the same item list exists.

    ``project`` owns a new benchmark (from :func:`creation_project`; default: ``default``); a
    new version of an existing name stays in the project that owns the name."""
    why = ambiguous_name(name)
    if why is not None:
        raise InvalidInput(why, field="name")
    errors = []
    seen: dict[str, int] = {}
    for i, item_id in enumerate(ids):
        if "\x00" in str(item_id):  # every path (sample logs too): an export would drop it
            errors.append(FieldIssue(("items", i, "id"), "an item id cannot contain NUL"))
        elif item_id in seen:
            errors.append(
                FieldIssue(
                    ("items", i, "id"),
                    f"duplicate item id {item_id!r} (also items[{seen[item_id]}])",
                )
            )
        else:
            seen[item_id] = i
    if errors:
        raise InvalidInput(
            f"{len(errors)} duplicate or invalid item id(s)",
            errors=errors[:50],
            errors_total=len(errors),
        )
    subs = [s if s else DEFAULT_SUBTASK for s in subtasks]
    if extra is not None and all(e is None for e in extra):
        extra = None
    content_hash = items_hash(ids, subs, extra)

    benchmarks = BenchmarkRepository(session)
    versions = BenchmarkVersionRepository(session)
    benchmark = benchmarks.get_by_name(name, for_update=True)
    if benchmark is None:
        try:
            benchmark = benchmarks.add(
                Benchmark(
                    name=name,
                    description=description,
                    project_id=(project or projects.default_project(session)).id,
                )
            )
        except IntegrityError:
            raise Conflict(f"benchmark {name!r} is being created concurrently; retry") from None
    else:
        if project is not None and benchmark.project_id != project.id:
            # the caller was checked against another project: never write across projects
            raise Conflict(
                f"benchmark {name!r} belongs to another project; names are unique across projects",
                field="name",
                message="the name is owned by another project",
            )
        existing = versions.get_by_hash(benchmark.id, content_hash)
        if existing is not None:
            return existing, False
        if description is not None:
            benchmark.description = description
    names, codes = _encode_subtasks(subs)
    version = BenchmarkVersion(
        benchmark_id=benchmark.id,
        version=versions.latest_version_number(benchmark.id) + 1,
        content_hash=content_hash,
        n_items=len(ids),
        item_ids=list(ids),
        subtask_names=names,
        subtask_codes=codes,
        items_extra=list(extra) if extra is not None else None,
    )
    try:
        versions.add(version)
    except IntegrityError:  # a concurrent create won the race; the request rolls back
        raise Conflict(f"benchmark {name!r} is being created concurrently; retry") from None
    return version, True


def creation_project(
    session: Session, principal: Principal, name: str, requested: str | None
) -> Project:
    """The project a version of ``name`` is created in, after checking the caller may write it.

    An existing name stays in its project (``write`` there needed: 403 naming it; another
    ``requested`` project is a 409). A new name goes to ``requested``, else to the key's only
    writable project (the ``default`` project for an instance admin without roles, e.g. with
    keys disabled); a key that can write to several must say which (422 naming ``project``).
    """
    repo = BenchmarkRepository(session)
    if "\x00" in name:
        existing = None
    else:
        # held until the request commits: a name created concurrently (by any project) is
        # seen here committed, so the owner check and the insert cannot be raced (issue 39)
        repo.lock_name(name)
        existing = repo.get_by_name(name)
    if existing is not None:
        project = existing.project
        check_role(principal, project, "write")
        if requested is not None and requested != project.name:
            raise Conflict(
                f"benchmark {name!r} belongs to project {project.name!r}; names are unique "
                "across projects",
                field="project",
                message=f"the name is owned by project {project.name!r}",
            )
        return project
    if requested is not None:
        project = projects.get_by_name(session, requested)
    else:
        writable = principal.projects_with("write")
        if len(writable) == 1:
            project = projects.get_by_id(session, writable[0])
        elif not writable and principal.instance_admin:
            project = projects.default_project(session)
        else:
            names = sorted(principal.project_names[p] for p in writable)
            raise InvalidInput(
                "this API key can write to several projects: say which one",
                field="project",
                message=f"one of {', '.join(names)}",
            )
    check_role(principal, project, "write")
    return project


def create_benchmark(
    session: Session, body: BenchmarkCreate, project: Project | None = None
) -> tuple[BenchmarkVersion, bool]:
    items: list[ItemCreate] = body.items
    extra = [
        None
        if it.text is None and it.metadata is None
        else {"text": it.text, "metadata": it.metadata}
        for it in items
    ]
    return create_version(
        session,
        body.name,
        [it.id for it in items],
        [it.subtask for it in items],
        extra,
        body.description,
        project=project,
    )


def create_from_samples(
    session: Session,
    name: str,
    parsed_files: Sequence[ParsedResults],
    *,
    subtask: str = "task",
    description: str | None = None,
    project: Project | None = None,
) -> tuple[BenchmarkVersion, bool]:
    """Items = the sample logs' ``doc_hash``es in file then ``doc_id`` order; subtask = the task
    name (``subtask="task"``) or the doc's subject field (``subtask="subject"``)."""
    ids: list[str] = []
    subs: list[str | None] = []
    for k, parsed in enumerate(parsed_files):
        assert parsed.item_ids is not None
        if subtask == "subject":
            if parsed.subjects is None:
                raise InvalidInput(
                    "the docs have no subject field",
                    field="subtask",
                    message=f"file {k + 1}: no 'subject'/'category' in doc; use subtask=task",
                )
            subs.extend(parsed.subjects.tolist())
        else:
            subs.extend([parsed.task or DEFAULT_SUBTASK] * parsed.n_items)
        ids.extend(parsed.item_ids.tolist())
    return create_version(session, name, ids, subs, None, description, project=project)


def get_version(session: Session, version_id: uuid.UUID) -> BenchmarkVersion:
    version = BenchmarkVersionRepository(session).get(version_id)
    if version is None:
        raise NotFound(f"benchmark {version_id} does not exist")
    return version


@dataclass(frozen=True)
class ItemIndex:
    """A version's items as numpy arrays, with a sorted view for vectorised id lookup."""

    item_ids: np.ndarray
    subtasks: np.ndarray
    sorted_ids: np.ndarray
    order: np.ndarray

    @property
    def n_items(self) -> int:
        return int(self.item_ids.shape[0])

    def positions(self, ids: np.ndarray, *, field: str = "item_ids") -> np.ndarray:
        """Positions of ``ids`` in the item order; InvalidInput naming unknown ids."""
        pos = np.searchsorted(self.sorted_ids, ids)
        pos_c = np.minimum(pos, self.n_items - 1)
        found = self.sorted_ids[pos_c] == ids
        if not found.all():
            missing = ids[~found]
            shown = ", ".join(repr(str(m)) for m in missing[:5])
            raise InvalidInput(
                f"{missing.size} item id(s) are not in this benchmark: {shown}"
                + (" …" if missing.size > 5 else ""),
                errors=[FieldIssue((field,), f"unknown item id {str(m)!r}") for m in missing[:20]],
            )
        return self.order[pos_c]


INDEX_CACHE_BYTES = 64 * MB
_INDEXES: BoundedCache[uuid.UUID, ItemIndex] = BoundedCache("item_indexes", INDEX_CACHE_BYTES)


def item_index(version: BenchmarkVersion) -> ItemIndex:
    """Decoded items of a version; cached per version id (versions are immutable)."""
    hit = _INDEXES.get(version.id)
    if hit is not None:
        return hit
    ids = np.asarray(version.item_ids, dtype=str)
    names = np.asarray(version.subtask_names, dtype=str)
    codes = np.frombuffer(version.subtask_codes, dtype="<i4")
    order = np.argsort(ids, kind="stable")
    index = ItemIndex(item_ids=ids, subtasks=names[codes], sorted_ids=ids[order], order=order)
    for arr in (index.item_ids, index.subtasks, index.sorted_ids, index.order):
        arr.setflags(write=False)
    _INDEXES.put(version.id, index)
    return index


def _subtask_counts(version: BenchmarkVersion) -> list[SubtaskCount]:
    counts = np.bincount(
        np.frombuffer(version.subtask_codes, dtype="<i4"), minlength=len(version.subtask_names)
    )
    return [
        SubtaskCount(name=n, n_items=int(c))
        for n, c in zip(version.subtask_names, counts, strict=True)
    ]


def to_public(version: BenchmarkVersion, n_models: int) -> BenchmarkPublic:
    return BenchmarkPublic(
        id=version.id,
        benchmark_id=version.benchmark_id,
        name=version.benchmark.name,
        version=version.version,
        content_hash=version.content_hash,
        n_items=version.n_items,
        n_models=n_models,
        subtasks=_subtask_counts(version),
        description=version.benchmark.description,
        created_at=version.created_at,
        project=version.benchmark.project.name,
        retired=version.retired_at is not None,
    )


def public(session: Session, version: BenchmarkVersion) -> BenchmarkPublic:
    return to_public(version, ModelResultRepository(session).count_for_version(version.id))


def describe(session: Session, version_id: uuid.UUID) -> BenchmarkDetail:
    version = get_version(session, version_id)
    # Three columns, no ORM objects: this is the cheap read every client polls (issue 26).
    rows = ModelResultRepository(session).accuracy_rows(version_id)
    acc = np.array([accuracy for _, accuracy, _ in rows], dtype=np.float64)
    summary = None
    if acc.size:
        summary = AccuracySummary(
            mean=float(acc.mean()),
            min=float(acc.min()),
            median=float(np.median(acc)),
            max=float(acc.max()),
        )
    public = to_public(version, len(rows))
    return BenchmarkDetail(
        **public.model_dump(),
        models=[
            ModelSummary(name=name, accuracy=accuracy, coverage=n_items / version.n_items)
            for name, accuracy, n_items in rows
        ],
        accuracy=summary,
        costs=cost_summaries(session, version),
    )


def stored_costs(session: Session, version_id: uuid.UUID, n_items: int):
    """``(names, costs, sources)``: the stored models' measured per-item costs.

    ``costs`` has shape (M, 4, n_items), float64, the fields of
    :data:`app.ingest.costs.COST_FIELDS`, NaN where not reported; ``sources`` the distinct
    upload sources. Only models whose upload carried costs are included.
    """
    rows = ModelResultRepository(session).cost_rows(version_id)
    names = [n for n, _, _ in rows]
    shape = (len(COST_FIELDS), n_items)
    mats = [np.frombuffer(b, dtype="<f4").reshape(shape) for _, b, _ in rows]
    costs = np.stack(mats).astype(np.float64) if mats else np.empty((0, *shape))
    return names, costs, sorted({s for _, _, s in rows if s})


def predicted_item_costs(session: Session, version: BenchmarkVersion):
    """``(unit, per-item median filled, sources)`` per unit some stored model reports."""
    _, costs, sources = stored_costs(session, version.id, version.n_items)
    out = []
    for j, unit in enumerate(COST_FIELDS):
        if costs.shape[0] and np.isfinite(costs[:, j, :]).any():
            out.append((unit, item_cost_summary(costs[:, j, :]).filled(), sources))
    return out


def subset_costs(
    session: Session, version: BenchmarkVersion, positions: np.ndarray
) -> list[SubsetCost]:
    """Expected cost of the items ``positions`` per stored unit (mean and sd over the models)."""
    _, costs, sources = stored_costs(session, version.id, version.n_items)
    out = []
    for j, unit in enumerate(COST_FIELDS):
        per_model = costs[:, j, :]
        reports = np.isfinite(per_model).any(axis=1)
        if not reports.any():
            continue
        per_model = per_model[reports]
        median = item_cost_summary(per_model).filled()
        filled = np.where(np.isfinite(per_model), per_model, median[None, :])
        mean, sd = predicted_subset_cost(filled, positions)
        out.append(
            SubsetCost(
                unit=unit,  # type: ignore[arg-type]
                expected=float(mean[0]),
                sd=float(sd[0]),
                source=f"predicted from {int(reports.sum())} stored models ("
                + ", ".join(sources)
                + "): mean over the models of the subset's total; sd over the models",
            )
        )
    return out


def cost_summaries(session: Session, version: BenchmarkVersion) -> list[CostUnitSummary]:
    """Per unit with data: the per-item median over the stored models, summarised over items."""
    _, costs, sources = stored_costs(session, version.id, version.n_items)
    out = []
    for j, unit in enumerate(COST_FIELDS):
        per_model = costs[:, j, :]
        known = np.isfinite(per_model)
        if not known.any():
            continue
        summary = item_cost_summary(per_model)
        med = summary.median[np.isfinite(summary.median)]
        p5, p50, p95 = np.percentile(med, [5, 50, 95])
        out.append(
            CostUnitSummary(
                unit=unit,  # type: ignore[arg-type]
                source="measured on stored models (" + ", ".join(sources) + "); per item the "
                "median over models",
                models=int(known.any(axis=1).sum()),
                items=int(med.size),
                median_per_item=float(p50),
                p5_per_item=float(p5),
                p95_per_item=float(p95),
                full_benchmark=float(summary.filled().sum()),
            )
        )
    return out


def list_benchmarks(
    session: Session,
    *,
    limit: int = 50,
    cursor: str | None = None,
    name: str | None = None,
    visible: Visibility | None = None,
    project: str | None = None,
) -> BenchmarkPage:
    """Versions newest first; ``visible`` limits them to the caller's readable projects
    (None: every one), ``project`` to one project (a project it cannot read lists nothing)."""
    limit = max(1, min(limit, MAX_PAGE))
    after = decode_cursor(cursor) if cursor else None
    versions = BenchmarkVersionRepository(session)
    project_id = None
    if project is not None:
        found = ProjectRepository(session).get_by_name(project) if "\x00" not in project else None
        if found is None:
            return BenchmarkPage(items=[], next_cursor=None)
        project_id = found.id
    rows = list(
        versions.page(
            limit=limit + 1,
            after=after,
            name=name,
            project_ids=None if visible is None or visible.everything else visible.project_ids,
            project_id=project_id,
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    counts = versions.model_counts([v.id for v in rows])
    return BenchmarkPage(
        items=[to_public(v, counts.get(v.id, 0)) for v in rows],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


def set_retired(session: Session, version: BenchmarkVersion, retired: bool) -> bool:
    """Retire (hide from name resolution) or un-retire a version; False when already so.

    The version row is locked exclusively first: an upload into it in flight finishes before
    (or, arriving later, sees the version retired: :func:`results.lock_version_for_write`)."""
    BenchmarkVersionRepository(session).lock(version.id, exclusive=True)
    if (version.retired_at is not None) == retired:
        return False
    version.retired_at = utcnow() if retired else None
    session.flush()
    return True
