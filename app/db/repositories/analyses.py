"""SQL for analyses and their chunks of runs."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.orm import undefer

from app.db.models import Analysis, AnalysisChunk, Job, JobStatus, ModelResult
from app.db.repositories.base import Repository


class AnalysisRepository(Repository[Analysis]):
    model = Analysis

    def get_by_job(self, job_id: uuid.UUID) -> Analysis | None:
        return self.session.scalars(select(Analysis).where(Analysis.job_id == job_id)).first()

    def get_with_result(self, analysis_id: uuid.UUID) -> Analysis | None:
        stmt = select(Analysis).where(Analysis.id == analysis_id).options(undefer(Analysis.result))
        return self.session.scalars(stmt).first()

    def page(
        self,
        version_id: uuid.UUID,
        *,
        limit: int,
        before: tuple[datetime, uuid.UUID] | None = None,
        status: JobStatus | None = None,
    ) -> Sequence[Analysis]:
        """Newest first, keyset-paginated on ``(created_at, id)``."""
        stmt = select(Analysis).where(Analysis.benchmark_version_id == version_id)
        if status is not None:
            stmt = stmt.join(Job, Job.id == Analysis.job_id).where(Job.status == status)
        if before is not None:
            stmt = stmt.where(tuple_(Analysis.created_at, Analysis.id) < before)
        stmt = stmt.order_by(Analysis.created_at.desc(), Analysis.id.desc()).limit(limit)
        return self.session.scalars(stmt).unique().all()

    def succeeded_methods(self, version_id: uuid.UUID, mode: str) -> set[str]:
        """Every method some succeeded analysis of ``mode`` covers (results not loaded)."""
        stmt = (
            select(Analysis.methods)
            .join(Job, Job.id == Analysis.job_id)
            .where(
                Analysis.benchmark_version_id == version_id,
                Job.status == JobStatus.succeeded,
                Analysis.result.is_not(None),
                Analysis.mode == mode,
            )
        )
        return {m for methods in self.session.scalars(stmt).all() for m in methods}

    def succeeded(self, version_id: uuid.UUID, mode: str | None) -> Sequence[Analysis]:
        """Succeeded analyses of a version, newest first, with their results loaded."""
        stmt = (
            select(Analysis)
            .join(Job, Job.id == Analysis.job_id)
            .where(
                Analysis.benchmark_version_id == version_id,
                Job.status == JobStatus.succeeded,
                Analysis.result.is_not(None),
            )
            .options(undefer(Analysis.result))
            .order_by(Analysis.created_at.desc(), Analysis.id.desc())
        )
        if mode is not None:
            stmt = stmt.where(Analysis.mode == mode)
        return self.session.scalars(stmt).unique().all()

    def full_coverage_models(self, version_id: uuid.UUID) -> int:
        """Models with a result on every item of the version (``coverage`` NULL)."""
        stmt = select(func.count()).where(
            ModelResult.benchmark_version_id == version_id, ModelResult.coverage.is_(None)
        )
        return int(self.session.scalar(stmt) or 0)


class AnalysisChunkRepository(Repository[AnalysisChunk]):
    model = AnalysisChunk

    def for_job(self, job_id: uuid.UUID, *, with_payload: bool = False) -> Sequence[AnalysisChunk]:
        stmt = select(AnalysisChunk).where(AnalysisChunk.job_id == job_id)
        if with_payload:
            stmt = stmt.options(undefer(AnalysisChunk.payload))
        return self.session.scalars(stmt.order_by(AnalysisChunk.run_start)).all()

    def ensure(self, job_id: uuid.UUID, bounds: Sequence[tuple[int, int]]) -> None:
        """Insert the job's chunks that do not exist yet (Postgres; safe under concurrency)."""
        from sqlalchemy.dialects.postgresql import insert

        stmt = insert(AnalysisChunk).values(
            [
                {"id": uuid.uuid4(), "job_id": job_id, "run_start": a, "run_stop": b, "done": False}
                for a, b in bounds
            ]
        )
        self.session.execute(stmt.on_conflict_do_nothing(constraint="uq_analysis_chunks_job_run"))

    def claim(self, job_id: uuid.UUID) -> AnalysisChunk | None:
        """Lock one pending chunk of the job, skipping chunks other workers hold."""
        stmt = (
            select(AnalysisChunk)
            .where(AnalysisChunk.job_id == job_id, AnalysisChunk.done.is_(False))
            .order_by(AnalysisChunk.run_start)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        return self.session.scalars(stmt).first()

    def runs_done(self, job_id: uuid.UUID) -> tuple[int, int]:
        """``(runs in done chunks, chunks not done)``."""
        stmt = select(
            func.coalesce(
                func.sum(AnalysisChunk.run_stop - AnalysisChunk.run_start).filter(
                    AnalysisChunk.done.is_(True)
                ),
                0,
            ),
            func.count().filter(AnalysisChunk.done.is_(False)),
        ).where(AnalysisChunk.job_id == job_id)
        done, pending = self.session.execute(stmt).one()
        return int(done), int(pending)

    def delete_for_job(self, job_id: uuid.UUID) -> None:
        self.session.execute(delete(AnalysisChunk).where(AnalysisChunk.job_id == job_id))
        self.session.flush()
