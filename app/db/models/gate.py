"""Release gates (issue 34): one candidate against a baseline on K benchmarks, one decision.

A :class:`Gate` holds everything a round needs, so it survives a restart:

* ``benchmarks``: one JSON entry per benchmark, in the order given: ``version_id``, ``benchmark``
  (name), ``version``, ``baseline``, ``margin``, ``n_items``.
* ``baseline_values``: the baselines' full results, ``<f8``, the K benchmarks concatenated.
* ``engine_state``: :class:`app.core.sequential.gating.gates.GateState` and each benchmark's
  bound track, packed by :func:`app.services.evaluation.sessions.pack_state`.
* ``open_items``: the open round's items (``<i4`` positions within each benchmark, the K
  benchmarks concatenated; ``open_counts`` splits them). Empty once the gate has its outcome.
* ``values``: the candidate's results on every applied round (``<f8``, round by round,
  benchmark by benchmark, in serving order); ``history`` says how many per round.
* ``step``: updates applied; SQLAlchemy's version counter, so an UPDATE that raced another fails
  instead of applying a round twice. The service also reads the row ``FOR UPDATE``.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.db.base import Base, Timestamps, UUIDPrimaryKey


class Gate(UUIDPrimaryKey, Timestamps, Base):
    """One release gate (see the module docstring for the packed columns)."""

    __tablename__ = "gates"

    project_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    model_name: Mapped[str] = mapped_column(String(300))
    rule: Mapped[str] = mapped_column(String(40))
    prediction: Mapped[str] = mapped_column(String(16))
    alpha: Mapped[float] = mapped_column(Float)
    batch_size: Mapped[int] = mapped_column(Integer)
    budget: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    #: open | decided | exhausted | abandoned
    state: Mapped[str] = mapped_column(String(16), default="open")
    #: open | pass | fail | inconclusive
    outcome: Mapped[str] = mapped_column(String(16), default="open")
    benchmarks: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    items_used: Mapped[int] = mapped_column(Integer, default=0)
    items_total: Mapped[int] = mapped_column(Integer)
    baseline_values: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    engine_state: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    open_counts: Mapped[list[int]] = mapped_column(JSON, default=list)
    open_items: Mapped[bytes] = mapped_column(LargeBinary, default=b"")
    values: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False, default=b""))
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    step: Mapped[int] = mapped_column(Integer, nullable=False, default=0)

    __table_args__ = (Index("ix_gates_project_created", "project_id", "created_at", "id"),)
    __mapper_args__ = {"version_id_col": step}
