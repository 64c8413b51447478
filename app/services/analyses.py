"""MDAD analyses: create (request side), run (the "analysis" job kind), read, and the stored
agreement curves other services answer from (:func:`latest_analysis`).

The protocol runs in chunks of runs (:mod:`app.core.analysis`). A job whose database supports
``FOR UPDATE SKIP LOCKED`` (Postgres) shares its chunks through the ``analysis_chunks`` table:
the job's own worker and any helper tasks (:data:`CHUNK_HELPERS` hook, installed by
``worker.analysis``) each lock a pending chunk, compute it and store it; the job combines the
chunks once all are done. Every run's draws depend only on ``(seed, run)``, so the result is the
same whichever process ran which chunk. Elsewhere (SQLite, tests' rolled-back session) the job
computes its chunks in turn. Progress (runs done / total) is reported after every chunk and a
cancel is honoured between chunks.
"""

from __future__ import annotations

import io
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.core.analysis import ProtocolChunk, chunk_bounds, combine_chunks, run_protocol_chunk
from app.core.mdad import analyze_protocol
from app.core.results import AgreementCurve, MDADResult, ProtocolResult
from app.core.selectors import SELECTORS
from app.db.base import utcnow
from app.db.models import Analysis, BenchmarkVersion, Job, JobStatus
from app.db.repositories.analyses import AnalysisChunkRepository, AnalysisRepository
from app.errors import Conflict, InvalidInput, NotFound
from app.schemas.analyses import (
    AgreementCurvePublic,
    AnalysisCreate,
    AnalysisLinks,
    AnalysisPage,
    AnalysisPublic,
    AnalysisResult,
    MDADCell,
    RandomVsBest,
    Recommendation,
)
from app.schemas.jobs import JobProgress
from app.services import jobs as job_service
from app.services.benchmarks import get_version, item_index
from app.services.pagination import decode_cursor, encode_cursor
from app.services.results import load_matrix

JOB_KIND = "analysis"
SPLITS = ("seen", "unseen")
TARGET_CHUNKS = 10  # progress granularity and unit of work sharing
MAX_PAGE = 100
_CHUNK_POLL_SECONDS = 0.2

# Installed by worker.analysis: ``CHUNK_HELPERS[0](job_id, n)`` asks up to n other workers to
# help with the job's chunks. Left empty in the API process and in tests without a worker.
CHUNK_HELPERS: list[Callable[[uuid.UUID, int], None]] = []


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


# --- JSON round trip of the engine's results (NaN <-> null; floats exact) -------------------------


def _floats(a: np.ndarray | None) -> list[float | None] | None:
    if a is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in np.asarray(a, dtype=np.float64)]


