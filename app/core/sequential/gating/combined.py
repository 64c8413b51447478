"""The ``combined`` gate prediction: the baseline's outcome and the candidate's IRT probability.

A gate's ``calibrated`` prediction (:mod:`app.core.sequential.gating.bets`) is ``P(a | b)``: the
baseline's own outcome, which is nearly everything for a fine-tune of the baseline and nothing
for an unrelated pair (then it is ``random``). ``combined`` adds what the stored models know of
the items: the IRT probability ``p_i = P(a_i = 1 | theta_hat)`` of the benchmark's fitted item
bank at the candidate's MAP ability from the items served so far
(:func:`app.core.sequential.fluid.map_ability`, the ``assisted`` session policy's prediction),
and predicts by the least-squares line of ``a`` on ``(b, p)`` through the served items::

    f_i = clip(beta_0 + beta_b b_i + beta_p p_i, 0, 1)

with both slopes shrunk towards 0 by :data:`RIDGE` pseudo-items (so before any item ``f = 1/2``;
``calibrated`` starts halfway to ``b``) and the intercept from the served mean of ``a`` with one
pseudo-observation at 1/2. The regression chooses per pair how much of ``b`` and of ``p`` to use: a sibling gets ``b``,
an unrelated pair ``p``, and a pair in between both.

Everything is refitted at the start of each round from the served items only (``theta_hat``,
the slopes, the residuals the bet reads), so the prediction is a function of the past and every
guarantee of the gate holds whatever the fit (statistics-next §7-§8). Cost per round
``O(S N D)`` (the Newton steps of the ability and the record over what remains), against the
``O(S k)`` of the affine predictions: for the handful of gates a service runs, it is nothing.
"""

from __future__ import annotations

import numpy as np

from app.core.sequential.fluid import ItemBank, map_ability
from app.core.sequential.gating.one_sided import OneSidedState, uniform_record

COMBINED = "combined"
#: pseudo-items of shrinkage of each slope towards 0 (in units of a sum of squares)
RIDGE = 1.0


def _item_order(values_ord, order, t) -> tuple[np.ndarray, np.ndarray]:
    """``(y, seen)`` by item index, shape (S, N), from values along the serving order."""
    s, n = order.shape
    seen_ord = np.arange(n)[None, :] < np.asarray(t).reshape(-1, 1)
    y = np.zeros((s, n))
    seen = np.zeros((s, n), dtype=bool)
    np.put_along_axis(y, order, np.where(seen_ord, values_ord, 0.0), axis=1)
    np.put_along_axis(seen, order, seen_ord, axis=1)
    return y, seen


def combined_predictions(
    bank: ItemBank, order, b_ord, a_ord, t, theta0=None
) -> tuple[np.ndarray, np.ndarray]:
    """The round's ``f`` along the serving order, shape (S, N), and the abilities behind it.

    Parameters
    ----------
    bank : ItemBank
        The benchmark's item bank (``N`` items, in the benchmark's item order).
    order : ndarray of int, shape (S, N)
        Serving orders.
    b_ord, a_ord : ndarray, shape (S, N)
        Baseline's and candidate's results along the order (``a_ord`` is read only where served).
    t : ndarray of int, shape (S,)
        Items served so far (the first ``t_s`` of each order).
    theta0 : ndarray, shape (S, D), optional
        The previous round's abilities: Newton's starting point (the MAP is unique, so only the
        iterations it takes depend on it).

    Returns
    -------
    f : ndarray, shape (S, N)
        ``clip(beta_0 + beta_b b + beta_p p, 0, 1)`` with the ridge least-squares fit on the
        served items (module docstring); ``1/2`` everywhere before any item.
    theta : ndarray, shape (S, D)
        The MAP abilities from the served items.
    """
    od = np.asarray(order, dtype=np.int64)
    tt = np.asarray(t, dtype=np.int64).reshape(-1)
    a_ord = np.asarray(a_ord, dtype=np.float64)
    b_ord = np.asarray(b_ord, dtype=np.float64)
    y, seen = _item_order(a_ord, od, tt)
    theta, _ = map_ability(bank, y, seen, theta0)
    p_ord = np.take_along_axis(bank.probabilities(theta), od, axis=1)
    w = (np.arange(od.shape[1])[None, :] < tt[:, None]).astype(np.float64)
    n = w.sum(axis=1)
    x = np.stack([b_ord, p_ord], axis=2)  # (S, N, 2)
    safe_n = np.maximum(n, 1.0)[:, None]
    x_bar = np.where(n[:, None] > 0, np.einsum("sn,snd->sd", w, x) / safe_n, x.mean(axis=1))
    a_bar = ((w * a_ord).sum(axis=1) + 0.5) / (n + 1.0)
    xc = (x - x_bar[:, None, :]) * w[:, :, None]
    gram = np.einsum("snd,sne->sde", xc, xc) + RIDGE * np.eye(2)
    cross = np.einsum("snd,sn->sd", xc, a_ord - a_bar[:, None])
    slope = np.linalg.solve(gram, cross[..., None])[..., 0]
    f = a_bar[:, None] + np.einsum("snd,sd->sn", x - x_bar[:, None, :], slope)
    return np.clip(f, 0.0, 1.0), theta


def combined_record(f_ord, order, t, k: int):
    """:func:`~app.core.sequential.gating.one_sided.uniform_record` of the round's ``f``."""
    od = np.asarray(order, dtype=np.int64)
    f = np.empty(od.shape)
    np.put_along_axis(f, od, f_ord, axis=1)
    return uniform_record(f, od, t, k)


def combined_residuals(state: OneSidedState, f_ord, a_ord) -> None:
    """Set the bet's residual sum and centred sum of squares under the round's ``f`` (in place).

    The served items are the first ``state.t`` along the order; as
    :func:`app.core.sequential.gating.bets.refresh_residuals` for the affine predictions, both
    are functions of the past only.
    """
    w = np.arange(f_ord.shape[1])[None, :] < np.asarray(state.t).reshape(-1, 1)
    r = np.where(w, np.asarray(a_ord, np.float64) - f_ord, 0.0)
    n = w.sum(axis=1)
    resid = r.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        centred = np.where(n > 0, (r * r).sum(axis=1) - resid * resid / np.maximum(n, 1), 0.0)
    state.resid[:] = resid
    state.sq[:] = np.maximum(centred, 0.0)


__all__ = ["COMBINED", "RIDGE", "combined_predictions", "combined_record", "combined_residuals"]
