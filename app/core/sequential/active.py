"""Confidence sequences for a model's mean with predictions and active item choice (§7).

A session compares a new model with a baseline whose results on all ``N`` items are stored, so the
baseline's mean ``B`` is a known constant and only the new model's full-benchmark mean
``A = (1/N) sum_i a_i`` is unknown. This module keeps a time-uniform (1 - alpha) confidence
sequence (CS) for ``A`` while items are drawn without replacement by *any predictable design*
(sampling probabilities chosen from the past, with a floor) and corrected by *any predictable
prediction* (a control variate). The interval for ``Delta = A - B`` is the CS shifted by ``B``, so
a decision ``better`` (lower > B) or ``worse`` (upper < B) is wrong with probability at most
``alpha``, at every look, whatever the predictions are.

Construction (statistics-next §7)
---------------------------------
Before draw ``t`` let ``R_t`` be the items not yet drawn (``r_t = |R_t| = N - t + 1``) and
``S_{t-1}`` the sum of the observed ``a``. From the past only, choose predictions
``f_t(i) in [0, 1]`` and probabilities ``pi_t(i)`` over ``R_t`` with a floor
``pi_t(i) >= gamma / r_t``. Draw ``I_t ~ pi_t``, observe ``a_{I_t}`` and form

    Y_t = F_t + (a_{I_t} - f_t(I_t)) / (r_t pi_t(I_t)),   F_t = (1/r_t) sum_{j in R_t} f_t(j).

Then ``E[Y_t | past] = (1/r_t) sum_{j in R_t} a_j = mu_t(A)`` with
``mu_t(m) = (N m - S_{t-1}) / r_t`` (the without-replacement centring of WSR 2020), so for every
predictable bet ``lam_t(m)`` the capital ``K_t(m) = prod_s (1 + lam_s(m) (Y_s - mu_s(m)))`` is a
non-negative martingale at ``m = A``. ``Y_t`` lies in the predictable range ``[L_t, U_t]``,
``L_t = F_t - max_i f_t(i) / (r_t pi_t(i))`` and ``U_t = F_t + max_i (1 - f_t(i)) / (r_t pi_t(i))``
(``L_t <= 0`` and ``U_t >= 1``), and bets in ``[-c / (U_t - mu), c / (mu - L_t)]`` keep the capital
positive. By Ville's inequality the running intersection

    C_t = { m : max_{s<=t} K_s(m) < 1/alpha }  cap  [S_t / N, (S_t + N - t) / N]

is a (1 - alpha) CS for ``A``; at ``t = N`` it is the exact value. With ``f = 0`` and uniform
``pi`` (``r_t pi_t = 1``) ``Y_t = a_{I_t}`` and this is exactly the one-sample CS of
:mod:`app.core.sequential.confidence_sequences` (same bets, same state); validity never depends
on the predictions being right, they only change how many items are needed.

Bets (``bet=``, as in :mod:`~app.core.sequential.confidence_sequences`)
----------------------------------------------------------------------
``"agrapa"`` (default): ``lam_t(m) = D / (s2_{t-1} + D^2)`` with ``D = mu_hat_t - mu_t(m)``,
clipped to the bounds above. ``mu_hat_t = F_t + (e_0 + sum_{s<t} (Y_s - F_s)) / t`` estimates
``E[Y_t | past]`` (the prediction's mean over ``R_t`` plus the running mean of the
inverse-probability-weighted residuals, one pseudo-residual ``e_0 = 1/2 - F_t`` as a prior);
``s2_{t-1} = (1/4 + sum_{s<t} (Y_s - mu_hat_s)^2) / t``. With ``f = 0`` and uniform draws these are
the sample mean ``(1/2 + S_{t-1}) / t`` and variance of the one-sample CS. ``"plugin"`` and
``"mixture"``: the hedged plug-in bet and the average of both capitals, with the range
``[L_t, U_t]`` in place of [0, 1]. ``"agrapa-cv"`` (the ``assisted`` policy's bet): aGRAPA whose
estimates lean on the predictions, ``lam_t(m) = w D / (s2_{t-1} + D^2)`` with
``mu_hat_t = F_t + sum_{s<t} (Y_s - F_s) / (t - 1 + kappa)`` (``kappa`` pseudo-residuals 0: the
prior for ``E[Y_t | past]`` is the prediction's mean ``F_t``),
``s2_{t-1} = (kappa_v V_t + sum_{s<t} (Y_s - mu_hat_s)^2) / (t - 1 + kappa_v)`` with
``V_t = (1/r_t) sum_{j in R_t} f_t(j) (1 - f_t(j))`` the predicted variance of ``a - f`` (1/4 when
``f = 0``), and the scale ``w`` (:data:`CV_BET`; ``w > 1`` bets more than the Kelly
approximation: a larger spread of the capital reaches ``1/alpha`` sooner in the median session).
All are predictable (``F_t``, ``V_t`` and the clipping range are computed before draw ``t``), so
all are valid; a bet is a stored name whose constants never change, so a session replays
exactly.

Drawing a batch
---------------
:func:`draw_batch` draws the ``k`` items of a batch one after another, recomputing ``pi`` over
what remains after each draw (identities only: the batch's outcomes are not known yet), and
returns a :class:`DrawRecord` with every ``pi_t(I_t)``, ``r_t``, ``f_t(I_t)``, ``F_t``, ``L_t`` and
``U_t``. :func:`acs_update` later consumes the record with the outcomes, in draw order. The record
and the outcomes are all a replay needs (the CS is a deterministic function of them); the
prediction inputs (ability estimates) and the seed that produced the uniforms are stored by the
caller.

Cost: a draw is ``O(S N)`` (probabilities over the remaining items of ``S`` sessions); an update
is ``O(S G)`` for a grid of ``G`` candidate means (``G = N + 1`` for 0/1 results).

References
----------
Waudby-Smith, I. & Ramdas, A. (2020). Confidence sequences for sampling without replacement.
NeurIPS 33.
Waudby-Smith, I. & Ramdas, A. (2024). Estimating means of bounded random variables by betting.
JRSS-B 86(1), 1-27.
Zrnic, T. & Candès, E. J. (2024). Active statistical inference. ICML.
Kilian, P., Cortinovis, S. & Caron, F. (2025). Anytime-valid, Bayes-assisted, prediction-powered
inference. arXiv:2505.18000.
Horvitz, D. G. & Thompson, D. J. (1952). A generalization of sampling without replacement from a
finite universe. JASA 47, 663-685.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from app.core.sequential.confidence_sequences import (
    BETS,
    DEFAULT_ALPHA,
    DEFAULT_C,
    CSState,
    combined_log_capital,
    cs_init,
    cs_interval,
)

DEFAULT_GAMMA = 0.3
_TINY = 1e-12
#: The predictions-leaning aGRAPA bet: (name, kappa, kappa_v, w). Measured on held-out GPQA paths
#: (bench/RESULTS.md, issue 23); part of the bet's definition, so never changed in place.
CV_BET = ("agrapa-cv", 10.0, 20.0, 1.5)
ACTIVE_BETS = (*BETS, CV_BET[0])


@dataclass
class ActiveCSState(CSState):
    """State of ``S`` §7 confidence sequences (a :class:`CSState` plus the residual sum).

    Attributes
    ----------
    resid : ndarray, shape (S,)
        ``sum_{s<=t} (Y_s - F_s)``, the inverse-probability-weighted residuals (the bet's mean
        estimate). ``total`` is ``S_t``, the sum of the observed values ``a``.

    Notes
    -----
    Every other field is that of :class:`CSState`; :func:`cs_interval` and
    :func:`combined_log_capital` apply unchanged.
    """

    resid: np.ndarray = None  # type: ignore[assignment]

    def copy(self) -> ActiveCSState:
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        return ActiveCSState(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        )

    @classmethod
    def from_dict(cls, d: dict) -> ActiveCSState:
        base = CSState.from_dict(d)
        resid = np.asarray(d["resid"], dtype=np.float64).reshape(-1)
        if resid.shape != base.t.shape:
            raise ValueError("resid: shape does not match sessions")
        kw = {f.name: getattr(base, f.name) for f in fields(base)}
        return cls(**kw, resid=resid)


@dataclass(frozen=True)
class DrawRecord:
    """The design of ``k`` draws of ``S`` sessions (everything a replay of the CS needs).

    Attributes
    ----------
    items : ndarray of int64, shape (S, k)
        ``I_t``, in draw order.
    prob : ndarray, shape (S, k)
        ``pi_t(I_t)``.
    remaining : ndarray of int64, shape (S, k)
        ``r_t = |R_t|`` (items not drawn before draw ``t``).
    prediction : ndarray, shape (S, k)
        ``f_t(I_t)``.
    mean_prediction : ndarray, shape (S, k)
        ``F_t``.
    low, high : ndarray, shape (S, k)
        ``L_t`` and ``U_t``, the range of ``Y_t``.
    mean_variance : ndarray, shape (S, k)
        ``V_t = (1/r_t) sum_{j in R_t} f_t(j) (1 - f_t(j))`` (the ``"agrapa-cv"`` bet's variance
        prior; records stored before it existed read as 1/4, which no other bet uses).
    """

    items: np.ndarray
    prob: np.ndarray
    remaining: np.ndarray
    prediction: np.ndarray
    mean_prediction: np.ndarray
    low: np.ndarray
    high: np.ndarray
    mean_variance: np.ndarray

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> DrawRecord:
        items = np.asarray(d["items"], dtype=np.int64)
        if items.ndim == 1:
            items = items[None, :]
        kw = {"items": items}
        for f in fields(cls):
            if f.name == "items":
                continue
            dtype = np.int64 if f.name == "remaining" else np.float64
            if f.name == "mean_variance" and f.name not in d:  # stored before the field
                kw[f.name] = np.full(items.shape, 0.25)
                continue
            kw[f.name] = np.asarray(d[f.name], dtype=dtype).reshape(items.shape)
        return cls(**kw)

    @classmethod
    def concatenate(cls, records) -> DrawRecord:
        """Join records of the same sessions along the draw axis."""
        recs = list(records)
        if not recs:
            raise ValueError("records: nothing to join")
        return cls(
            **{
                f.name: np.concatenate([getattr(r, f.name) for r in recs], axis=1)
                for f in fields(cls)
            }
        )

    def take(self, rows) -> DrawRecord:
        """The record of the sessions ``rows``."""
        return DrawRecord(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})


def _check_gamma(gamma: float) -> float:
    g = float(gamma)
    if not (0.0 < g <= 1.0):
        raise ValueError("gamma: the floor must lie in (0, 1]")
    return g


def design_probabilities(scores, available, gamma: float = DEFAULT_GAMMA) -> np.ndarray:
    """Sampling probabilities with a floor: ``pi(i) = (1 - gamma) s_i / sum_R s + gamma / r``.

    Parameters
    ----------
    scores : array_like, shape (S, N), or None
        Non-negative item scores (e.g. :func:`neyman_scores` or Fluid's information criterion);
        ``None`` (or a session whose scores sum to 0 over the available items) gives uniform
        probabilities.
    available : array_like of bool, shape (S, N)
        ``R_t``, the items not drawn yet (at least one per session).
    gamma : float
        Floor in (0, 1]: every available item has ``pi >= gamma / r``; ``gamma = 1`` is uniform.

    Returns
    -------
    ndarray, shape (S, N)
        Rows sum to 1; 0 outside ``available``.
    """
    g = _check_gamma(gamma)
    avail = np.asarray(available, dtype=bool)
    r = avail.sum(axis=1, keepdims=True)
    if np.any(r == 0):
        raise ValueError("available: every session needs at least one item left")
    uniform = avail / r
    if scores is None or g == 1.0:
        return uniform
    s = np.where(avail, np.asarray(scores, dtype=np.float64), 0.0)
    if not np.all(np.isfinite(s)) or s.min(initial=0.0) < 0:
        raise ValueError("scores: must be finite and non-negative")
    tot = s.sum(axis=1, keepdims=True)
    share = np.divide(s, tot, out=uniform.copy(), where=tot > 0)
    return (1.0 - g) * share + g * uniform


def neyman_scores(predictions) -> np.ndarray:
    """``sqrt(f (1 - f))``: the Neyman-like allocation of statistics-next §7."""
    f = np.asarray(predictions, dtype=np.float64)
    return np.sqrt(np.clip(f * (1.0 - f), 0.0, None))


def _check_design(predictions, available):
    f = np.asarray(predictions, dtype=np.float64)
    avail = np.array(available, dtype=bool, copy=True)
    if f.ndim != 2 or f.shape != avail.shape:
        raise ValueError("predictions: expected shape (S, N) matching available")
    if not np.all(np.isfinite(f)) or f.min(initial=0.0) < 0 or f.max(initial=0.0) > 1:
        raise ValueError("predictions: must be finite and in [0, 1]")
    return f, avail


def _sequential_draws(f, scores, avail, k, gamma, choose) -> DrawRecord:
    """Draw ``k`` times; ``choose(j, pi)`` returns the item of draw ``j`` per session."""
    s, rows = f.shape[0], np.arange(f.shape[0])
    cols = {name: np.empty((s, k)) for name in ("prob", "pred", "fbar", "low", "high", "var")}
    items = np.empty((s, k), dtype=np.int64)
    remaining = np.empty((s, k), dtype=np.int64)
    for j in range(k):  # draws of a batch are sequential (pi depends on what is left)
        pi = design_probabilities(scores, avail, gamma)
        idx = choose(j, pi)
        if not avail[rows, idx].all():
            raise ValueError("items: an item was drawn twice")
        r = avail.sum(axis=1)
        rpi = np.where(avail, pi * r[:, None], np.inf)
        fbar = np.where(avail, f, 0.0).sum(axis=1) / r
        items[:, j], remaining[:, j] = idx, r
        cols["prob"][:, j] = pi[rows, idx]
        cols["pred"][:, j] = f[rows, idx]
        cols["fbar"][:, j] = fbar
        cols["low"][:, j] = fbar - (f / rpi).max(axis=1)
        cols["high"][:, j] = fbar + ((1.0 - f) / rpi).max(axis=1)
        cols["var"][:, j] = np.where(avail, f * (1.0 - f), 0.0).sum(axis=1) / r
        avail[rows, idx] = False
    return DrawRecord(
        items=items,
        prob=cols["prob"],
        remaining=remaining,
        prediction=cols["pred"],
        mean_prediction=cols["fbar"],
        low=cols["low"],
        high=cols["high"],
        mean_variance=cols["var"],
    )


def draw_batch(
    predictions,
    scores,
    available,
    k: int,
    *,
    uniforms,
    gamma: float = DEFAULT_GAMMA,
) -> DrawRecord:
    """Draw ``k`` items per session one after another, recomputing ``pi`` after each draw.

    Parameters
    ----------
    predictions : array_like, shape (S, N)
        ``f(i)`` in [0, 1], fixed for the batch (computed from results seen before it).
    scores : array_like, shape (S, N), or None
        Allocation scores (:func:`design_probabilities`), fixed for the batch.
    available : array_like of bool, shape (S, N)
        Items not drawn before the batch (not modified).
    k : int
        Draws per session (at most the number of available items).
    uniforms : array_like, shape (S, k)
        Uniform [0, 1) numbers, one per draw (from the session's seeded generator): draw ``j``
        takes the item where the cumulative ``pi`` first exceeds ``uniforms[:, j]``, so the
        draws are a deterministic function of the seed.
    gamma : float
        Floor of the design (:func:`design_probabilities`).

    Returns
    -------
    DrawRecord
    """
    f, avail = _check_design(predictions, available)
    k = int(k)
    if k < 1 or np.any(avail.sum(axis=1) < k):
        raise ValueError("k: expected 1 <= k <= items left")
    u = np.asarray(uniforms, dtype=np.float64)
    if u.shape != (f.shape[0], k) or u.min() < 0 or u.max() >= 1:
        raise ValueError(f"uniforms: expected shape ({f.shape[0]}, {k}) with values in [0, 1)")

    def choose(j, pi):
        cdf = np.cumsum(pi, axis=1)
        target = np.minimum(u[:, j], 1.0 - 1e-12) * cdf[:, -1]
        return np.argmax(cdf > target[:, None], axis=1)

    return _sequential_draws(f, scores, avail, k, gamma, choose)


def record_draws(predictions, scores, available, items, *, gamma: float = DEFAULT_GAMMA):
    """The :class:`DrawRecord` of given draws (a replay, or every order of a small population).

    Parameters are those of :func:`draw_batch`, with ``items`` (S, k) the draws in order instead
    of the uniforms.
    """
    f, avail = _check_design(predictions, available)
    idx = np.asarray(items, dtype=np.int64)
    if idx.ndim != 2 or idx.shape[0] != f.shape[0]:
        raise ValueError(f"items: expected shape ({f.shape[0]}, k)")
    if idx.min(initial=0) < 0 or idx.max(initial=0) >= f.shape[1]:
        raise ValueError(f"items: positions must lie in [0, {f.shape[1]})")
    return _sequential_draws(f, scores, avail, idx.shape[1], gamma, lambda j, pi: idx[:, j])


def acs_init(
    n_items: int,
    *,
    sessions: int = 1,
    alpha: float = DEFAULT_ALPHA,
    bet: str = "agrapa",
    c: float = DEFAULT_C,
    grid=None,
    binary: bool = True,
) -> ActiveCSState:
    """Initial state (no item seen) of ``sessions`` §7 confidence sequences for a mean.

    Parameters are those of :func:`~app.core.sequential.confidence_sequences.cs_init` (one-sample:
    the grid is the lattice ``k / N`` for 0/1 results, else a fine grid); ``bet`` is one of
    :data:`ACTIVE_BETS` (``"agrapa-cv"``: module docstring).
    """
    if bet not in ACTIVE_BETS:
        raise ValueError(f"bet: expected one of {ACTIVE_BETS}, got {bet!r}")
    cv = bet == CV_BET[0]
    base = cs_init(
        n_items,
        sessions=sessions,
        alpha=alpha,
        bet="agrapa" if cv else bet,
        c=c,
        grid=grid,
        binary=binary,
    )
    kw = {f.name: getattr(base, f.name) for f in fields(base)}
    kw["bet"] = bet
    return ActiveCSState(**kw, resid=np.zeros_like(base.total))


def increments(record: DrawRecord, values) -> np.ndarray:
    """``Y_t = F_t + (a_{I_t} - f_t(I_t)) / (r_t pi_t(I_t))``, shape (S, k)."""
    a = np.asarray(values, dtype=np.float64)
    return record.mean_prediction + (a - record.prediction) / (record.remaining * record.prob)


def _bet_estimates(state: ActiveCSState, fbar, var):
    """``(mu_hat_t, s2_{t-1}, scale)`` of the bet (module docstring), from the past only."""
    t_prev = state.t.astype(np.float64)
    if state.bet == CV_BET[0]:
        _, kappa, kappa_v, scale = CV_BET
        mu_hat = np.clip(fbar + state.resid / (t_prev + kappa), 0.0, 1.0)
        v = np.where(var > 0, var, 0.25)
        return mu_hat, (kappa_v * v + state.sq) / (t_prev + kappa_v), scale
    mu_hat = np.clip(fbar + (0.5 - fbar + state.resid) / (t_prev + 1.0), 0.0, 1.0)
    return mu_hat, (0.25 + state.sq) / (t_prev + 1.0), 1.0


def _step(state: ActiveCSState, a, y, fbar, low, high, rem, var, log_thr: float) -> None:
    """Advance every session by one draw (outcome ``a``, increment ``y``), in place."""
    t_prev = state.t.astype(np.float64)
    mu = (state.n_items * state.grid[None, :] - state.total[:, None]) / rem[:, None]
    np.clip(mu, 0.0, 1.0, out=mu)  # impossible candidates are outside the range anyway
    mu_hat, s2, scale = _bet_estimates(state, fbar, var)
    c = state.c
    up = np.maximum(mu - low[:, None], _TINY)  # positive bets: lam <= c / (mu - L)
    np.divide(c, up, out=up)
    dn = np.maximum(high[:, None] - mu, _TINY)  # negative bets: -lam <= c / (U - mu)
    np.divide(c, dn, out=dn)
    dy = y[:, None] - mu
    lk = state.log_capital
    if state.bet in ("agrapa", "mixture", CV_BET[0]):
        d = mu_hat[:, None] - mu
        lam = scale * d / (s2[:, None] + d * d)
        np.clip(lam, -dn, up, out=lam)
        lk[:, 0, :] += np.log1p(lam * dy)
    if state.bet in ("plugin", "mixture"):
        tt = t_prev + 1.0
        lam_p = np.sqrt(2.0 * np.log(2.0 / state.alpha) / (s2 * tt * np.log1p(tt)))[:, None]
        j = 0 if state.bet == "plugin" else 1
        lk[:, j, :] += np.log1p(np.minimum(up, lam_p) * dy)
        lk[:, j + 1, :] += np.log1p(-np.minimum(dn, lam_p) * dy)
    state.rejected |= combined_log_capital(state) >= log_thr
    state.sq += (y - mu_hat) ** 2
    state.total += a
    state.resid += y - fbar
    state.t += 1


def acs_update(
    state: ActiveCSState, record: DrawRecord, values, *, inplace: bool = False
) -> ActiveCSState:
    """Feed the outcomes of recorded draws, in draw order.

    Parameters
    ----------
    state : ActiveCSState
    record : DrawRecord
        The draws (shape (S, k)) whose outcomes arrive; their ``remaining`` must continue the
        state (``r = N - t``).
    values : array_like, shape (S, k)
        Outcomes ``a_{I_t}`` in [0, 1] (item means when an item was sampled several times).
    inplace : bool
        Update ``state`` itself; default returns an updated copy.

    Returns
    -------
    ActiveCSState
    """
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 1 and state.sessions == 1:
        a = a[None, :]
    if a.shape != record.items.shape or a.shape[0] != state.sessions:
        raise ValueError(f"values: expected shape {record.items.shape}")
    if not np.all(np.isfinite(a)) or a.min(initial=0.0) < 0 or a.max(initial=0.0) > 1:
        raise ValueError("values: must be finite and in [0, 1]")
    if a.shape[1] and np.any(record.remaining[:, 0] != state.n_items - state.t):
        raise ValueError("record: its draws do not continue this state")
    out = state if inplace else state.copy()
    y = increments(record, a)
    log_thr = float(np.log(1.0 / out.alpha))
    for j in range(a.shape[1]):  # the capital is a product over draws, in order
        _step(
            out,
            a[:, j],
            y[:, j],
            record.mean_prediction[:, j],
            record.low[:, j],
            record.high[:, j],
            record.remaining[:, j].astype(np.float64),
            record.mean_variance[:, j],
            log_thr,
        )
    return out


def acs_interval(state: ActiveCSState) -> tuple[np.ndarray, np.ndarray]:
    """Current interval for the mean ``A`` (:func:`cs_interval`; exact at ``t = N``)."""
    return cs_interval(state)


def difference_from_known(lower, upper, baseline_mean) -> tuple[np.ndarray, np.ndarray]:
    """Interval for ``Delta = A - B`` from one for ``A`` and the known baseline mean ``B``."""
    b = np.asarray(baseline_mean, dtype=np.float64)
    return np.asarray(lower) - b, np.asarray(upper) - b


__all__ = [
    "ACTIVE_BETS",
    "BETS",
    "CV_BET",
    "DEFAULT_GAMMA",
    "ActiveCSState",
    "DrawRecord",
    "acs_init",
    "acs_interval",
    "acs_update",
    "design_probabilities",
    "difference_from_known",
    "draw_batch",
    "increments",
    "neyman_scores",
    "record_draws",
]