def _array(values: Sequence[float | None] | None) -> np.ndarray | None:
    if values is None:
        return None
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _opt(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def curve_to_json(c: AgreementCurve) -> dict[str, Any]:
    return {
        "gaps": _floats(c.gaps),
        "gap_upper": _floats(c.gap_upper),
        "n_pairs": _floats(c.n_pairs),
        "p_same": _floats(c.p_same),
        "p_tie": _floats(c.p_tie),
        "p_reversed": _floats(c.p_reversed),
        "fitted": _floats(c.fitted),
        "band_low": _floats(c.band_low),
        "band_high": _floats(c.band_high),
        "method": c.method,
        "n": int(c.n),
        "split": c.split,
        "kind": c.kind,
        "max_gap": float(c.max_gap),
    }


def curve_from_json(d: Mapping[str, Any]) -> AgreementCurve:
    return AgreementCurve(
        gaps=_array(d["gaps"]),
        gap_upper=_array(d["gap_upper"]),
        n_pairs=_array(d["n_pairs"]),
        p_same=_array(d["p_same"]),
        p_tie=_array(d["p_tie"]),
        p_reversed=_array(d["p_reversed"]),
        fitted=_array(d["fitted"]),
        band_low=_array(d["band_low"]),
        band_high=_array(d["band_high"]),
        method=d["method"],
        n=int(d["n"]),
        split=d["split"],
        kind=d["kind"],
        max_gap=float(d["max_gap"]),
    )


def mdad_to_json(r: MDADResult, mean_subset_size: float) -> dict[str, Any]:
    return {
        "method": r.method,
        "n": int(r.n),
        "split": r.split,
        "mode": r.mode,
        "mdad": _opt(r.mdad),
        "ci_low": _opt(r.ci_low),
        "ci_high": _opt(r.ci_high),
        "threshold": float(r.threshold),
        "reached": bool(r.reached),
        "max_gap": float(r.max_gap),
        "mean_agreement": float(r.mean_agreement),
        "mean_abs_error": _opt(r.mean_abs_error),
        "kendall_tau": _opt(r.kendall_tau),
        "n_runs": int(r.n_runs),
        "n_pairs": int(r.n_pairs),
        "n_boot": int(r.n_boot),
        "seed": r.seed,
        "mean_subset_size": float(mean_subset_size),
        "curve": None if r.curve is None else curve_to_json(r.curve),
    }


def mdad_from_json(d: Mapping[str, Any]) -> MDADResult:
    return MDADResult(
        method=d["method"],
        n=int(d["n"]),
        split=d["split"],
        mode=d["mode"],
        mdad=d["mdad"],
        ci_low=d["ci_low"],
        ci_high=d["ci_high"],
        threshold=float(d["threshold"]),
        reached=bool(d["reached"]),
        max_gap=float(d["max_gap"]),
        mean_agreement=float(d["mean_agreement"]),
        mean_abs_error=d["mean_abs_error"],
        kendall_tau=d["kendall_tau"],
        n_runs=int(d["n_runs"]),
        n_pairs=int(d["n_pairs"]),
        n_boot=int(d["n_boot"]),
        seed=d["seed"],
        curve=None if d["curve"] is None else curve_from_json(d["curve"]),
    )


def protocol_to_bytes(result: ProtocolResult) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(
        buf,
        targets=result.targets,
        sources=result.sources,
        seen=result.seen,
        acc_seen=result.acc_seen,
        acc_unseen=result.acc_unseen,
        acc_full=result.acc_full,
        estimates=result.estimates,
        subset_sizes=result.subset_sizes,
    )
    return buf.getvalue()


def protocol_from_bytes(data: bytes, row: Analysis) -> ProtocolResult:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return ProtocolResult(
        methods=tuple(row.methods),
        sizes=tuple(int(n) for n in row.sizes),
        runs=row.runs,
        n_sources=row.n_sources,
        n_targets=row.n_targets,
        seed=int(row.seed),
        **arrays,
    )


def _chunk_to_bytes(chunk: ProtocolChunk) -> bytes:
    buf = io.BytesIO()
    seconds = np.array(list(chunk.seconds.values()), dtype=np.float64)
    names = np.array(list(chunk.seconds.keys()), dtype=str)
    np.savez(buf, seconds=seconds, seconds_names=names, **chunk.arrays())
    return buf.getvalue()


def _chunk_from_bytes(data: bytes, run_start: int, run_stop: int) -> ProtocolChunk:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    seconds = dict(
        zip(arrays.pop("seconds_names").tolist(), arrays.pop("seconds").tolist(), strict=True)
    )
    return ProtocolChunk(run_start=run_start, run_stop=run_stop, seconds=seconds, **arrays)


# --- recommendation -------------------------------------------------------------------------------


def recommend(
    cells: Sequence[MDADResult],
    methods: Sequence[str],
    sizes: Sequence[int],
    *,
    gap: float,
    threshold: float,
) -> Recommendation:
    """Smallest n per method whose (seen-split) MDAD <= ``gap``, and whether random sampling's
    MDAD lies within the best method's CI at each n (a method that never reaches the threshold
    counts as an infinite MDAD)."""
    index = {(c.method, c.n): c for c in cells if c.split == "seen"}
    sizes = sorted(int(n) for n in sizes)

    def value(method: str, n: int) -> float:
        c = index[(method, n)]
        return float(c.mdad) if c.reached and c.mdad is not None else math.inf

    smallest = {m: next((n for n in sizes if value(m, n) <= gap + 1e-12), None) for m in methods}
    versus = None
    if "random" in methods:
        versus = []
        for n in sizes:
            values = np.array([value(m, n) for m in methods])
            if not np.isfinite(values).any():
                versus.append(
                    RandomVsBest(
                        n=n,
                        best_method=None,
                        best_mdad=None,
                        best_ci_high=None,
                        random_mdad=None,
                        random_within_ci=None,
                    )
                )
                continue
            best = methods[int(np.argmin(values))]
            cb = index[(best, n)]
            rv = value("random", n)
            within = bool(cb.ci_high is None and math.isfinite(rv)) or bool(
                cb.ci_high is not None and rv <= cb.ci_high + 1e-12
            )
            versus.append(
                RandomVsBest(
                    n=n,
                    best_method=best,
                    best_mdad=cb.mdad,
                    best_ci_high=cb.ci_high,
                    random_mdad=rv if math.isfinite(rv) else None,
                    random_within_ci=within,
                )
            )
    return Recommendation(gap=gap, threshold=threshold, smallest_n=smallest, random_vs_best=versus)


# --- request side ----------------------------------------------------------------------------------


def _validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Benchmark-independent checks (the job kind's params validator); raises 422 naming fields."""
    try:
        body = AnalysisCreate.model_validate(
            {k: v for k, v in params.items() if k not in {"benchmark_version_id", "seed"}}
        )
    except ValueError as exc:
        raise InvalidInput("invalid analysis parameters", errors=_pydantic_errors(exc)) from None
    errors = []
    for i, name in enumerate(body.methods):
        if name not in SELECTORS:
            errors.append(
                {
                    "loc": ["body", "methods", i],
                    "message": f"unknown method {name!r}; choose from {sorted(SELECTORS)}",
                }
            )
    if len(set(body.methods)) != len(body.methods):
        errors.append({"loc": ["body", "methods"], "message": "methods must be distinct"})
    if len(set(body.sizes)) != len(body.sizes):
        errors.append({"loc": ["body", "sizes"], "message": "sizes must be distinct"})
    for i, n in enumerate(body.sizes):
        if n < 1:
            errors.append({"loc": ["body", "sizes", i], "message": "sizes must be >= 1"})
    if errors:
        raise InvalidInput("invalid analysis parameters", errors=errors)
    try:
        version_id = uuid.UUID(str(params.get("benchmark_version_id")))
    except ValueError:
        raise InvalidInput(
            "invalid analysis parameters",
            errors=[
                {"loc": ["body", "benchmark_version_id"], "message": "the benchmark version's id"}
            ],
        ) from None
    out = body.model_dump(exclude={"seed"})
    out["sizes"] = sorted(out["sizes"])
    out["benchmark_version_id"] = str(version_id)
    return out


def _pydantic_errors(exc: Exception) -> list[dict[str, Any]]:
    errs = getattr(exc, "errors", None)
    if not callable(errs):
        return [{"loc": ["body"], "message": str(exc)}]
    return [{"loc": ["body", *e["loc"]], "message": e["msg"]} for e in errs()]


def seen_half(version: BenchmarkVersion) -> int:
    """Items in the seen half: sum over subtasks of floor(n_s / 2)."""
    codes = np.frombuffer(version.subtask_codes, dtype="<i4")
    return int((np.bincount(codes) // 2).sum())


def _check_against_benchmark(
    body: Mapping[str, Any], n_models: int, n_seen: int, *, where: str = "body"
) -> None:
    errors = []
    if body["n_sources"] + body["n_targets"] > n_models:
        errors.append(
            {
                "loc": [where, "n_sources"],
                "message": f"n_sources + n_targets = {body['n_sources'] + body['n_targets']} "
                f"exceeds the {n_models} models with results on every item",
            }
        )
    for i, n in enumerate(body["sizes"]):
        if n > n_seen:
            errors.append(
                {
                    "loc": [where, "sizes", i],
                    "message": f"size {n} exceeds the seen half ({n_seen} items)",
                }
            )
    if errors:
        raise InvalidInput(
            "the analysis does not fit this benchmark: " + "; ".join(e["message"] for e in errors),
            errors=errors,
        )


def _analysis_row(session: Session, job: Job) -> Analysis:
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
    """Validate against the benchmark, insert the job (queued, seed fixed) and the analysis row.

    Flush only: the caller commits, then enqueues the job.
    """
    version = get_version(session, benchmark_version_id)
    params = _validate_params(
        {**body.model_dump(exclude={"seed"}), "benchmark_version_id": str(version.id)}
    )
    n_models = AnalysisRepository(session).full_coverage_models(version.id)
    _check_against_benchmark(params, n_models, seen_half(version))
    job = job_service.create_job(session, JOB_KIND, params, body.seed)
    job.progress_total = params["runs"]  # known up front: clients see "0 / runs" while queued
    analysis = _analysis_row(session, job)
    AnalysisRepository(session).add(analysis)
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
        raise Conflict(
            f"analysis {analysis_id} is {row.job.status.value}; its results exist once it succeeded"
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
        benchmark_id=row.benchmark_version_id,
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
    from sqlalchemy.orm import object_session

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


# --- worker side: the "analysis" job kind ---------------------------------------------------------


@dataclass(frozen=True)
class _Inputs:
    correct: np.ndarray
    confidence: np.ndarray | None
    subtasks: np.ndarray
    n_models: int


def _load_inputs(session: Session, row: Analysis) -> _Inputs:
    """The version's full-coverage matrix, re-validated against the analysis parameters."""
    mat = load_matrix(session, row.benchmark_version_id)
    full = mat.coverage.all(axis=1)
    correct = mat.correct[full]
    confidence = None if mat.confidence is None else mat.confidence[full]
    version = get_version(session, row.benchmark_version_id)
    _check_against_benchmark(
        {"n_sources": row.n_sources, "n_targets": row.n_targets, "sizes": row.sizes},
        int(full.sum()),
        seen_half(version),
        where="params",
    )
    return _Inputs(correct, confidence, np.asarray(item_index(version).subtasks), int(full.sum()))


def _compute_chunk(row: Analysis, inputs: _Inputs, run_start: int, run_stop: int) -> ProtocolChunk:
    return run_protocol_chunk(
        inputs.correct,
        row.methods,
        row.sizes,
        confidence=inputs.confidence,
        subtasks=inputs.subtasks,
        run_start=run_start,
        run_stop=run_stop,
        runs=row.runs,
        n_sources=row.n_sources,
        n_targets=row.n_targets,
        seed=int(row.seed),
    )


def _bounds(runs: int) -> list[tuple[int, int]]:
    return chunk_bounds(runs, TARGET_CHUNKS)


def _shared_factory(session: Session) -> sessionmaker[Session] | None:
    """A factory of independent sessions when chunks can be shared (Postgres, engine-bound)."""
    bind = session.get_bind()
    if isinstance(bind, Engine) and bind.dialect.name == "postgresql":
        return sessionmaker(bind=bind, expire_on_commit=False)
    return None


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def work_on_chunks(
    factory: sessionmaker[Session],
    job_id: uuid.UUID,
    inputs: _Inputs | None = None,
    *,
    on_chunk: Callable[[], None] | None = None,
) -> int:
    """Claim and compute pending chunks of ``job_id`` until none is left unclaimed.

    Each chunk is computed inside the transaction that locks it, so a crash releases it.
    Stops early when the job is no longer running or a cancel was requested. Returns the
    number of chunks this process computed.
    """
    computed = 0
    while True:
        with factory() as session, session.begin():
            job = session.get(Job, job_id)
            if job is None or job.status is not JobStatus.running or job.cancel_requested:
                return computed
            chunk = AnalysisChunkRepository(session).claim(job_id)
            if chunk is None:
                return computed
            row = AnalysisRepository(session).get_by_job(job_id)
            assert row is not None
            if inputs is None:
                inputs = _load_inputs(session, row)
            part = _compute_chunk(row, inputs, chunk.run_start, chunk.run_stop)
            chunk.payload = _chunk_to_bytes(part)
            chunk.done = True
            chunk.worker = _worker_name()
        computed += 1
        if on_chunk is not None:
            on_chunk()


def _run_shared(
    factory: sessionmaker[Session],
    job: Job,
    row: Analysis,
    inputs: _Inputs,
    progress: job_service.ProgressReporter,
) -> tuple[list[ProtocolChunk], list[str]]:
    bounds = _bounds(row.runs)
    with factory() as s, s.begin():  # a redelivered job keeps the chunks already done
        AnalysisChunkRepository(s).ensure(job.id, bounds)
    if CHUNK_HELPERS and len(bounds) > 1:
        CHUNK_HELPERS[0](job.id, len(bounds) - 1)

    def report() -> None:
        with factory() as s:
            done, _ = AnalysisChunkRepository(s).runs_done(job.id)
        progress(done)

    while True:
        work_on_chunks(factory, job.id, inputs, on_chunk=report)
        with factory() as s:
            done, pending = AnalysisChunkRepository(s).runs_done(job.id)
        progress(done)  # raises JobCancelled when asked to stop
        if pending == 0:
            break
        time.sleep(_CHUNK_POLL_SECONDS)  # other workers hold the remaining chunks
    with factory() as s:
        rows = AnalysisChunkRepository(s).for_job(job.id, with_payload=True)
        chunks = [_chunk_from_bytes(c.payload or b"", c.run_start, c.run_stop) for c in rows]
        return chunks, sorted({c.worker or "" for c in rows})


def run_analysis(session: Session, job: Job, progress: job_service.ProgressReporter) -> None:
    factory = _shared_factory(session)
    row = AnalysisRepository(session).get_by_job(job.id)
    if row is None:  # queued through POST /v1/jobs {"kind": "analysis"}: no row yet
        if factory is None:
            row = _analysis_row(session, job)
        else:  # chunk workers must see it
            with factory() as s, s.begin():
                found = s.get(Job, job.id)
                assert found is not None
                _analysis_row(s, found)
            row = AnalysisRepository(session).get_by_job(job.id)
            assert row is not None
    progress(0, row.runs)
    inputs = _load_inputs(session, row)
    try:
        if factory is not None:
            chunks, executed_by = _run_shared(factory, job, row, inputs, progress)
        else:
            executed_by = [_worker_name()]
            chunks = []
            for a, b in _bounds(row.runs):
                chunks.append(_compute_chunk(row, inputs, a, b))
                progress(b)  # raises JobCancelled when asked to stop
        result = combine_chunks(
            chunks,
            methods=row.methods,
            sizes=row.sizes,
            runs=row.runs,
            n_sources=row.n_sources,
            n_targets=row.n_targets,
            seed=int(row.seed),
        )
        progress.check_cancelled()
        cells = analyze_protocol(result, mode=row.mode, splits=SPLITS, threshold=row.threshold)
    except BaseException:
        if factory is not None:
            with factory() as s, s.begin():
                AnalysisChunkRepository(s).delete_for_job(job.id)
        raise
    subset_sizes = {
        (m, n): float(result.subset_sizes[i, j].mean())
        for i, m in enumerate(result.methods)
        for j, n in enumerate(result.sizes)
    }
    row.result = {
        "models_used": inputs.n_models,
        "n_items": int(inputs.correct.shape[1]),
        "confidence_used": inputs.confidence is not None,
        "seconds": {k: float(v) for k, v in result.seconds.items()},
        "executed_by": executed_by,
        "cells": [mdad_to_json(c, subset_sizes[(c.method, c.n)]) for c in cells],
        "recommendation": recommend(
            cells, row.methods, row.sizes, gap=row.gap, threshold=row.threshold
        ).model_dump(),
    }
    row.protocol = protocol_to_bytes(result)
    row.finished_at = utcnow()
    if factory is not None:
        AnalysisChunkRepository(session).delete_for_job(job.id)
    job.result = {"analysis_id": str(row.id)}


def stored_protocol(session: Session, analysis_id: uuid.UUID) -> ProtocolResult:
    """The stored per-run records of a succeeded analysis as the engine's ProtocolResult."""
    row = get_analysis(session, analysis_id)
    if row.protocol is None:
        raise NotFound(f"analysis {analysis_id} has no stored protocol records")
    return protocol_from_bytes(row.protocol, row)


job_service.register_job_kind(JOB_KIND, run_analysis, _validate_params)
