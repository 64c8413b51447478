"""What a gate's one-sided bets predict and what they are planned for (statistics-next §7-§8).

Predictions (``prediction=``, the §7 control variate with uniform draws):

* ``"random"``: ``f = 0`` (the one-sample CS of the candidate's mean);
* ``"paired"``: ``f = b``, the baseline's own outcome (the paired CS);
* ``"calibrated"``: ``f = P(a | b)`` fitted on the items seen before the round (least squares of
  ``a`` on ``b`` with one pseudo-observation ``a = 1/4`` at ``b = 0`` and ``a = 3/4`` at ``b = 1``,
  :data:`CALIBRATED_PRIOR`; for 0/1 ``b`` the two group means), which is ``b`` for a sibling and a
  constant (``random``) for an unrelated pair.

Design prior (``prior_weight``, :func:`design_priors`): each test's bet starts planned for its
design alternative, as if ``prior_weight`` pseudo-items had shown it, and follows the data as the
served items outnumber them; it only lifts an estimate short of that alternative, never holds back
one beyond it. It is a function of the past only, so every guarantee stays.
"""

from __future__ import annotations

import numpy as np

from app.core.sequential.gating.one_sided import OneSidedState

PREDICTIONS = ("calibrated", "paired", "random")
DEFAULT_PREDICTION = "calibrated"
#: pseudo-items behind each test's design alternative (:func:`design_priors`); 0 turns it off
DEFAULT_PRIOR_WEIGHT = 2000.0
#: ``calibrated``'s pseudo-observations ``(0, q)`` and ``(1, 1 - q)``: before any item its line is
#: halfway between an unrelated pair's ``f = 1/2`` and a sibling's ``f = b``. The first round is bet
#: with it (batches of 50 per benchmark: about 7 % of a small benchmark's items); with q = 1/2 (flat)
#: that round cost the 27,842-item sibling suite about 0.5 % of its items (bench/RESULTS.md, "The
#: calibrated prediction's first round"); after it the data outweigh the two pseudo-points.
CALIBRATED_PRIOR = 0.25


def design_priors(target, side, margin: float) -> np.ndarray:
    """Each test's design alternative, shape (S, P): its target moved by ``g = max(delta, 0.01)``
    onto the side it rejects towards (non-inferiority at ``B - delta``: ``B``, the sibling a CI
    gate usually sees; regression: ``B - delta - g``; better: ``B + g``), clipped to [0, 1]."""
    g = max(float(margin), 0.01)
    return np.clip(np.asarray(target) + g * np.asarray(side)[None, :], 0.0, 1.0)


def prediction_coefficients(kind: str, seen) -> tuple[np.ndarray, np.ndarray]:
    """``(f0, f1)`` of the round's prediction ``f = f0 + (f1 - f0) b``, each shape (S,).

    Parameters
    ----------
    kind : str
        One of :data:`PREDICTIONS`.
    seen : ndarray, shape (S, 6)
        Sums over the items served so far: ``n, sum a, sum b, sum a b, sum b^2, sum a^2``.

    Notes
    -----
    ``calibrated`` is the least-squares line of ``a`` on ``b`` through the seen items and the
    pseudo-points ``(0, q)``, ``(1, 1 - q)`` (``q`` = :data:`CALIBRATED_PRIOR`), read at ``b = 0``
    and ``b = 1`` and clipped to [0, 1] (for 0/1 results: ``(sum of a over the group + q) / (group
    size + 1)`` at ``b = 0``, ``+ 1 - q`` at ``b = 1``); between them ``f`` is linear in ``b``, so
    it stays in [0, 1] for graded results too.
    """
    sums = np.asarray(seen, dtype=np.float64)
    s = sums.shape[0]
    if kind == "random":
        return np.zeros(s), np.zeros(s)
    if kind == "paired":
        return np.zeros(s), np.ones(s)
    if kind != "calibrated":
        raise ValueError(f"prediction: expected one of {PREDICTIONS}, got {kind!r}")
    n, sa, sb, sab, sbb = (sums[:, i] for i in range(5))
    w = n + 2.0
    mb, ma = (sb + 1.0) / w, (sa + 1.0) / w
    var_b = (sbb + 1.0) / w - mb * mb
    slope = ((sab + 1.0 - CALIBRATED_PRIOR) / w - ma * mb) / np.maximum(var_b, 1e-12)
    f0 = ma - slope * mb
    return np.clip(f0, 0.0, 1.0), np.clip(f0 + slope, 0.0, 1.0)


def refresh_residuals(state: OneSidedState, seen, f0, f1) -> None:
    """Re-express the bet's statistics under the round's prediction, in place.

    The bet estimates ``E[Y_t | past]`` by ``F_t`` plus the mean residual ``a - f`` of the seen
    items; when ``f`` is refitted (``calibrated``) the residuals of earlier rounds are against an
    older ``f``, which biases that mean. With ``f = f0 + (f1 - f0) b`` the residuals and their
    sum of squares about their mean under the *current* ``f`` follow from the running sums
    (``seen`` as in :func:`prediction_coefficients`): ``resid`` and ``sq`` of the state are set to
    them. Both are functions of the past, so the bet stays predictable.
    """
    n, sa, sb, sab, sbb, saa = (np.asarray(seen, np.float64)[:, i] for i in range(6))
    lo = np.asarray(f0, np.float64)
    sl = np.asarray(f1, np.float64) - lo
    resid = sa - lo * n - sl * sb
    sq = saa - 2 * lo * sa - 2 * sl * sab + lo * lo * n + 2 * lo * sl * sb + sl * sl * sbb
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = np.where(n > 0, sq - resid * resid / n, 0.0)
    state.resid[:] = resid
    state.sq[:] = np.maximum(centred, 0.0)


__all__ = [
    "CALIBRATED_PRIOR",
    "DEFAULT_PREDICTION",
    "DEFAULT_PRIOR_WEIGHT",
    "PREDICTIONS",
    "design_priors",
    "prediction_coefficients",
    "refresh_residuals",
]
