"""The "analysis" job kind: the protocol in chunks of runs (:mod:`app.core.reliability.analysis`).

Where the worker's runner provides independent transactions (``ctx.transaction``: Postgres, whose
``FOR UPDATE SKIP LOCKED`` lets processes share rows), the job shares its chunks through the
``analysis_chunks`` table: the job's own worker and helper tasks (asked for through
``ctx.request_helpers``) each lock a pending chunk, compute it and store it; the job combines the
chunks once all are done. Every run's draws depend only on ``(seed, run)``, so the result is the
same whichever process ran which chunk. Elsewhere (SQLite, tests' rolled-back session) the job
computes its chunks in turn. Progress (runs done / total) is reported after every chunk and a
cancel is honoured between chunks.

Nothing here commits: each ``with transaction() as session`` block is a transaction the worker's
runner opened and commits when the block ends.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from app.core.reliability.analysis import (
    ProtocolChunk,
    chunk_bounds,
    combine_chunks,
    run_protocol_chunk,
)
from app.core.reliability.mdad import analyze_protocol
from app.core.reliability.planning import recommend
from app.db.base import utcnow
from app.db.models import Analysis, Job
from app.db.repositories.analyses import AnalysisChunkRepository, AnalysisRepository
from app.enums import JobStatus
from app.schemas.analyses import Recommendation
from app.services.catalog.benchmarks import get_version, item_index
from app.services.catalog.results import load_matrix
from app.services.platform.jobs import JobContext, Progress
from app.services.reliability.analyses import (
    check_against_benchmark,
    new_analysis_row,
    seen_half,
    seen_per_subtask,
)
from app.services.reliability.analysis_codecs import (
    chunk_from_bytes,
    chunk_to_bytes,
    mdad_to_json,
    protocol_to_bytes,
)

SPLITS = ("seen", "unseen")
TARGET_CHUNKS = 10  # progress granularity and unit of work sharing
CHUNK_POLL_SECONDS = 0.2

Transaction = Callable[[], AbstractContextManager[Session]]


@dataclass(frozen=True)
class AnalysisInputs:
    correct: np.ndarray
    confidence: np.ndarray | None
    subtasks: np.ndarray
    n_models: int


def load_inputs(session: Session, row: Analysis) -> AnalysisInputs:
    """The version's full-coverage matrix, re-validated against the analysis parameters."""
    mat = load_matrix(session, row.benchmark_version_id)
    full = mat.coverage.all(axis=1)
    correct = mat.correct[full]
    confidence = None if mat.confidence is None else mat.confidence[full]
    version = get_version(session, row.benchmark_version_id)
    check_against_benchmark(
        {
            "n_sources": row.n_sources,
            "n_targets": row.n_targets,
            "sizes": row.sizes,
            "methods": row.methods,
        },
        int(full.sum()),
        seen_half(version),
        seen_per_subtask(version),
    )
    return AnalysisInputs(
        correct, confidence, np.asarray(item_index(version).subtasks), int(full.sum())
    )


def compute_chunk(
    row: Analysis, inputs: AnalysisInputs, run_start: int, run_stop: int
) -> ProtocolChunk:
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


