"""Subsets: request (content-addressed, idempotent), build (the ``subset`` job kind), read, export.

A subset's id is the sha256 of its canonical request (:func:`subset_id`): benchmark version,
method, size, canonical params JSON, seed, and the sorted source models with the content hash of
their stored results (so replaced results give a new id). Methods that do not use source models
(``random``, ``subtask_stratified``) record an empty source set: their subset depends on the
items and the seed only.

Non-probability subsets (DPP, Anchor Points, tinyBenchmarks) built on at least 20 source models
also store, in their fitted state, each calibrated estimator's out-of-fold values on the source
models (:func:`app.core.scoring.crossfit.with_out_of_fold`: the selector refitted on 4/5 of
them, five times): the scores' reference-calibrated intervals are cross-fitted from them.

Subsets are immutable, so their decoded form and rendered exports are cached per process.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.results import Selection
from app.core.scoring.crossfit import crossfit_applies, with_out_of_fold
from app.core.selectors import SELECTORS, make_selector
from app.core.selectors.dpp import guaranteed_size
from app.db.models.benchmark import BenchmarkVersion
from app.db.models.job import Job
from app.db.models.subset import Subset
from app.db.repositories.subsets import SubsetRepository, result_fingerprints
from app.errors import Conflict, FieldIssue, InvalidInput, NotFound
from app.schemas.subsets import (
    SubsetCreate,
    SubsetItem,
    SubsetProvenance,
    SubsetPublic,
)
from app.services.catalog.benchmarks import get_version, item_index, subset_costs
from app.services.catalog.matrices import doc_ids
from app.services.catalog.results import load_matrix
from app.services.platform import jobs as job_service
from app.services.platform.caching import MB, BoundedCache
from app.services.platform.spreadsheet import safe_text
from app.services.selection import drift

JOB_KIND = "subset"
EXCLUDE_KEY = "exclude"  # recorded in the subset's params when items were excluded by flag
ID_LENGTH = 64  # sha256 hex
MIN_ID_PREFIX = 6  # shortest prefix resolved (the CLI and the pages show 12)
PREFIX_CANDIDATES = 10  # candidates listed for an ambiguous prefix
_HEX = re.compile(r"[0-9a-f]+")
ExportFormat = Literal["json", "ids", "csv", "lm-eval", "inspect"]
_SUBSET_ADAPTER: TypeAdapter[Any] = TypeAdapter(SubsetCreate)


# --- identity -----------------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def subset_id(
    version_id: uuid.UUID,
    method: str,
    size: int,
    params: dict[str, Any],
    seed: int,
    sources: list[tuple[uuid.UUID, str]],
    exclude: tuple[str, ...] = (),
) -> str:
    """sha256 (hex) of the canonical request; ``sources`` = (model id, results hash) pairs;
    ``exclude`` (item-health flags) enters only when given, so older ids are unchanged."""
    payload: dict[str, Any] = {
        "benchmark_version": str(version_id),
        "method": method,
        "size": int(size),
        "params": params,
        "seed": int(seed),
        "sources": sorted([str(m), h] for m, h in sources),
    }
    if exclude:
        payload["exclude"] = list(exclude)
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


@dataclass(frozen=True)
class ResolvedRequest:
    version: BenchmarkVersion
    method: str
    size: int
    params: dict[str, Any]
    seed: int
    source_names: list[str]
    source_keys: list[tuple[uuid.UUID, str]]
    exclude: tuple[str, ...] = ()
    excluded: np.ndarray | None = None  # positions dropped from the candidates

    @property
    def id(self) -> str:
        return subset_id(
            self.version.id,
            self.method,
            self.size,
            self.params,
            self.seed,
            self.source_keys,
            self.exclude,
        )


def resolve_request(
    session: Session,
    version_id: uuid.UUID,
    method: str,
    size: int,
    params: dict[str, Any],
    seed: int,
    source_models: list[str] | None,
    exclude: str | list[str] | None = None,
) -> ResolvedRequest:
    """Validate a subset request against the benchmark and fix its source-model set (and the
    items ``exclude`` drops: those with any of the item-health flags, ``"flagged"`` = all)."""
    from app.core.items.health import FLAGS
    from app.services.catalog.items import check_flags, excluded_positions

    version = get_version(session, version_id)
    if size > version.n_items:
        raise InvalidInput(
            f"size {size} exceeds the benchmark's {version.n_items} items",
            field="size",
            message=f"at most {version.n_items}",
        )
    flags = tuple(FLAGS if exclude == "flagged" else check_flags(exclude or [], field="exclude"))
    excluded = excluded_positions(session, version, list(flags)) if flags else None
    if excluded is not None and size > version.n_items - excluded.size:
        left = version.n_items - excluded.size
        raise InvalidInput(
            f"size {size} exceeds the {left} items left after excluding {list(flags)}",
            field="size",
            message=f"at most {left}",
        )
    if method == "dpp":  # its trimming drops items: refuse what would fail in the job
        candidates = version.n_items - (excluded.size if excluded is not None else 0)
        cap = guaranteed_size(candidates)
        if size > cap:
            raise InvalidInput(
                f"size {size}: the DPP draws at most {cap} of {candidates} items (its 1%/99% "
                "trimming of up to 4 components drops the rest)",
                field="size",
                message=f"at most {cap} for method dpp",
            )
    names: list[str] = []
    keys: list[tuple[uuid.UUID, str]] = []
    if SELECTORS[method].uses_sources:
        rows = result_fingerprints(session, version.id)
        full = {r[0]: r for r in rows if r[3] == version.n_items}
        if source_models is None:
            chosen = list(full.values())
            if not chosen:
                raise Conflict(
                    f"method {method!r} fits on source models, and no model has full results "
                    "on this benchmark; push some first (`benchslice push --benchmark NAME "
                    "PATH`; API: POST /v1/benchmarks/{benchmark}/results)"
                )
        else:
            known = {r[0] for r in rows}
            errors = []
            for i, name in enumerate(source_models):
                if name not in known:
                    errors.append(
                        FieldIssue(("source_models", i), f"no results for model {name!r}")
                    )
                elif name not in full:
                    errors.append(
                        FieldIssue(("source_models", i), f"model {name!r} lacks full results")
                    )
            if errors:
                raise InvalidInput(
                    f"{len(errors)} unusable source model(s)",
                    errors=errors[:50],
                    errors_total=len(errors),
                )
            chosen = [full[n] for n in sorted(set(source_models))]
        names = [r[0] for r in chosen]
        keys = [(r[1], r[2]) for r in chosen]
        drift.check_sources(
            method, len(names), field="method" if source_models is None else "source_models"
        )
    return ResolvedRequest(
        version, method, int(size), dict(params), int(seed), names, keys, flags, excluded
    )


# --- request side -------------------------------------------------------------------------------


LEGACY_VERSION_KEY = "benchmark_id"


def job_version_id(params: dict[str, Any]) -> Any:
    """The benchmark version of a ``subset`` job: ``version_id``, or ``benchmark_id`` as jobs
    stored before the rename (and older clients) call it."""
    return params.get("version_id", params.get(LEGACY_VERSION_KEY))


def validate_job_params(params: dict[str, Any]) -> dict[str, Any]:
    """Structure of a ``subset`` job's params (the benchmark is checked when the job runs)."""
    raw = dict(params)
    bench = job_version_id(raw)
    raw.pop("version_id", None)
    raw.pop(LEGACY_VERSION_KEY, None)
    errors = []
    try:
        bench_id = str(uuid.UUID(str(bench)))
    except ValueError:
        bench_id = None
        errors.append(FieldIssue(("params", "version_id"), "a benchmark version id"))
    raw.pop("seed", None)
    try:
        body = _SUBSET_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        errors += [FieldIssue(("params", *e["loc"]), e["msg"]) for e in exc.errors()]
        body = None
    if errors or body is None:
        raise InvalidInput("invalid subset job parameters", errors=errors)
    return {
        "version_id": bench_id,
        "method": body.method,
        "size": body.size,
        "params": body.params.model_dump(),
        "source_models": body.source_models,
        **({"exclude": body.exclude} if body.exclude else {}),
    }


