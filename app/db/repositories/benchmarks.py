"""SQL for benchmarks and their versions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, func, or_, select

from app.db.models.benchmark import Benchmark, BenchmarkVersion
from app.db.models.model_result import ModelResult
from app.db.repositories.base import Repository


class BenchmarkRepository(Repository[Benchmark]):
    model = Benchmark

    def get_by_name(self, name: str, *, for_update: bool = False) -> Benchmark | None:
        stmt = select(Benchmark).where(Benchmark.name == name)
        if for_update:
            stmt = stmt.with_for_update()
        return self.session.scalars(stmt).first()


class BenchmarkVersionRepository(Repository[BenchmarkVersion]):
    model = BenchmarkVersion

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

    def by_name(self, name: str, version: int | None = None) -> BenchmarkVersion | None:
        """Version ``version`` (default: the latest) of the benchmark called ``name``: one query."""
        stmt = select(BenchmarkVersion).join(Benchmark).where(Benchmark.name == name)
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
    ) -> Sequence[BenchmarkVersion]:
        """Newest first, keyset-paginated on (created_at, id)."""
        stmt = select(BenchmarkVersion).order_by(
            BenchmarkVersion.created_at.desc(), BenchmarkVersion.id.desc()
        )
        if name is not None:
            stmt = stmt.join(Benchmark).where(Benchmark.name == name)
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
