"""Which of a score's estimates is *the answer*, and why (issue 38, statistics-next §10).

Model-based estimates (IRT, p-IRT, gp-IRT, Anchor Points' weights, reference calibration) borrow
strength from the subset's source models; for a target the sources do not support -- ability
outside every source's, poor person fit, or a subset score no source reached
(:func:`app.services.selection.scoring.population_shift` flags it) -- that borrowing is
extrapolation, and their calibrated intervals were never measured there. Then the answer is a
design-based interval (basis ``design``: the subset's own random design; or ``model-assisted``:
prediction plus inverse-probability-weighted residuals, valid whatever the model), and the
model-based estimates stay in ``estimates`` as secondary. A subset not drawn at random has no
design-based interval: the answer is then withheld, with the command that gets one.

Measured on extrapolation splits (fit on the weakest 80 % of the sources, score the strongest
20 %, and the mirror): ``bench/RESULTS.md``, section "Extrapolation splits (issue 38)".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion
from app.db.models.subset import Subset
from app.schemas.subsets import EstimatePublic, PopulationShift
from app.services.catalog.matrices import full_matrix

DESIGN_BASED = ("design", "model-assisted")


def choose_answer(
    estimates: Sequence[EstimatePublic], shift: PopulationShift, *, benchmark: str, size: int
) -> tuple[EstimatePublic | None, str]:
    """``(answer, reason)``: the first available estimate when the target is supported; else the
    first available design-based one (None when the subset has none: the reason then names a
    random subset of ``max(50, size)`` items)."""
    usable = [e for e in estimates if e.available and e.ci_low is not None]
    if not shift.flagged:
        first = usable[0] if usable else None
        return first, "" if first is None else f"{first.estimator}: the subset's default estimate"
    why = "; ".join(shift.reasons) or "outside what the source models support"
    design = [e for e in usable if e.basis in DESIGN_BASED]
    if design:
        pick = design[0]
        return pick, (
            f"extrapolation ({why}): answered with {pick.estimator} ({pick.basis}-based, valid "
            "whatever the source models); the model-based estimates borrow from sources unlike "
            "this model and are shown as secondary"
        )
    return None, (
        f"extrapolation ({why}): this subset was not drawn at random, so none of its intervals "
        "holds beyond the source models (every one is model-based); score a random subset "
        f"(benchslice subset create --benchmark {benchmark} --method random --size "
        f"{max(50, size)}) "
        "or run a session (benchslice evaluate), whose intervals are design-based"
    )


def stored_answer(
    estimates: Sequence[dict], shift: dict | None, *, benchmark: str, size: int
) -> tuple[dict | None, str]:
    """:func:`choose_answer` for a stored score (its ``estimates["items"]`` and
    ``population_shift`` columns), so a page reads the same answer the API returned. A row the
    schemas can no longer read (stored by an older version) answers with its first estimate."""
    try:
        rows = [EstimatePublic(**e) for e in estimates]
        flag = (
            PopulationShift(**shift)
            if shift
            else PopulationShift(checked="none", flagged=False, reasons=[], details={})
        )
    except ValidationError:
        return (estimates[0] if estimates else None), ""
    answer, reason = choose_answer(rows, flag, benchmark=benchmark, size=size)
    return (None if answer is None else answer.model_dump(mode="json")), reason


#: A re-anchor prompt needs this many models beyond the sources, and this share of the sources
#: (a rule of thumb, not a measured threshold).
REANCHOR_MIN_MODELS, REANCHOR_MIN_SHARE = 5, 0.05


def reanchor_prompt(session: Session, row: Subset, version: BenchmarkVersion) -> str | None:
    """A sentence when many models with full results now lie beyond the subset's sources
    (accuracy above the strongest source's or below the weakest's), naming the rebuild command;
    None otherwise (and for subsets without recorded sources)."""
    names = list(row.source_models or [])
    if not names:
        return None
    fm = full_matrix(session, version.id)
    src = [fm.rows[n] for n in names if n in fm.rows]
    if not src:
        return None
    acc = np.asarray(fm.accuracy, dtype=np.float64)
    others = np.setdiff1d(np.arange(acc.size), src)
    lo, hi = acc[src].min(), acc[src].max()
    above, below = int((acc[others] > hi).sum()), int((acc[others] < lo).sum())
    beyond = above + below
    if beyond < max(REANCHOR_MIN_MODELS, REANCHOR_MIN_SHARE * len(src)):
        return None
    ref = f"{version.benchmark.name}@v{version.version}"
    return (
        f"{beyond} models with full results lie beyond this subset's {len(src)} source models "
        f"({above} stronger than the strongest, {below} weaker than the weakest): its "
        "model-based estimates extrapolate for them. Rebuild it on today's models: "
        f"benchslice subset create --benchmark {ref} --method {row.method} --size {row.size}"
    )


__all__ = [
    "DESIGN_BASED",
    "REANCHOR_MIN_MODELS",
    "REANCHOR_MIN_SHARE",
    "choose_answer",
    "reanchor_prompt",
    "stored_answer",
]