def request_subset(
    session: Session, version_id: uuid.UUID, body: Any
) -> tuple[Subset | None, Job | None]:
    """Return ``(existing subset, None)`` when the content-addressed subset exists, else
    ``(None, job)``: the queued or running job already building it (identical requests share
    one job, across API processes), or a new queued one, which the caller enqueues after commit
    (only a new one: :func:`app.services.platform.jobs.take_created`; the runner would run a running job
    published twice in two workers at once)."""
    seed = job_service.new_seed() if body.seed is None else int(body.seed)
    params = body.params.model_dump()
    req = resolve_request(
        session,
        version_id,
        body.method,
        body.size,
        params,
        seed,
        body.source_models,
        getattr(body, "exclude", None),
    )
    sid = req.id
    existing = SubsetRepository(session).get(sid)
    if existing is not None:
        return existing, None
    job_params: dict[str, Any] = {
        "version_id": str(version_id),
        "method": req.method,
        "size": req.size,
        "params": params,
        "source_models": req.source_names if SELECTORS[req.method].uses_sources else None,
    }
    if req.exclude:
        job_params["exclude"] = list(req.exclude)
    job_params["subset_id"] = sid
    # single flight: identical requests (same subset id, so same seed) share the active job
    job, created = job_service.create_or_join_job(session, JOB_KIND, job_params, seed=seed)
    if created:
        # an identical job may have finished since the check above (it then left the dedupe
        # index): its subset is committed with its status, so it is visible now
        existing = SubsetRepository(session).get(sid)
        if existing is not None:
            job_service.discard_new_job(session, job)
            return existing, None
    return None, job


