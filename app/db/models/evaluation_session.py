"""Evaluation sessions (issue 12) and the per-version IRT fit the ``fluid`` policy needs.

An :class:`EvaluationSession` evaluates one model on a benchmark version in batches until its
goal is met. Everything a step needs lives in the row, so a session survives a restart:

* ``order``: little-endian int32 item positions in serving order. ``random``: the whole seeded
  permutation, drawn at creation. ``fluid``: the items served so far (each batch is chosen when
  it is served).
* ``items_used``: results received (a prefix of ``order``); the open batch is
  ``order[items_used : items_used + open_size]``.
* ``values``: float32 results of the first ``items_used`` items of ``order`` (packed).
* ``baseline_values``: the baseline's full results (float32), copied at creation.
* ``engine_state``: the engine's state (:class:`app.core.sequential.confidence_sequences.CSState` or
  :class:`app.core.sequential.fluid.FluidState` ``to_dict``) packed by
  :func:`app.services.evaluation.sessions.pack_state` (raw arrays behind a JSON header; ``.npz`` in rows
  written before, still read).
* ``history``: one JSON entry per applied batch.
* ``step``: incremented by every applied batch; SQLAlchemy's version counter, so an UPDATE that
  raced another (both read the same step) fails instead of applying a batch twice. The service
  also reads the row ``FOR UPDATE``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    func,
)
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.db.base import Base, Timestamps, UUIDPrimaryKey, utcnow


class EvaluationSession(UUIDPrimaryKey, Timestamps, Base):
    """One evaluation session (see the module docstring for the packed columns)."""

    __tablename__ = "evaluation_sessions"

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE"), index=True
    )
    model_name: Mapped[str] = mapped_column(String(300))
    baseline_name: Mapped[str | None] = mapped_column(String(300), nullable=True)
    goal: Mapped[str] = mapped_column(String(16))
    policy: Mapped[str] = mapped_column(String(16))
    alpha: Mapped[float] = mapped_column(Float)
    margin: Mapped[float | None] = mapped_column(Float, nullable=True)
    precision: Mapped[float | None] = mapped_column(Float, nullable=True)
    batch_size: Mapped[int] = mapped_column(Integer)
    max_items: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    store_results: Mapped[bool] = mapped_column(default=False)
    state: Mapped[str] = mapped_column(String(16), default="open")
    decision: Mapped[str] = mapped_column(String(16), default="undecided")
    n_items: Mapped[int] = mapped_column(Integer)
    items_used: Mapped[int] = mapped_column(Integer, default=0)
    open_size: Mapped[int] = mapped_column(Integer, default=0)
    order: Mapped[bytes] = mapped_column(LargeBinary)
    values: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    binary: Mapped[bool] = mapped_column(default=True)
    baseline_values: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    engine_state: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    stored_result: Mapped[str | None] = mapped_column(String(32), nullable=True)
    step: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    #: benchmark (these N items, exact at N) | generalized (items like these; issue 38)
    estimand: Mapped[str] = mapped_column(
        String(16), default="benchmark", server_default="benchmark"
    )

    __mapper_args__ = {"version_id_col": step}


class IrtFit(Base):
    """The IRT model fitted once per benchmark version (job kind ``irt_fit``) for ``fluid``.

    ``a``: float64 (n_items, dims) little-endian; ``offset``: float64 (n_items,), the item
    offsets of :meth:`app.core.irt.model.IRTModel.item_offsets`.
    """

    __tablename__ = "irt_fits"

    benchmark_version_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("benchmark_versions.id", ondelete="CASCADE"), primary_key=True
    )
    dims: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    n_models: Mapped[int] = mapped_column(Integer)
    models: Mapped[list[str]] = mapped_column(JSON, default=list)
    a: Mapped[bytes] = mapped_column(LargeBinary)
    offset: Mapped[bytes] = mapped_column(LargeBinary)
    converged: Mapped[bool] = mapped_column(default=False)
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, default=utcnow, server_default=func.now()
    )
