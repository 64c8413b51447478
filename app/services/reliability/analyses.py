"""MDAD analyses, request side: validate and queue (flush only; the caller commits, then
enqueues), read, and the stored agreement curves other services answer from
(:func:`latest_analysis`). The job that computes an analysis is :mod:`app.services.reliability.analysis_jobs`;
the stored forms are :mod:`app.services.reliability.analysis_codecs`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.orm import Session, object_session

from app.core.results import AgreementCurve, MDADResult, ProtocolResult
from app.core.selectors import SELECTORS
from app.core.selectors.dpp import guaranteed_size
from app.db.base import utcnow
from app.db.models import Analysis, BenchmarkVersion, Job
from app.db.repositories.analyses import AnalysisRepository
from app.enums import JobStatus
from app.errors import Conflict, FieldIssue, InvalidInput, NotFound
from app.schemas.analyses import (
    AgreementCurvePublic,
    AnalysisCreate,
    AnalysisLinks,
    AnalysisPage,
    AnalysisPublic,
    AnalysisResult,
    MDADCell,
    Recommendation,
)
from app.schemas.jobs import JobProgress
from app.services.catalog.benchmarks import get_version
from app.services.platform import jobs as job_service
from app.services.platform.pagination import decode_cursor, encode_cursor
from app.services.reliability.analysis_codecs import mdad_from_json, protocol_from_bytes

JOB_KIND = "analysis"
MAX_PAGE = 100


# --- the stored analysis as engine objects (what verdicts and plans read) -----------------------


@dataclass(frozen=True)
class StoredAnalysis:
    """A succeeded analysis rebuilt from its stored JSON as the engine's own result types.

    Attributes
    ----------
    id, job_id, benchmark_version_id : UUID
    created_at : datetime
    mode : str
        ``"robust"`` (curves carry an isotonic ``fitted`` P(same order) and its band) or
        ``"paper"``.
    methods : tuple of str
    sizes : tuple of int
        Evaluated subset sizes, ascending as requested.
    runs, n_sources, n_targets, seed : int
    threshold, gap : float
    cells : tuple of MDADResult
        One per (method, n, split), each with its :class:`AgreementCurve` in ``curve``.
    recommendation : Recommendation
    """

    id: uuid.UUID
    job_id: uuid.UUID
    benchmark_version_id: uuid.UUID
    created_at: datetime
    mode: str
    methods: tuple[str, ...]
    sizes: tuple[int, ...]
    runs: int
    n_sources: int
    n_targets: int
    seed: int
    threshold: float
    gap: float
    cells: tuple[MDADResult, ...]
    recommendation: Recommendation
    _index: Mapping[tuple[str, int, str], MDADResult] = field(repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(c.method, c.n, c.split): c for c in self.cells})

    def cell(self, method: str, n: int, split: str = "seen") -> MDADResult:
        """The MDAD result (with its curve) of one evaluated cell; ``KeyError`` if absent."""
        return self._index[(method, int(n), split)]

    def curve(self, method: str, n: int, split: str = "seen") -> AgreementCurve:
        curve = self.cell(method, n, split).curve
        assert curve is not None
        return curve

    def mdads(self, method: str, split: str = "seen") -> np.ndarray:
        """MDAD at each of :attr:`sizes` (NaN where the threshold is not reached)."""
        return np.array(
            [
                c.mdad
                if (c := self.cell(method, n, split)).reached and c.mdad is not None
                else np.nan
                for n in self.sizes
            ],
            dtype=np.float64,
        )


def latest_analysis(
    session: Session,
    benchmark_version_id: uuid.UUID,
    methods: Sequence[str] | None = None,
    *,
    mode: str | None = "robust",
) -> StoredAnalysis | None:
    """The newest succeeded analysis of a benchmark version covering ``methods``.

    Parameters
    ----------
    session : Session
    benchmark_version_id : UUID
    methods : sequence of str, optional
        Every one must have been analysed (default: any analysis).
    mode : {"robust", "paper"} or None
        Only analyses of this mode (default robust, whose curves are monotone); None: any.

    Returns
    -------
    StoredAnalysis or None
        None when no such analysis exists (callers answer 409 naming the analysis to run).
    """
    wanted = set(methods or ())
    for row in AnalysisRepository(session).succeeded(benchmark_version_id, mode):
        if wanted <= set(row.methods):
            return stored_analysis(row)
    return None


def analysed_methods(session: Session, benchmark_version_id: uuid.UUID) -> set[str]:
    """The methods a verdict or plan can answer from a stored robust analysis."""
    return AnalysisRepository(session).succeeded_methods(benchmark_version_id, "robust")


def stored_analysis(row: Analysis) -> StoredAnalysis:
    result = row.result
    if result is None:
        raise ValueError(f"analysis {row.id} has no result yet")
    return StoredAnalysis(
        id=row.id,
        job_id=row.job_id,
        benchmark_version_id=row.benchmark_version_id,
        created_at=row.created_at,
        mode=row.mode,
        methods=tuple(row.methods),
        sizes=tuple(int(n) for n in row.sizes),
        runs=row.runs,
        n_sources=row.n_sources,
        n_targets=row.n_targets,
        seed=int(row.seed),
        threshold=float(row.threshold),
        gap=float(row.gap),
        cells=tuple(mdad_from_json(c) for c in result["cells"]),
        recommendation=Recommendation.model_validate(result["recommendation"]),
    )


# --- request side ----------------------------------------------------------------------------------


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Benchmark-independent checks (the job kind's params validator); raises 422 naming fields."""
    try:
        body = AnalysisCreate.model_validate(
            {k: v for k, v in params.items() if k not in {"benchmark_version_id", "seed"}}
        )
    except ValueError as exc:
        raise InvalidInput("invalid analysis parameters", errors=_pydantic_errors(exc)) from None
    errors = [
        FieldIssue(("methods", i), f"unknown method {name!r}; choose from {sorted(SELECTORS)}")
        for i, name in enumerate(body.methods)
        if name not in SELECTORS
    ]
    if len(set(body.methods)) != len(body.methods):
        errors.append(FieldIssue(("methods",), "methods must be distinct"))
    if len(set(body.sizes)) != len(body.sizes):
        errors.append(FieldIssue(("sizes",), "sizes must be distinct"))
    errors += [
        FieldIssue(("sizes", i), "sizes must be >= 1") for i, n in enumerate(body.sizes) if n < 1
    ]
    if errors:
        raise InvalidInput("invalid analysis parameters", errors=errors)
    try:
        version_id = uuid.UUID(str(params.get("benchmark_version_id")))
    except ValueError:
        raise InvalidInput(
            "invalid analysis parameters",
            field="benchmark_version_id",
            message="the benchmark version's id",
        ) from None
    out = body.model_dump(exclude={"seed"})
    out["sizes"] = sorted(out["sizes"])
    out["benchmark_version_id"] = str(version_id)
    return out