# --- worker side --------------------------------------------------------------------------------


def pack_fitted(fitted: Any) -> bytes | None:
    if not fitted:
        return None
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in dict(fitted).items()})
    return buf.getvalue()


def unpack_fitted(blob: bytes | None) -> dict[str, np.ndarray]:
    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def build_subset(
    session: Session, req: ResolvedRequest, job_id: uuid.UUID | None
) -> tuple[Subset, bool]:
    """Fit, select with the request's seed and store (flush only). ``(subset, created)``;
    an existing subset with the same id is returned untouched."""
    repo = SubsetRepository(session)
    sid = req.id
    found = repo.get(sid)
    if found is not None:
        return found, False
    index = item_index(req.version)
    selector = make_selector(req.method, **req.params)
    candidates = None
    if req.excluded is not None:
        candidates = np.setdiff1d(np.arange(index.n_items), req.excluded)
    mat = None
    if SELECTORS[req.method].uses_sources:
        mat = load_matrix(session, req.version.id, req.source_names)
        selector.fit(
            mat.correct, confidence=mat.confidence, subtasks=index.subtasks, candidates=candidates
        )
    else:  # the selection ignores results: one placeholder row carries the item axis
        selector.fit(np.zeros((1, index.n_items)), subtasks=index.subtasks, candidates=candidates)
    selection = selector.select(req.size, rng=req.seed)
    if mat is not None and crossfit_applies(req.method, len(req.source_names)):
        # out-of-fold values of the source models: the scores' cross-fitted calibration
        selection = with_out_of_fold(
            selection,
            mat.correct,
            seed=req.seed,
            confidence=mat.confidence,
            subtasks=index.subtasks,
            candidates=candidates,
        )
    row = Subset(
        id=sid,
        benchmark_version_id=req.version.id,
        method=req.method,
        size_requested=req.size,
        size=selection.size,
        params={**req.params, EXCLUDE_KEY: list(req.exclude)} if req.exclude else req.params,
        seed=req.seed,
        estimator=selection.estimator,
        estimate_on=selection.estimate_on,
        signal=selection.signal,
        n_candidates=selection.n_candidates,
        source_models=req.source_names,
        indices=selection.indices.astype("<i8").tobytes(),
        weights=selection.weights.astype("<f8").tobytes(),
        fitted=pack_fitted(selection.fitted),
        job_id=job_id,
    )
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:  # the same subset was stored concurrently: reuse it
        found = repo.get(sid)
        if found is None:
            raise
        return found, False
    return row, True


def run_subset_job(session: Session, job: Job, ctx: job_service.JobContext) -> None:
    params = job.params
    ctx.progress(0, 1)
    req = resolve_request(
        session,
        uuid.UUID(str(job_version_id(params))),
        params["method"],
        int(params["size"]),
        dict(params.get("params") or {}),
        int(job.seed),
        params.get("source_models"),
        params.get("exclude"),
    )
    subset, created = build_subset(session, req, job.id)
    job.result = {"subset_id": subset.id, "created": created, "size": subset.size}


# --- read side ----------------------------------------------------------------------------------


