"""A slice of the real GPQA matrix stored through the services (for subset/verdict/score tests)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.ingest import parse_columnar
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results


@dataclass
class Seeded:
    version_id: uuid.UUID
    correct: np.ndarray  # (models, items) as stored, rows sorted by name
    names: list[str]
    item_ids: list[str]
    subtasks: list[str]


def gpqa() -> dict[str, np.ndarray]:
    path = Path(os.environ["BENCHSLICE_SHARED_DATA"]) / "gpqa.npz"
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in ("correct", "item_ids", "models")}


def seed_gpqa(
    session: Session, *, n_models: int = 40, name: str | None = None, subtasks: bool = True
) -> Seeded:
    """Store the first ``n_models`` GPQA models (all 448 items) with two synthetic subtasks."""
    data = gpqa()
    correct = data["correct"][:n_models].astype(np.uint8)
    ids = [str(x) for x in data["item_ids"]]
    n = len(ids)
    subs = ["gpqa_a" if i % 3 else "gpqa_b" for i in range(n)] if subtasks else ["gpqa"] * n
    version, _ = create_version(session, name or f"gpqa-{uuid.uuid4().hex[:8]}", ids, subs)
    names = [f"m{i:03d}-{data['models'][i]}"[:200] for i in range(n_models)]
    for i, model in enumerate(names):
        store_results(
            session, version.id, ModelCreate(name=model), parse_columnar(correct[i].tolist())
        )
    order = np.argsort(names)
    return Seeded(version.id, correct[order], [names[i] for i in order], ids, subs)


def committed(factory: sessionmaker[Session], **kw) -> Seeded:
    with factory() as session:
        seeded = seed_gpqa(session, **kw)
        session.commit()
    return seeded


def committed_with_cleanup(factory: sessionmaker[Session], cleanup, **kw) -> Seeded:
    """:func:`committed`, with the benchmark and its models handed to the ``cleanup`` fixture."""
    from sqlalchemy import select

    from app.db.models import BenchmarkVersion, LanguageModel
    from app.db.models.benchmark import Benchmark

    seeded = committed(factory, **kw)
    with factory() as s:
        version = s.get(BenchmarkVersion, seeded.version_id)
        cleanup(Benchmark, version.benchmark_id)
        for mid in s.scalars(select(LanguageModel.id).where(LanguageModel.name.in_(seeded.names))):
            cleanup(LanguageModel, mid)
    return seeded


def store_irt_fit(session: Session, seeded: Seeded, *, dims: int = 2, max_iter: int = 60):
    """Fit the IRT model on the seeded models (seed 0) and store it as the version's fit, as the
    ``irt_fit`` job would (flush only); returns the fitted model."""
    from app.core.irt.fit import fit_irt
    from app.db.models import IrtFit

    model = fit_irt(seeded.correct.astype(float), dims=dims, rng=0, max_iter=max_iter)
    session.add(
        IrtFit(
            benchmark_version_id=seeded.version_id,
            dims=dims,
            seed=0,
            n_models=len(seeded.names),
            models=seeded.names,
            a=np.ascontiguousarray(model.a, dtype="<f8").tobytes(),
            offset=np.ascontiguousarray(model.item_offsets(), dtype="<f8").tobytes(),
            converged=bool(model.converged),
        )
    )
    session.flush()
    return model
