"""SQL for benchmarks and their versions."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.orm import Session

from app.db.models.access import Project
from app.db.models.benchmark import Benchmark, BenchmarkVersion, PrecomputedView
from app.db.models.model_result import ModelResult
from app.db.repositories.base import Repository


class BenchmarkRepository(Repository[Benchmark]):
    model = Benchmark

    def get_by_name(self, name: str, *, for_update: bool = False) -> Benchmark | None:
        stmt = select(Benchmark).where(Benchmark.name == name)
        if for_update:
            stmt = stmt.with_for_update(of=Benchmark)  # not the joined project row
        return self.session.scalars(stmt).first()

    def lock_name(self, name: str) -> None:
        """Serialise the creators of versions of ``name`` until this transaction ends
        (Postgres; elsewhere writes are serialised by the database itself): the owner check
        and the insert of a new version or name happen under one lock, so a concurrent
        creation of the same name is seen committed, never raced."""
        if self.session.connection().dialect.name == "postgresql":
            key = func.hashtextextended(f"benchslice.benchmark:{name}", 0)
            self.session.execute(select(func.pg_advisory_xact_lock(key)))


class BenchmarkVersionRepository(Repository[BenchmarkVersion]):
    model = BenchmarkVersion

    def lock(self, version_id: uuid.UUID, *, exclusive: bool = False) -> BenchmarkVersion | None:
        """The version row, locked until this transaction ends and read afresh.

        Writers of the version's results take it shared (``FOR SHARE``: they run side by
        side); retiring takes it exclusively (``FOR NO KEY UPDATE``: it waits for those
        writers, and they for it), so a write and a retire are one before the other."""
        stmt = (
            select(BenchmarkVersion)
            .where(BenchmarkVersion.id == version_id)
            .with_for_update(read=not exclusive, key_share=exclusive, of=BenchmarkVersion)
            .execution_options(populate_existing=True)
        )
        return self.session.scalars(stmt).first()

    def get_by_hash(self, benchmark_id: uuid.UUID, content_hash: str) -> BenchmarkVersion | None:
        stmt = select(BenchmarkVersion).where(
            BenchmarkVersion.benchmark_id == benchmark_id,
            BenchmarkVersion.content_hash == content_hash,
        )
        return self.session.scalars(stmt).first()

    def get_by_number(self, benchmark_id: uuid.UUID, version: int) -> BenchmarkVersion | None:
        stmt = select(BenchmarkVersion).where(
            BenchmarkVersion.benchmark_id == benchmark_id, BenchmarkVersion.version == version
        )
        return self.session.scalars(stmt).first()

    def by_name(
        self, name: str, version: int | None = None, *, include_retired: bool = False
    ) -> BenchmarkVersion | None:
        """Version ``version`` (default: the latest) of the benchmark called ``name``: one query.
        Retired versions only with ``include_retired``."""
        stmt = select(BenchmarkVersion).join(Benchmark).where(Benchmark.name == name)
        if not include_retired:
            stmt = stmt.where(BenchmarkVersion.retired_at.is_(None))
        if version is not None:
            stmt = stmt.where(BenchmarkVersion.version == version)
        stmt = stmt.order_by(BenchmarkVersion.version.desc()).limit(1)
        return self.session.scalars(stmt).first()

    def latest_version_number(self, benchmark_id: uuid.UUID) -> int:
        stmt = select(func.max(BenchmarkVersion.version)).where(
            BenchmarkVersion.benchmark_id == benchmark_id
        )
        return int(self.session.scalar(stmt) or 0)

    def page(
        self,
        *,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None = None,
        name: str | None = None,
        project_ids: Collection[uuid.UUID] | None = None,
        project_id: uuid.UUID | None = None,
    ) -> Sequence[BenchmarkVersion]:
        """Newest first, keyset-paginated on (created_at, id). ``project_ids``: only versions
        of those projects and of public-read ones (None: every project); ``project_id``: only
        that project's."""
        stmt = (
            select(BenchmarkVersion)
            .join(Benchmark, BenchmarkVersion.benchmark_id == Benchmark.id)
            .order_by(BenchmarkVersion.created_at.desc(), BenchmarkVersion.id.desc())
        )
        if name is not None:
            stmt = stmt.where(Benchmark.name == name)
        if project_id is not None:
            stmt = stmt.where(Benchmark.project_id == project_id)
        if project_ids is not None:
            public = select(Project.id).where(Project.public_read.is_(True))
            stmt = stmt.where(
                or_(Benchmark.project_id.in_(list(project_ids)), Benchmark.project_id.in_(public))
            )
        if after is not None:
            at, id_ = after
            stmt = stmt.where(
                or_(
                    BenchmarkVersion.created_at < at,
                    and_(BenchmarkVersion.created_at == at, BenchmarkVersion.id < id_),
                )
            )
        return self.session.scalars(stmt.limit(limit)).unique().all()

    def model_counts(self, version_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
        if not version_ids:
            return {}
        stmt = (
            select(ModelResult.benchmark_version_id, func.count())
            .where(ModelResult.benchmark_version_id.in_(version_ids))
            .group_by(ModelResult.benchmark_version_id)
        )
        return {vid: int(n) for vid, n in self.session.execute(stmt)}


class PrecomputedViewRepository:
    """SQL for the views the worker precomputes after an upload (``precomputed_views``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def payload(self, version_id: uuid.UUID, name: str, stamp: str) -> bytes | None:
        """The stored view, only when it was computed under ``stamp`` (else ``None``)."""
        stmt = select(PrecomputedView.payload).where(
            PrecomputedView.benchmark_version_id == version_id,
            PrecomputedView.name == name,
            PrecomputedView.stamp == stamp,
        )
        return self.session.scalar(stmt)

    def put(self, version_id: uuid.UUID, name: str, stamp: str, payload: bytes) -> None:
        """Replace the version's ``name`` view (flush only)."""
        self.session.execute(
            delete(PrecomputedView).where(
                PrecomputedView.benchmark_version_id == version_id, PrecomputedView.name == name
            )
        )
        self.session.add(
            PrecomputedView(
                benchmark_version_id=version_id, name=name, stamp=stamp, payload=payload
            )
        )
        self.session.flush()

    def latest(self, version_id: uuid.UUID, name: str) -> tuple[str, bytes] | None:
        """``(stamp, payload)`` of the version's ``name`` view whatever its stamp (state a job
        updates from, e.g. the stored pair counts), else ``None``."""
        stmt = select(PrecomputedView.stamp, PrecomputedView.payload).where(
            PrecomputedView.benchmark_version_id == version_id, PrecomputedView.name == name
        )
        row = self.session.execute(stmt).one_or_none()
        return None if row is None else (row[0], row[1])