def _pydantic_errors(exc: Exception) -> list[FieldIssue]:
    errs = getattr(exc, "errors", None)
    if not callable(errs):
        return [FieldIssue((), str(exc))]
    return [FieldIssue(tuple(e["loc"]), e["msg"]) for e in errs()]


def seen_half(version: BenchmarkVersion) -> int:
    """Items in the seen half: sum over subtasks of floor(n_s / 2)."""
    codes = np.frombuffer(version.subtask_codes, dtype="<i4")
    return int((np.bincount(codes) // 2).sum())


def seen_per_subtask(version: BenchmarkVersion) -> np.ndarray:
    """Seen-half items of each subtask (floor(n_s / 2)), subtasks with items only."""
    counts = np.bincount(np.frombuffer(version.subtask_codes, dtype="<i4")) // 2
    return counts[counts > 0]


def check_against_benchmark(
    params: Mapping[str, Any],
    n_models: int,
    n_seen: int,
    per_subtask: np.ndarray | None = None,
) -> None:
    """The analysis' split and sizes against the benchmark (at request time and again when the
    job runs); raises 422 naming the fields.

    ``subtask_stratified`` (equal allocation, its default) draws n / k items from each of the k
    subtasks' seen halves: sizes above k x the smallest half would fail in the worker, so they
    are refused here (``per_subtask``: :func:`seen_per_subtask`)."""
    errors = []
    if params["n_sources"] + params["n_targets"] > n_models:
        errors.append(
            FieldIssue(
                ("n_sources",),
                f"n_sources + n_targets = {params['n_sources'] + params['n_targets']} "
                f"exceeds the {n_models} models with results on every item",
            )
        )
    errors += [
        FieldIssue(("sizes", i), f"size {n} exceeds the seen half ({n_seen} items)")
        for i, n in enumerate(params["sizes"])
        if n > n_seen
    ]
    methods = params.get("methods", ())
    if "dpp" in methods:  # its trimming drops items: refuse what would fail in the job
        cap = guaranteed_size(n_seen)
        errors += [
            FieldIssue(
                ("sizes", i),
                f"size {n}: the DPP draws at most {cap} of the seen half's {n_seen} items (its "
                "1%/99% trimming of up to 4 components drops the rest)",
            )
            for i, n in enumerate(params["sizes"])
            if cap < n <= n_seen
        ]
    if per_subtask is not None and per_subtask.size > 1 and "subtask_stratified" in methods:
        cap = int(per_subtask.size * per_subtask.min())
        errors += [
            FieldIssue(
                ("sizes", i),
                f"size {n} needs about {-(-n // per_subtask.size)} items from each of the "
                f"{per_subtask.size} subtasks for subtask_stratified (equal allocation); the "
                f"smallest subtask has {int(per_subtask.min())} in the seen half: at most {cap}",
            )
            for i, n in enumerate(params["sizes"])
            if cap < n <= n_seen
        ]
    if errors:
        raise InvalidInput(
            "the analysis does not fit this benchmark: " + "; ".join(e.message for e in errors),
            errors=errors,
        )


def new_analysis_row(session: Session, job: Job) -> Analysis:
    p = job.params
    version = get_version(session, uuid.UUID(p["benchmark_version_id"]))
    row = Analysis(
        benchmark_version_id=version.id,
        job_id=job.id,
        methods=list(p["methods"]),
        sizes=list(p["sizes"]),
        runs=int(p["runs"]),
        n_sources=int(p["n_sources"]),
        n_targets=int(p["n_targets"]),
        mode=p["mode"],
        seed=int(job.seed),
        threshold=float(p["threshold"]),
        gap=float(p["gap"]),
        created_at=utcnow(),
    )
    session.add(row)
    return row


def create_analysis(
    session: Session, benchmark_version_id: uuid.UUID, body: AnalysisCreate
) -> Analysis:
    """Validate against the benchmark, insert the job (queued, seed fixed) and the analysis row;
    with an identical request's job still queued or running, return that job's analysis instead.

    Flush only: the caller commits, then enqueues the job.
    """
    version = get_version(session, benchmark_version_id)
    params = validate_params(
        {**body.model_dump(exclude={"seed"}), "benchmark_version_id": str(version.id)}
    )
    n_models = AnalysisRepository(session).full_coverage_models(version.id)
    check_against_benchmark(params, n_models, seen_half(version), seen_per_subtask(version))
    # single flight: an identical request (same params and seed) gets the queued/running job's
    # analysis; progress_total is known up front (clients see "0 / runs" while queued)
    job, created = job_service.create_or_join_job(
        session, JOB_KIND, params, body.seed, progress_total=params["runs"]
    )
    repo = AnalysisRepository(session)
    if not created:
        joined = repo.get_by_job(job.id)
        if joined is not None:
            return joined
    analysis = new_analysis_row(session, job)
    repo.add(analysis)
    analysis.job = job
    return analysis


def get_analysis(session: Session, analysis_id: uuid.UUID) -> Analysis:
    row = AnalysisRepository(session).get_with_result(analysis_id)
    if row is None:
        raise NotFound(f"analysis {analysis_id} does not exist")
    return row


def get_stored(session: Session, analysis_id: uuid.UUID) -> tuple[Analysis, StoredAnalysis]:
    """A succeeded analysis (409 while it is not)."""
    row = get_analysis(session, analysis_id)
    if row.job.status is not JobStatus.succeeded or row.result is None:
        status = row.job.status.value
        fix = (
            f"wait for it: `benchslice jobs wait {row.job_id}` (API: GET /v1/jobs/{row.job_id})"
            if status in ("queued", "running")
            else "run it again: `benchslice analyze --benchmark NAME …` "
            "(API: POST /v1/benchmarks/{benchmark}/analyses)"
        )
        raise Conflict(
            f"analysis {analysis_id} is {status}; its results exist once it succeeded: {fix}"
        )
    return row, stored_analysis(row)


def list_analyses(
    session: Session,
    benchmark_version_id: uuid.UUID,
    *,
    limit: int = 20,
    cursor: str | None = None,
    status: JobStatus | None = None,
) -> AnalysisPage:
    version = get_version(session, benchmark_version_id)
    limit = max(1, min(limit, MAX_PAGE))
    before = decode_cursor(cursor) if cursor else None
    rows = list(
        AnalysisRepository(session).page(version.id, limit=limit + 1, before=before, status=status)
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return AnalysisPage(
        items=[to_public(r, version, with_result=False) for r in rows],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


def to_public(
    row: Analysis, version: BenchmarkVersion | None = None, *, with_result: bool = True
) -> AnalysisPublic:
    job: Job = row.job
    base = f"/v1/analyses/{row.id}"
    result = None
    if with_result and job.status is JobStatus.succeeded and row.result is not None:
        result = _result_public(row.result)
    return AnalysisPublic(
        id=row.id,
        version_id=row.benchmark_version_id,
        benchmark_name=(version.benchmark.name if version is not None else _name(row)),
        job_id=row.job_id,
        status=job.status,
        progress=JobProgress(done=job.progress_done, total=job.progress_total),
        error=job.error,
        methods=list(row.methods),
        sizes=list(row.sizes),
        runs=row.runs,
        n_sources=row.n_sources,
        n_targets=row.n_targets,
        mode=row.mode,  # type: ignore[arg-type]
        seed=int(row.seed),
        gap=row.gap,
        threshold=row.threshold,
        created_at=row.created_at,
        finished_at=row.finished_at,
        links=AnalysisLinks(
            self=base,
            job=f"/v1/jobs/{row.job_id}",
            mdad_plot=f"{base}/plots/mdad.svg",
            agreement_plot=f"{base}/plots/agreement.svg?method={row.methods[0]}&n={row.sizes[0]}",
        ),
        result=result,
    )


def _name(row: Analysis) -> str:
    session = object_session(row)
    assert session is not None
    return get_version(session, row.benchmark_version_id).benchmark.name


def _result_public(result: Mapping[str, Any]) -> AnalysisResult:
    cells, curves = [], []
    for c in result["cells"]:
        cells.append(MDADCell.model_validate({k: v for k, v in c.items() if k != "curve"}))
        cu = c["curve"]
        if cu is not None:
            curves.append(
                AgreementCurvePublic(
                    method=c["method"],
                    n=c["n"],
                    split=c["split"],
                    kind=cu["kind"],
                    max_gap=cu["max_gap"],
                    gap_low=cu["gaps"],
                    gap_high=cu["gap_upper"],
                    n_pairs=cu["n_pairs"],
                    p_same=cu["p_same"],
                    p_tie=cu["p_tie"],
                    p_reversed=cu["p_reversed"],
                    fitted=cu["fitted"],
                    band_low=cu["band_low"],
                    band_high=cu["band_high"],
                )
            )
    return AnalysisResult(
        models_used=result["models_used"],
        n_items=result["n_items"],
        confidence_used=result["confidence_used"],
        seconds=result["seconds"],
        executed_by=result.get("executed_by", []),
        mdad=cells,
        curves=curves,
        recommendation=Recommendation.model_validate(result["recommendation"]),
    )


def stored_protocol(session: Session, analysis_id: uuid.UUID) -> ProtocolResult:
    """The stored per-run records of a succeeded analysis as the engine's ProtocolResult."""
    row = get_analysis(session, analysis_id)
    if row.protocol is None:
        raise NotFound(f"analysis {analysis_id} has no stored protocol records")
    return protocol_from_bytes(row.protocol, row)
