"""SQL for evaluated models and their packed per-version results."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Row, Text, cast, delete, func, select
from sqlalchemy.orm import Session, defer

from app.db.models.model_result import (
    LanguageModel,
    ModelMetadata,
    ModelResult,
    ModelResultArchive,
)
from app.db.repositories.base import Repository

_VECTORS = (
    ModelResult.correct,
    ModelResult.confidence,
    ModelResult.coverage,
    ModelResult.within_variance,
    ModelResult.item_costs,
    ModelResult.sample_counts,
)


class LanguageModelRepository(Repository[LanguageModel]):
    model = LanguageModel

    def get_by_name(self, name: str) -> LanguageModel | None:
        return self.session.scalars(select(LanguageModel).where(LanguageModel.name == name)).first()

    def lock_name(self, name: str) -> None:
        """Serialise writers of one model name until this transaction ends (Postgres; elsewhere
        writes are serialised by the database itself)."""
        if self.session.connection().dialect.name == "postgresql":
            key = func.hashtextextended(f"benchslice.model:{name}", 0)
            self.session.execute(select(func.pg_advisory_xact_lock(key)))

    def lock_names(self, names: Sequence[str]) -> None:
        """:meth:`lock_name` for many names in one statement (in a fixed order: two batches
        sharing names cannot deadlock)."""
        if self.session.connection().dialect.name == "postgresql" and names:
            keys = sorted({f"benchslice.model:{n}" for n in names})
            names_array = cast(keys, ARRAY(Text))
            key = func.hashtextextended(func.unnest(names_array), 0)
            self.session.execute(select(func.pg_advisory_xact_lock(key)))

    def get_by_names(self, names: Sequence[str]) -> Sequence[LanguageModel]:
        stmt = select(LanguageModel).where(LanguageModel.name.in_(list(names)))
        return self.session.scalars(stmt).all()


class ModelMetadataRepository:
    """SQL for each project's metadata of its models (``model_metadata``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def for_models(
        self, project_id: uuid.UUID, model_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, ModelMetadata]:
        """The project's rows for ``model_ids`` (models it has said nothing about are absent)."""
        out: dict[uuid.UUID, ModelMetadata] = {}
        ids = list(dict.fromkeys(model_ids))
        for start in range(0, len(ids), 1_000):
            stmt = select(ModelMetadata).where(
                ModelMetadata.project_id == project_id,
                ModelMetadata.model_id.in_(ids[start : start + 1_000]),
            )
            out.update((row.model_id, row) for row in self.session.scalars(stmt))
        return out

    def add_all(self, rows: Sequence[ModelMetadata]) -> None:
        self.session.add_all(list(rows))
        self.session.flush()