def resolve_subset_id(session: Session, sid: str) -> str:
    """The full id of the subset ``sid`` names: the id itself, or a unique prefix of at least
    :data:`MIN_ID_PREFIX` hex digits (the CLI and the pages show the first 12). 404 when none
    matches; 422 listing the candidates when several do."""
    if "\x00" in sid:  # Postgres text cannot hold NUL: no stored id has one (was a 500 on /ui)
        raise NotFound(f"subset {sid!r} does not exist")
    repo = SubsetRepository(session)
    if len(sid) == ID_LENGTH or len(sid) < MIN_ID_PREFIX or not _HEX.fullmatch(sid):
        if repo.exists(sid):
            return sid
        raise NotFound(f"subset {sid} does not exist{_prefix_hint(sid)}")
    found = repo.ids_starting(sid, PREFIX_CANDIDATES + 1)
    if len(found) == 1:
        return found[0]
    if not found:
        raise NotFound(f"no subset id starts with {sid}")
    shown = ", ".join(found[:PREFIX_CANDIDATES])
    more = " …" if len(found) > PREFIX_CANDIDATES else ""
    raise InvalidInput(
        f"{sid} is the start of several subset ids ({shown}{more}); give more digits",
        field="subset_id",
        message=f"ambiguous prefix: {shown}{more}",
    )


def _prefix_hint(sid: str) -> str:
    if _HEX.fullmatch(sid) and len(sid) < MIN_ID_PREFIX:
        return f" (a short id needs at least {MIN_ID_PREFIX} hex digits)"
    return ""


def get_subset(session: Session, sid: str, *, with_fitted: bool = False) -> Subset:
    """The subset with id ``sid`` (or a unique prefix of it, :func:`resolve_subset_id`)."""
    full = resolve_subset_id(session, sid)
    repo = SubsetRepository(session)
    row = repo.get_with_fitted(full) if with_fitted else repo.get(full)
    if row is None:
        raise NotFound(f"subset {sid} does not exist")
    return row


def to_selection(row: Subset) -> Selection:
    """The stored subset as the engine's frozen :class:`Selection` (fitted state included)."""
    return Selection(
        method=row.method,
        indices=np.frombuffer(row.indices, dtype="<i8"),
        weights=np.frombuffer(row.weights, dtype="<f8"),
        estimator=row.estimator,
        estimate_on=row.estimate_on,
        signal=row.signal,
        n_requested=row.size_requested,
        n_candidates=row.n_candidates,
        seed=int(row.seed),
        params=selector_params(row),
        fitted=unpack_fitted(row.fitted),
    )


def selector_params(row: Subset) -> dict[str, Any]:
    """The subset's selector parameters (without the recorded ``exclude``)."""
    return {k: v for k, v in (row.params or {}).items() if k != EXCLUDE_KEY}


def to_public(row: Subset, version: BenchmarkVersion) -> SubsetPublic:
    index = item_index(version)
    idx = np.frombuffer(row.indices, dtype="<i8")
    w = np.frombuffer(row.weights, dtype="<f8")
    order = np.argsort(idx, kind="stable")
    idx, w = idx[order], w[order]
    docs = doc_ids(version)[idx]
    cls = SELECTORS.get(row.method)
    items = [
        SubsetItem(position=int(p), item_id=str(i), subtask=str(s), doc_id=int(d), weight=float(x))
        for p, i, s, d, x in zip(
            idx.tolist(),
            index.item_ids[idx].tolist(),
            index.subtasks[idx].tolist(),
            docs.tolist(),
            w.tolist(),
            strict=True,
        )
    ]
    return SubsetPublic(
        id=row.id,
        version_id=version.id,
        benchmark=version.benchmark.name,
        benchmark_version=version.version,
        method=row.method,
        size=row.size,
        estimator=row.estimator,
        estimators=list(cls.estimators) if cls is not None else [row.estimator],
        estimate_on=row.estimate_on,  # type: ignore[arg-type]
        items=items,
        provenance=SubsetProvenance(
            method=row.method,
            params=selector_params(row),
            seed=int(row.seed),
            size_requested=row.size_requested,
            source_models=list(row.source_models or []),
            signal=row.signal,
            confidence_used=row.signal == "confidence",
            n_candidates=row.n_candidates,
            exclude=list((row.params or {}).get(EXCLUDE_KEY, [])),
            job_id=row.job_id,
        ),
        created_at=row.created_at,
        warnings=drift.source_warnings(row.method, row.source_models),
    )


MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "ids": "application/json",
    "csv": "text/csv; charset=utf-8",
    "lm-eval": "application/json",
    "inspect": "application/json",
}


def render(public: SubsetPublic, fmt: ExportFormat) -> bytes:
    """One export of a subset (items sorted by position).

    * ``json``: the full :class:`SubsetPublic`;
    * ``ids``: the external item ids, a JSON list;
    * ``csv``: ``item_id,doc_id,position,subtask,weight``;
    * ``lm-eval``: ``{task: [doc_id, ...]}`` with doc ids sorted, the JSON accepted by
      ``lm_eval --samples`` (task = the item's subtask, which is the lm-eval task name for
      benchmarks created from sample logs);
    * ``inspect``: ``{task: [sample_id, ...]}``, the ids for ``inspect eval --sample-id`` per
      task (an item ``{task}/{id}`` of a benchmark made from Inspect logs is sample ``id``).
    """
    if fmt == "json":
        return public.model_dump_json().encode()
    if fmt == "ids":
        return json.dumps([it.item_id for it in public.items]).encode()
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["item_id", "doc_id", "position", "subtask", "weight"])
        for it in public.items:
            # ids and subtasks come from uploads: never a formula in a spreadsheet
            item_id, subtask = safe_text(it.item_id), safe_text(it.subtask)
            writer.writerow([item_id, it.doc_id, it.position, subtask, repr(it.weight)])
        return buf.getvalue().encode()
    if fmt == "inspect":
        samples: dict[str, list[str]] = {}
        for it in public.items:
            prefix = f"{it.subtask}/"
            sid = it.item_id[len(prefix) :] if it.item_id.startswith(prefix) else it.item_id
            samples.setdefault(it.subtask, []).append(sid)
        return json.dumps(dict(sorted(samples.items()))).encode()
    tasks: dict[str, list[int]] = {}
    for it in public.items:
        tasks.setdefault(it.subtask, []).append(it.doc_id)
    return json.dumps({k: sorted(v) for k, v in sorted(tasks.items())}).encode()


RENDER_CACHE_BYTES = 64 * MB
# (subset id, format) -> (rendering, when the subset's existence was last confirmed)
_RENDERED: BoundedCache[tuple[str, str], tuple[bytes, float]] = BoundedCache(
    "subset_renderings", RENDER_CACHE_BYTES
)
RENDER_REVALIDATE_SECONDS = 60.0


def cached_rendering(sid: str, fmt: ExportFormat) -> bytes | None:
    """The cached rendering when it was (re)validated within the window, else None (no I/O:
    callable from the event loop)."""
    hit = _RENDERED.get((sid, fmt))
    if hit is not None and time.monotonic() - hit[1] < RENDER_REVALIDATE_SECONDS:
        return hit[0]
    return None


def rendered_subset(session: Session, sid: str, fmt: ExportFormat) -> bytes:
    """An export of a stored subset, cached per process (LRU).

    Subsets are immutable and the API never deletes one (only removing its benchmark version
    out of band does), so a cached rendering is served without touching the database; its
    existence is re-checked by primary key at most every ``RENDER_REVALIDATE_SECONDS``, which
    bounds how long a process may keep serving a subset deleted behind its back.
    """
    if len(sid) != ID_LENGTH:  # a short id: resolved every time (a new subset may share it)
        sid = resolve_subset_id(session, sid)
    key = (sid, fmt)
    now = time.monotonic()
    hit = _RENDERED.get(key)
    if hit is not None:
        data, checked = hit
        if now - checked < RENDER_REVALIDATE_SECONDS:
            return data
        if not SubsetRepository(session).exists(sid):
            _RENDERED.pop(key)
            raise NotFound(f"subset {sid} does not exist")
        _RENDERED.put(key, (data, now))
        return data
    row = get_subset(session, sid)
    version = get_version(session, row.benchmark_version_id)
    public = to_public(row, version)
    if fmt == "json":
        positions = np.array([it.position for it in public.items], dtype=np.int64)
        public = public.model_copy(update={"cost": subset_costs(session, version, positions)})
    data = render(public, fmt)
    _RENDERED.put(key, (data, now))
    return data
