"""Item health: per-item accuracy, discrimination, IRT fit and flags (issue 13 §3).

Vectorised over items. Flags:

* ``constant``: every model right, or every model wrong;
* ``saturated``: accuracy above ``1 - saturation`` or below ``saturation`` (default 2 %), not
  constant;
* ``negative_discrimination``: the rest-score point-biserial correlation is at most
  ``-min_effect`` (default -0.2) *and* significantly negative (one-sided ``p < 0.05``, t-test of
  a correlation) — a suspected wrong key. Significance alone is not enough with hundreds of
  models: on GPQA (420 models) it flags every item with ``r < -0.08``, 132 of 448, most of them
  hard items answered below chance whose strong models prefer an attractive distractor (GPQA's
  questions are written to have them). The floor is classical item analysis' limit (Ebel &
  Frisbie, *Essentials of Educational Measurement*, 1991: discrimination below 0.2 is poor, a
  negative one means "check the key") and keeps 39 GPQA items, the clearly reversed ones;
* ``misfit``: with an IRT model, the item's infit mean-square outside ``misfit_limits``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from app.core.irt.fit import IRTModel

FLAGS = ("constant", "saturated", "negative_discrimination", "misfit")


@dataclass(frozen=True)
class ItemHealth:
    """Per-item statistics (arrays of shape ``(N,)``) and flags.

    Attributes
    ----------
    accuracy : ndarray
    point_biserial : ndarray
        Correlation of the item with the models' rest score (total minus the item); NaN for a
        constant item.
    discrimination, difficulty, infit, outfit : ndarray or None
        With an IRT model: signed discrimination ``a_i . u`` along the mean discrimination
        direction ``u`` (``a_i`` for D = 1), difficulty ``c_i / ||a_i||`` (the logit offset over
        MDISC), infit and outfit mean-squares.
    flags : dict[str, ndarray of bool]
        One mask per name in :data:`FLAGS`.
    n_models : int
    """

    accuracy: np.ndarray
    point_biserial: np.ndarray
    discrimination: np.ndarray | None
    difficulty: np.ndarray | None
    infit: np.ndarray | None
    outfit: np.ndarray | None
    flags: dict
    n_models: int

    def item_flags(self, i: int) -> list[str]:
        """The flags of item ``i``, in :data:`FLAGS` order."""
        return [f for f in FLAGS if bool(self.flags[f][i])]

    def flagged(self, flags=FLAGS) -> np.ndarray:
        """Mask of items carrying any of ``flags``."""
        unknown = [f for f in flags if f not in FLAGS]
        if unknown:
            raise ValueError(f"flag: unknown flag(s) {unknown}; choose from {list(FLAGS)}")
        out = np.zeros(self.accuracy.shape[0], dtype=bool)
        for f in flags:  # at most four flags
            out |= self.flags[f]
        return out

    def summary(self) -> dict:
        """Counts per flag, unflagged items and the effective number of informative items.

        ``effective_informative = (sum r+)^2 / sum r+^2`` with ``r+ = max(point_biserial, 0)``
        over unflagged items (Kish's effective size of discrimination weights: ``N`` equally
        discriminating items count ``N``; a few sharp items among many flat ones count few).
        """
        ok = ~self.flagged()
        r = np.where(ok, np.nan_to_num(self.point_biserial, nan=0.0), 0.0).clip(min=0.0)
        eff = float(r.sum() ** 2 / np.sum(r**2)) if np.any(r > 0) else 0.0
        return {
            "n_items": int(self.accuracy.shape[0]),
            "n_models": self.n_models,
            "counts": {f: int(self.flags[f].sum()) for f in FLAGS},
            "n_flagged": int((~ok).sum()),
            "n_informative": int(ok.sum()),
            "effective_informative": eff,
        }


def item_health(
    correct,
    *,
    irt: IRTModel | None = None,
    theta=None,
    saturation: float = 0.02,
    misfit_limits: tuple[float, float] = (0.7, 1.3),
    alpha: float = 0.05,
    min_effect: float = 0.2,
) -> ItemHealth:
    """Health of every item from the models' full results.

    Parameters
    ----------
    correct : array_like, shape (n_models, N)
        0/1 (or [0, 1]) results of the models with full results.
    irt : IRTModel, optional
        A fitted item bank over the same ``N`` items, for discrimination, difficulty and fit.
    theta : array_like, shape (n_models, D), optional
        The models' abilities under ``irt`` (default ``irt.theta``, which must then be the fit's
        own models in ``correct``'s row order).
    saturation : float
        ``saturated`` below this accuracy or above ``1 -`` it.
    misfit_limits : (float, float)
        Acceptable infit mean-square range (Wright & Linacre's 0.7-1.3 for a high-stakes test).
    alpha : float
        One-sided level of the negative-discrimination test.
    min_effect : float
        Effect-size floor of ``negative_discrimination``: ``r <= -min_effect`` is needed too
        (0 = significance alone).

    Returns
    -------
    ItemHealth

    Notes
    -----
    Rest-score point-biserial: ``r_i = corr_j(y_ji, T_j - y_ji)`` with ``T_j`` model ``j``'s total;
    the negative flag needs ``t = r sqrt((m - 2) / (1 - r^2)) < t_{alpha, m-2}`` lower quantile
    and ``r <= -min_effect``.
    Infit ``= sum_j (y - p)^2 / sum_j p (1 - p)``, outfit ``= mean_j (y - p)^2 / (p (1 - p))``
    with ``p = P(y_ji = 1 | theta_j)`` (Wright & Masters, *Rating Scale Analysis*, 1982).
    """
    y = np.asarray(correct, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 3 or y.shape[1] < 2:
        raise ValueError("correct: expected results of >= 3 models on >= 2 items")
    if not np.all(np.isfinite(y)) or y.min() < 0 or y.max() > 1:
        raise ValueError("correct: values must be in [0, 1]")
    if not 0.0 <= saturation < 0.5:
        raise ValueError("saturation: expected a share in [0, 0.5)")
    m = y.shape[0]
    acc = y.mean(axis=0)
    rest = y.sum(axis=1, keepdims=True) - y
    yc = y - acc
    rc = rest - rest.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (yc * rc).sum(axis=0) / np.sqrt((yc**2).sum(axis=0) * (rc**2).sum(axis=0))
        t = r * np.sqrt((m - 2) / np.maximum(1.0 - r**2, 1e-12))
    constant = np.all(y == y[:1], axis=0)
    saturated = ~constant & ((acc < saturation) | (acc > 1.0 - saturation))
    if not 0.0 <= min_effect < 1.0:
        raise ValueError("min_effect: expected a correlation floor in [0, 1)")
    negative = (np.nan_to_num(t, nan=0.0) < _st.t.ppf(alpha, m - 2)) & (
        np.nan_to_num(r, nan=0.0) <= -min_effect
    )
    disc = diff = infit = outfit = None
    misfit = np.zeros(y.shape[1], dtype=bool)
    if irt is not None:
        if irt.n_items != y.shape[1]:
            raise ValueError(f"irt: item bank has {irt.n_items} items, results have {y.shape[1]}")
        th = irt.theta if theta is None else np.asarray(theta, dtype=np.float64)
        if th.shape[0] != m:
            raise ValueError("theta: expected one ability per model in correct")
        a = np.asarray(irt.a)
        u = a.mean(axis=0)
        u = u / np.linalg.norm(u) if np.linalg.norm(u) > 0 else u
        disc = a @ u
        mdisc = np.linalg.norm(a, axis=1)
        diff = irt.item_offsets() / np.where(mdisc > 0, mdisc, np.nan)
        p = np.clip(irt.predict_proba(th), 1e-9, 1 - 1e-9)
        sq = (y - p) ** 2
        v = p * (1.0 - p)
        infit = sq.sum(axis=0) / v.sum(axis=0)
        outfit = (sq / v).mean(axis=0)
        misfit = ~constant & ((infit < misfit_limits[0]) | (infit > misfit_limits[1]))
    return ItemHealth(
        accuracy=acc,
        point_biserial=np.where(constant, np.nan, r),
        discrimination=disc,
        difficulty=diff,
        infit=infit,
        outfit=outfit,
        flags={
            "constant": constant,
            "saturated": saturated,
            "negative_discrimination": negative & ~constant,
            "misfit": misfit,
        },
        n_models=m,
    )


__all__ = ["FLAGS", "ItemHealth", "item_health"]
