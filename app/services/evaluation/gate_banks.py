"""The IRT item banks a ``combined`` gate predicts with (issue 34 item 3).

A gate with ``prediction="combined"`` (:mod:`app.core.sequential.gating.combined`) needs the IRT
fit of every benchmark it holds (:mod:`app.services.catalog.irt_fits`, the fit the IRT session
policies use); creating one before the fits exist requests them and answers with the first job,
as a session with an IRT policy does. Services never commit.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from app.core.sequential.fluid import ItemBank
from app.db.models import BenchmarkVersion, Job
from app.errors import FieldIssue, InvalidInput
from app.services.catalog import irt_fits


def item_banks(session: Session, version_ids: list[uuid.UUID]) -> list[ItemBank]:
    """The stored IRT item bank of every benchmark (a ``combined`` gate is created only once
    each has one, and a version's fit is written once)."""
    out = []
    for vid in version_ids:
        fit = irt_fits.get_fit(session, vid)
        if fit is None:
            raise RuntimeError(f"benchmark version {vid}: its IRT fit is gone")
        out.append(irt_fits.item_bank(fit))
    return out


def missing_fits(
    session: Session, versions: list[BenchmarkVersion]
) -> tuple[Job, list[Job]] | None:
    """For ``prediction="combined"``: None when every benchmark has its IRT fit, else ``(the
    first missing one's fit job, the fit jobs created now)``: one is requested for every missing
    fit (single flight; flush only: the caller enqueues the new ones after commit). 422 naming
    ``benchmarks[i].benchmark`` when one has too few models with full results to fit."""
    first, created, errors = None, [], []
    for i, version in enumerate(versions):
        if irt_fits.get_fit(session, version.id) is not None:
            continue
        try:
            job, new = irt_fits.request_fit(session, version.id)
        except InvalidInput as exc:
            errors.append(FieldIssue(("benchmarks", i, "benchmark"), exc.detail))
            continue
        first = first or job
        if new:
            created.append(job)
    if errors:
        raise InvalidInput(
            "prediction 'combined' needs an IRT fit of every benchmark",
            errors=[*errors, FieldIssue(("prediction",), "use 'calibrated'")],
        )
    return None if first is None else (first, created)
