"""Issue 38: what the service answers for a target beyond the sources (SYNTHETIC, small).

A target stronger than every source on an Anchor Points subset is flagged, and no model-based
estimate is returned as its answer (the subset has no design-based interval: the answer is
withheld, naming the random subset that has one); on a random subset the same target is answered
design-based. A target inside the sources' range keeps the model-based answer.
"""

from __future__ import annotations

import numpy as np

from app.core.scoring.coverage import extrapolation_split
from app.core.scoring.score_models import score_models
from app.core.scoring.support import unsupported
from app.core.selectors import make_selector
from app.schemas.subsets import EstimatePublic, PopulationShift
from app.services.selection.extrapolation import DESIGN_BASED, choose_answer


def _matrix(seed: int = 38) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, 120)
    b = rng.normal(0, 1, 200)
    p = 1 / (1 + np.exp(-(1.3 * theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(np.uint8)


def _answer(method: str, target: np.ndarray, c: np.ndarray, src: np.ndarray, n: int = 20):
    sel = make_selector(method).fit(c[src]).select(n, rng=7)
    y = target[None, sel.indices].astype(np.float64)
    ref = c[src].astype(np.float64)
    flagged = bool(unsupported(sel, y, ref[:, sel.indices])[0])
    rows = [
        EstimatePublic(**b.row(0)) for b in score_models(sel, y, c.shape[1], reference_correct=ref)
    ]
    shift = PopulationShift(
        checked="accuracy_range_and_person_fit",
        flagged=flagged,
        reasons=["subset estimate outside the reference models' range"] if flagged else [],
        details={},
    )
    answer, reason = choose_answer(rows, shift, benchmark="synthetic@v1", size=50)
    return flagged, answer, reason, rows


def test_a_target_stronger_than_every_source_gets_no_model_based_answer() -> None:
    c = _matrix()
    src, _ = extrapolation_split(c, "weak_to_strong")
    strongest = np.ones(c.shape[1], dtype=np.uint8)  # every item right: beyond every source
    assert strongest.mean() > c[src].mean(axis=1).max()
    flagged, answer, reason, rows = _answer("anchor_points", strongest, c, src)
    assert flagged
    assert all(r.basis == "model" for r in rows)  # anchor points offers no design-based interval
    assert answer is None and "not drawn at random" in reason and "--method random" in reason
    # the same target on a random subset: answered design-based, flagged as extrapolation
    flagged, answer, reason, _ = _answer("random", strongest, c, src)
    assert flagged and answer is not None and answer.basis in DESIGN_BASED
    assert reason.startswith("extrapolation")


def test_a_target_inside_the_sources_range_keeps_the_model_based_answer() -> None:
    c = _matrix()
    src, _ = extrapolation_split(c, "weak_to_strong")
    acc = c[src].mean(axis=1)
    middle = c[src[np.argsort(acc)[acc.size // 2]]]  # the median source's own results
    flagged, answer, reason, _ = _answer("anchor_points", middle, c, src)
    assert not flagged
    assert answer is not None and answer.basis == "model" and answer.estimator == "weighted_mean"
    assert "default estimate" in reason
