"""IRT-based estimators of tinyBenchmarks (paper §3.6): p-IRT and gp-IRT.

Both read only what a stored :class:`~app.core.results.Selection` of ``tiny_benchmarks`` carries in
``selection.fitted`` (candidate item parameters, the anchors' candidate positions, ``lambda_gp``),
so a stored selection scores new models with no refit. ``"irt"`` (the paper's anchor-weighted mean)
is the linear estimator ``sum_c w_c y_c`` and lives in :mod:`app.core.estimation.estimators`.
"""

from __future__ import annotations

import numpy as np

from app.core.irt.fit import IRTModel
from app.core.results import Selection

FORM_CODES = ("scalar_difficulty", "per_dimension")
_REQUIRED = (
    "irt_a",
    "irt_b",
    "irt_form",
    "anchor_candidate_positions",
    "ability_prior",
)


def item_bank(selection: Selection) -> IRTModel:
    """Rebuild the candidate-item IRT bank stored in a tiny_benchmarks selection."""
    missing = [k for k in _REQUIRED if k not in selection.fitted]
    if missing:
        raise ValueError(
            f"selection: {selection.method!r} selection lacks the fitted IRT state {missing}; "
            "p_irt / gp_irt need a tiny_benchmarks selection"
        )
    f = selection.fitted
    a = np.asarray(f["irt_a"])
    return IRTModel(
        a=a,
        b=np.asarray(f["irt_b"]),
        theta=np.zeros((1, a.shape[1])),
        form=FORM_CODES[int(f["irt_form"])],
        prior="fixed",
        dims=int(a.shape[1]),
    )


def p_irt_parts(selection: Selection, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Data part, IRT part and ``lambda = k / N`` of p-IRT for models known on the anchors.

    Returns
    -------
    data_part : ndarray, shape (n_models,)
        Mean correctness on the ``k`` distinct anchors.
    irt_part : ndarray, shape (n_models,)
        ``mean_{non-anchor candidates} P(theta_hat, i)`` with ``theta_hat`` the MAP ability from
        the anchors (prior ``N(0, ability_prior^2 I)``).
    lam : float
        ``k / N``, the share of candidates actually observed.
    """
    bank = item_bank(selection)
    anchors = np.asarray(selection.fitted["anchor_candidate_positions"], dtype=np.int64)
    n_cand = bank.n_items
    rest = np.setdiff1d(np.arange(n_cand), anchors, assume_unique=True)
    data_part = correct.mean(axis=1)
    if rest.size == 0:
        return data_part, data_part, 1.0
    ability = bank.score(correct, anchors, prior=float(selection.fitted["ability_prior"]))
    irt_part = bank.predict_proba(ability.theta, rest).mean(axis=1)
    return data_part, irt_part, anchors.size / n_cand


def p_irt(selection: Selection, correct: np.ndarray, confidence: np.ndarray | None) -> np.ndarray:
    """p-IRT: ``lambda * mean_anchors y + (1 - lambda) * mean_{non-anchors} P(theta_hat, i)``.

    Notes
    -----
    As in the original tinyBenchmarks with ``lambda = k / N`` (``k`` distinct anchors, ``N``
    candidates). The ability is the MAP under the fit's ``N(0, I)`` prior (batched Newton,
    :meth:`app.core.irt.fit.IRTModel.score`) rather than an unregularised BFGS maximum-likelihood
    fit from 0, which is not unique when ``k`` is small compared with ``D``.
    """
    data_part, irt_part, lam = p_irt_parts(selection, correct)
    return lam * data_part + (1.0 - lam) * irt_part


def gp_irt(selection: Selection, correct: np.ndarray, confidence: np.ndarray | None) -> np.ndarray:
    """gp-IRT: ``lambda' * IRT + (1 - lambda') * p-IRT``, ``lambda' = beta^2 / (v' + beta^2)``.

    ``IRT`` is the anchor-weighted mean; ``lambda'`` was computed at selection time on held-out
    **source** models (never on target labels) and is stored as ``fitted["lambda_gp"]``.
    """
    if "lambda_gp" not in selection.fitted:
        raise ValueError(
            "estimator: gp_irt needs a selection calibrated on held-out sources "
            "(tiny_benchmarks with calibrate_gp_irt=True)"
        )
    lam_gp = float(selection.fitted["lambda_gp"])
    irt = correct @ selection.weights
    return lam_gp * irt + (1.0 - lam_gp) * p_irt(selection, correct, confidence)


__all__ = ["FORM_CODES", "gp_irt", "item_bank", "p_irt", "p_irt_parts"]