class ModelResultRepository(Repository[ModelResult]):
    model = ModelResult

    def get_for(
        self, version_id: uuid.UUID, model_id: uuid.UUID, *, with_vectors: bool = False
    ) -> ModelResult | None:
        stmt = select(ModelResult).where(
            ModelResult.benchmark_version_id == version_id, ModelResult.model_id == model_id
        )
        if not with_vectors:
            stmt = stmt.options(*(defer(c) for c in _VECTORS))
        return self.session.scalars(stmt).first()

    def summaries(self, version_id: uuid.UUID) -> Sequence[ModelResult]:
        """Every model's row on a version, without the vectors, by model name."""
        stmt = (
            select(ModelResult)
            .join(ModelResult.model)
            .where(ModelResult.benchmark_version_id == version_id)
            .options(*(defer(c) for c in _VECTORS))
            .order_by(LanguageModel.name)
        )
        return self.session.scalars(stmt).unique().all()

    def accuracy_rows(self, version_id: uuid.UUID) -> list[tuple[str, float, int]]:
        """``(model name, accuracy, items with results)`` per model on a version, by name: three
        columns, no ORM objects (the benchmark page's table and histogram)."""
        stmt = (
            select(LanguageModel.name, ModelResult.accuracy, ModelResult.n_items)
            .join(ModelResult.model)
            .where(ModelResult.benchmark_version_id == version_id)
            .order_by(LanguageModel.name)
        )
        return [(str(n), float(a), int(k)) for n, a, k in self.session.execute(stmt)]

    def cost_rows(self, version_id: uuid.UUID) -> list[tuple[str, bytes, str | None]]:
        """``(model name, item_costs bytes, cost_source)`` of the models with stored costs."""
        stmt = (
            select(LanguageModel.name, ModelResult.item_costs, ModelResult.cost_source)
            .join(ModelResult.model)
            .where(
                ModelResult.benchmark_version_id == version_id,
                ModelResult.item_costs.is_not(None),
            )
            .order_by(LanguageModel.name)
        )
        return [(str(n), bytes(c), s) for n, c, s in self.session.execute(stmt)]

    def sample_rows(
        self, version_id: uuid.UUID, model_names: Sequence[str]
    ) -> list[tuple[str, int | None, bytes | None, bytes | None]]:
        """``(model name, samples_per_item, within_variance, sample_counts)`` of these models."""
        stmt = (
            select(
                LanguageModel.name,
                ModelResult.samples_per_item,
                ModelResult.within_variance,
                ModelResult.sample_counts,
            )
            .join(ModelResult.model)
            .where(
                ModelResult.benchmark_version_id == version_id,
                LanguageModel.name.in_(list(model_names)),
            )
        )
        return [
            (str(n), k, None if w is None else bytes(w), None if c is None else bytes(c))
            for n, k, w, c in self.session.execute(stmt)
        ]

    def count_for_version(self, version_id: uuid.UUID) -> int:
        stmt = select(func.count()).where(ModelResult.benchmark_version_id == version_id)
        return int(self.session.scalar(stmt) or 0)

    def vectors(
        self, version_id: uuid.UUID, model_names: Sequence[str] | None = None
    ) -> Sequence[Row[Any]] | list[tuple[Any, ...]]:
        """``(name, binary, correct, confidence, coverage)`` rows, by model name.

        On Postgres the rows come over psycopg's binary protocol on the session's own
        connection: bytea in text format is hex-encoded, which makes a 450 x 12,000 matrix
        with confidence ~4x slower to fetch.
        """
        stmt = (
            select(
                LanguageModel.name,
                ModelResult.binary,
                ModelResult.correct,
                ModelResult.confidence,
                ModelResult.coverage,
            )
            .join(LanguageModel, LanguageModel.id == ModelResult.model_id)
            .where(ModelResult.benchmark_version_id == version_id)
            .order_by(LanguageModel.name)
        )
        if model_names is not None:
            stmt = stmt.where(LanguageModel.name.in_(list(model_names)))
        connection = self.session.connection()
        if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
            compiled = stmt.compile(
                dialect=connection.dialect, compile_kwargs={"render_postcompile": True}
            )
            params = compiled.construct_params()
            raw = connection.connection.driver_connection
            with raw.cursor(binary=True) as cursor:
                cursor.execute(str(compiled), params)
                return cursor.fetchall()
        return self.session.execute(stmt).all()

    def delete_for(self, version_id: uuid.UUID, model_id: uuid.UUID) -> int:
        stmt = delete(ModelResult).where(
            ModelResult.benchmark_version_id == version_id, ModelResult.model_id == model_id
        )
        n = self.session.execute(stmt).rowcount
        self.session.flush()
        return int(n or 0)


class ModelResultArchiveRepository(Repository[ModelResultArchive]):
    model = ModelResultArchive

    def latest(self, version_id: uuid.UUID, model_id: uuid.UUID) -> ModelResultArchive | None:
        stmt = (
            select(ModelResultArchive)
            .where(
                ModelResultArchive.benchmark_version_id == version_id,
                ModelResultArchive.model_id == model_id,
            )
            .order_by(ModelResultArchive.archived_at.desc(), ModelResultArchive.id.desc())
            .limit(1)
        )
        return self.session.scalars(stmt).first()

    def purge_before(self, cutoff: datetime) -> int:
        stmt = delete(ModelResultArchive).where(ModelResultArchive.archived_at < cutoff)
        return int(self.session.execute(stmt).rowcount or 0)