def chunk_plan(runs: int) -> list[tuple[int, int]]:
    """The job's chunks of runs: about :data:`TARGET_CHUNKS` contiguous ranges."""
    return chunk_bounds(runs, TARGET_CHUNKS)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def work_on_chunks(
    transaction: Transaction,
    job_id: uuid.UUID,
    inputs: AnalysisInputs | None = None,
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
        with transaction() as session:
            job = session.get(Job, job_id)
            if job is None or job.status is not JobStatus.running or job.cancel_requested:
                return computed
            chunk = AnalysisChunkRepository(session).claim(job_id)
            if chunk is None:
                return computed
            row = AnalysisRepository(session).get_by_job(job_id)
            assert row is not None
            if inputs is None:
                inputs = load_inputs(session, row)
            part = compute_chunk(row, inputs, chunk.run_start, chunk.run_stop)
            chunk.payload = chunk_to_bytes(part)
            chunk.done = True
            chunk.worker = worker_name()
        computed += 1
        if on_chunk is not None:
            on_chunk()


def _run_shared(
    transaction: Transaction,
    job: Job,
    row: Analysis,
    inputs: AnalysisInputs,
    ctx: JobContext,
) -> tuple[list[ProtocolChunk], list[str]]:
    progress: Progress = ctx.progress
    bounds = chunk_plan(row.runs)
    with transaction() as s:  # a redelivered job keeps the chunks already done
        AnalysisChunkRepository(s).ensure(job.id, bounds)
    if len(bounds) > 1:
        ctx.request_helpers(job.id, len(bounds) - 1)

    def report() -> None:
        with transaction() as s:
            done, _ = AnalysisChunkRepository(s).runs_done(job.id)
        progress(done)

    while True:
        work_on_chunks(transaction, job.id, inputs, on_chunk=report)
        with transaction() as s:
            done, pending = AnalysisChunkRepository(s).runs_done(job.id)
        progress(done)  # raises JobCancelled when asked to stop
        if pending == 0:
            break
        time.sleep(CHUNK_POLL_SECONDS)  # other workers hold the remaining chunks
    with transaction() as s:
        rows = AnalysisChunkRepository(s).for_job(job.id, with_payload=True)
        chunks = [chunk_from_bytes(c.payload or b"", c.run_start, c.run_stop) for c in rows]
        return chunks, sorted({c.worker or "" for c in rows})


def run_analysis(session: Session, job: Job, ctx: JobContext) -> None:
    """The "analysis" job kind's handler (see the module docstring)."""
    transaction = ctx.transaction
    row = AnalysisRepository(session).get_by_job(job.id)
    if row is None:  # queued through POST /v1/jobs {"kind": "analysis"}: no row yet
        if transaction is None:
            row = new_analysis_row(session, job)
        else:  # chunk workers must see it
            with transaction() as s:
                found = s.get(Job, job.id)
                assert found is not None
                new_analysis_row(s, found)
            row = AnalysisRepository(session).get_by_job(job.id)
            assert row is not None
    ctx.progress(0, row.runs)
    inputs = load_inputs(session, row)
    try:
        if transaction is not None:
            chunks, executed_by = _run_shared(transaction, job, row, inputs, ctx)
        else:
            executed_by = [worker_name()]
            chunks = []
            for a, b in chunk_plan(row.runs):
                chunks.append(compute_chunk(row, inputs, a, b))
                ctx.progress(b)  # raises JobCancelled when asked to stop
        result = combine_chunks(
            chunks,
            methods=row.methods,
            sizes=row.sizes,
            runs=row.runs,
            n_sources=row.n_sources,
            n_targets=row.n_targets,
            seed=int(row.seed),
        )
        ctx.progress.check_cancelled()
        cells = analyze_protocol(result, mode=row.mode, splits=SPLITS, threshold=row.threshold)
    except BaseException:
        if transaction is not None:
            with transaction() as s:
                AnalysisChunkRepository(s).delete_for_job(job.id)
        raise
    subset_sizes = {
        (m, n): float(result.subset_sizes[i, j].mean())
        for i, m in enumerate(result.methods)
        for j, n in enumerate(result.sizes)
    }
    rec = recommend(cells, row.methods, row.sizes, gap=row.gap, threshold=row.threshold)
    row.result = {
        "models_used": inputs.n_models,
        "n_items": int(inputs.correct.shape[1]),
        "confidence_used": inputs.confidence is not None,
        "seconds": {k: float(v) for k, v in result.seconds.items()},
        "executed_by": executed_by,
        "cells": [mdad_to_json(c, subset_sizes[(c.method, c.n)]) for c in cells],
        "recommendation": Recommendation.model_validate(rec, from_attributes=True).model_dump(),
    }
    row.protocol = protocol_to_bytes(result)
    row.finished_at = utcnow()
    if transaction is not None:
        AnalysisChunkRepository(session).delete_for_job(job.id)
    job.result = {"analysis_id": str(row.id)}
