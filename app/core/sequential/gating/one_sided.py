"""One-sided sequential tests and bounds for a model's mean (statistics-next §8, first bullet).

A one-sided goal (``noninferior``, ``superior``) or a release gate asks, of the full-benchmark
mean ``A = (1/N) sum_i a_i`` of a new model against a baseline whose mean ``B`` is known, one
question per side: *is A above a target* (``A > B - delta``: non-inferior) or *below one*
(``A < B - delta``: regressed). Each question is a time-uniform one-sided test that spends all of
its ``alpha`` on its own side.

Construction
------------
Items are drawn without replacement by a predictable design and corrected by a predictable
prediction exactly as in :mod:`app.core.sequential.active` (§7): ``Y_t = F_t + (a_{I_t} -
f_t(I_t)) / (r_t pi_t(I_t))`` has ``E[Y_t | past] = mu_t(A)`` with ``mu_t(m) = (N m - S_{t-1}) /
r_t`` and lies in the predictable range ``[L_t, U_t]``. A *test* ``p`` has a target mean ``m_p``
and a side:

* lower test (rejects ``A <= m_p``): capital ``K+_t = prod_s (1 + lam_s (Y_s - mu_s(m_p)))`` with
  ``0 <= lam_s <= c / (mu_s(m_p) - L_s)``;
* upper test (rejects ``A >= m_p``): ``K-_t = prod_s (1 - lam_s (Y_s - mu_s(m_p)))`` with
  ``0 <= lam_s <= c / (U_s - mu_s(m_p))``.

The bet is aGRAPA's (WSR 2024 §5.2) at the target, truncated to its side:
``lam = D / (s2 + D^2)`` with ``D = mu_hat_t - mu_t(m_p)`` (``mu_hat`` and ``s2`` as the plain
``agrapa`` bet of :mod:`~app.core.sequential.active`: a prior pseudo-residual and variance 1/4 at
weight one; no extra scale). At ``A = m_p`` the capital is a non-negative martingale, so by Ville
``P(exists t: K_t >= 1/alpha_p) <= alpha_p``. For ``m`` beyond the target on the null side the
capital is larger (``Y - mu(m)`` grows and the same bet stays inside its range), so one rejection
at the target rejects the whole composite null ``A <= m_p`` (``A >= m_p``): the test *is* a
one-sided confidence sequence read at one point. :func:`grid_bounds` gives that CS's bound
(the bet ``min(lam, c / (mu(m) - L))`` applied to every ``m`` of a grid), which lies beyond the
target exactly when the test has rejected — the page and the decision cannot disagree.

A test is also decided by the range of means still possible, ``[S_t / N, (S_t + N - t) / N]``:
at ``t = N`` it is the exact value, so every test decides when its benchmark is exhausted, and a
mean exactly on the target is decided by neither side ("on the margin").

Cost: ``O(S P)`` per item for ``S`` sessions and ``P`` tests, independent of ``N`` (no grid), so
thousands of simulated gates of 15,000-item benchmarks run in seconds.

References
----------
Waudby-Smith, I. & Ramdas, A. (2020, 2024), as in :mod:`app.core.sequential.active`.
Howard, S. R., Ramdas, A., McAuliffe, J. & Sekhon, J. (2021). Time-uniform, nonparametric,
nonasymptotic confidence sequences. Ann. Statist. 49(2).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from app.core.sequential.active import DrawRecord, increments
from app.core.sequential.confidence_sequences import DEFAULT_C

LOWER, UPPER = 1, -1
#: standard errors by which the data must lie beyond a design prior's alternative to overrule it
PRIOR_RELEASE_Z = 1.5
_TINY = 1e-12
_TOL = 1e-12


@dataclass
class OneSidedState:
    """``P`` one-sided tests on each of ``S`` sessions of one ``N``-item benchmark.

    Attributes
    ----------
    n_items : int
    c : float
        Bet truncation in (0, 1).
    target : ndarray, shape (S, P)
        ``m_p``, the mean each test is about (e.g. ``B - delta``).
    side : ndarray of int8, shape (P,)
        :data:`LOWER` (rejects ``A <= m_p``) or :data:`UPPER` (rejects ``A >= m_p``).
    log_threshold : ndarray, shape (S, P)
        ``log(1 / alpha_p)`` of each test.
    t, total, sq, resid : ndarray, shape (S,)
        Items seen, ``S_t = sum a``, the bet's variance statistic, ``sum (Y - F)``.
    log_capital : ndarray, shape (S, P)
    hit : ndarray of int64, shape (S, P)
        Items seen when the test first rejected (capital or range), 0 while it has not.
    prior_mean : ndarray, shape (S, P)
        Each test's design alternative: the mean ``A`` its bet is planned for before data
        (NaN: none, the bet's mean estimate starts at 1/2 as before).
    prior_weight : float
        Pseudo-items behind ``prior_mean`` (0: no design prior).
    """

    n_items: int
    c: float
    target: np.ndarray
    side: np.ndarray
    log_threshold: np.ndarray
    t: np.ndarray
    total: np.ndarray
    sq: np.ndarray
    resid: np.ndarray
    log_capital: np.ndarray
    hit: np.ndarray
    prior_mean: np.ndarray | None = None
    prior_weight: float = 0.0

    @property
    def sessions(self) -> int:
        return int(self.t.shape[0])

    def copy(self) -> OneSidedState:
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        return OneSidedState(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        )

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.prior_mean is None:  # states written before design priors read the same
            del out["prior_mean"], out["prior_weight"]
        return out

    @classmethod
    def from_dict(cls, d: dict) -> OneSidedState:
        t = np.asarray(d["t"], dtype=np.int64).reshape(-1)
        target = np.asarray(d["target"], dtype=np.float64).reshape(t.size, -1)
        shape = target.shape
        return cls(
            n_items=int(d["n_items"]),
            c=float(d["c"]),
            target=target,
            side=np.asarray(d["side"], dtype=np.int8).reshape(shape[1]),
            log_threshold=np.asarray(d["log_threshold"], dtype=np.float64).reshape(shape),
            t=t,
            total=np.asarray(d["total"], dtype=np.float64).reshape(t.size),
            sq=np.asarray(d["sq"], dtype=np.float64).reshape(t.size),
            resid=np.asarray(d["resid"], dtype=np.float64).reshape(t.size),
            log_capital=np.asarray(d["log_capital"], dtype=np.float64).reshape(shape),
            hit=np.asarray(d["hit"], dtype=np.int64).reshape(shape),
            prior_mean=None
            if d.get("prior_mean") is None
            else np.asarray(d["prior_mean"], dtype=np.float64).reshape(shape),
            prior_weight=float(d.get("prior_weight", 0.0)),
        )


@dataclass
class GridTrack:
    """The capital of every test's bet at every mean of a grid (for reported bounds).

    Attributes
    ----------
    grid : ndarray, shape (G,)
    log_capital : ndarray, shape (S, P, G)
    rejected : ndarray of bool, shape (S, P, G)
    """

    grid: np.ndarray
    log_capital: np.ndarray
    rejected: np.ndarray

    @classmethod
    def start(cls, state: OneSidedState, grid) -> GridTrack:
        g = np.asarray(grid, dtype=np.float64).reshape(-1)
        shape = (*state.target.shape, g.size)
        return cls(grid=g, log_capital=np.zeros(shape), rejected=np.zeros(shape, dtype=bool))


def one_sided_init(n_items: int, target, side, alpha, *, c: float = DEFAULT_C) -> OneSidedState:
    """Initial state (no item seen).

    Parameters
    ----------
    n_items : int
        ``N``.
    target : array_like, shape (S, P) (or (P,) for one session)
        Target means in [0, 1].
    side : array_like of int, shape (P,)
        :data:`LOWER` or :data:`UPPER` per test.
    alpha : array_like, broadcast to (S, P)
        Error level of each test, in (0, 1).
    c : float
        Bet truncation in (0, 1).

    Returns
    -------
    OneSidedState
    """
    n = int(n_items)
    if n < 1:
        raise ValueError("n_items: expected a positive integer")
    tg = np.array(target, dtype=np.float64, ndmin=2)
    sd = np.asarray(side, dtype=np.int8).reshape(-1)
    if sd.size != tg.shape[1] or not np.isin(sd, (LOWER, UPPER)).all():
        raise ValueError("side: one of LOWER (1) / UPPER (-1) per test")
    if not np.all(np.isfinite(tg)) or tg.min() < 0 or tg.max() > 1:
        raise ValueError("target: means must lie in [0, 1]")
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), tg.shape)
    if not np.all((a > 0) & (a < 1)):
        raise ValueError("alpha: must lie in (0, 1)")
    if not (0.0 < float(c) < 1.0):
        raise ValueError("c: must lie in (0, 1)")
    s = tg.shape[0]
    return OneSidedState(
        n_items=n,
        c=float(c),
        target=tg,
        side=sd,
        log_threshold=np.log(1.0 / a),
        t=np.zeros(s, dtype=np.int64),
        total=np.zeros(s),
        sq=np.zeros(s),
        resid=np.zeros(s),
        log_capital=np.zeros(tg.shape),
        hit=np.zeros(tg.shape, dtype=np.int64),
    )


def _bet_estimates(state: OneSidedState, fbar):
    t_prev = state.t.astype(np.float64)
    mu_hat = np.clip(fbar + (0.5 - fbar + state.resid) / (t_prev + 1.0), 0.0, 1.0)
    return mu_hat, (0.25 + state.sq) / (t_prev + 1.0)


def _planned_means(state: OneSidedState, mu_hat, s2, fbar, rem) -> np.ndarray:
    """The mean each test's bet plays, shape (S, P): the data's estimate ``mu_hat`` or, with a
    design prior, that estimate shrunk towards the prior alternative's current mean
    ``mu_t(prior) = (N prior - S_{t-1}) / r_t`` with ``prior_weight`` pseudo-items.

    The data overrule the prior once ``mu_hat`` lies more than ``PRIOR_RELEASE_Z`` standard
    errors beyond the alternative, on the side the test rejects to (a candidate far better than
    planned; shrinking always cost ~60 % more items on GPQA pairs 5+ points apart, a one-sided
    shrinkage lost most of the sibling gain: bench/RESULTS.md, "Release gates with the design
    prior"). A function of the past only, so every guarantee stands; it spares the bet the early
    draws where the plug-in mean is mostly noise and fades as the items seen outnumber the
    prior's weight."""
    if state.prior_mean is None or state.prior_weight <= 0:
        return np.broadcast_to(mu_hat[:, None], state.target.shape)
    w = float(state.prior_weight)
    t_prev = state.t.astype(np.float64)[:, None]
    mu_p = np.clip((state.n_items * state.prior_mean - state.total[:, None]) / rem[:, None], 0, 1)
    shrunk = fbar[:, None] + (w * (mu_p - fbar[:, None]) + state.resid[:, None]) / (t_prev + w)
    # noise around the plan stays shrunk; data well beyond it bet as with no prior
    mu_b = mu_hat[:, None]
    se = np.sqrt(s2 / (state.t + 1.0))[:, None]  # of mu_hat (s2: the per-draw variance)
    beyond = state.side * (mu_b - mu_p) > PRIOR_RELEASE_Z * se
    planned = np.clip(np.where(beyond, mu_b, shrunk), 0.0, 1.0)
    return np.where(np.isnan(state.prior_mean), mu_b, planned)


def target_bets(state: OneSidedState, fbar, low, high, rem) -> tuple[np.ndarray, np.ndarray]:
    """The signed bets ``lam_p`` of the next draw and the centring ``mu(m_p)``, shape (S, P).

    ``lam >= 0`` for lower tests, ``<= 0`` for upper ones (the capital is ``1 + lam (Y - mu)``
    either way); 0 where the target is impossible (``mu`` outside [0, 1]).
    """
    mu = (state.n_items * state.target - state.total[:, None]) / rem[:, None]
    feasible = (mu >= 0.0) & (mu <= 1.0)
    mu_hat, s2 = _bet_estimates(state, fbar)
    mu_hat = _planned_means(state, mu_hat, s2, fbar, rem)
    d = mu_hat - mu
    raw = d / (s2[:, None] + d * d)
    up = state.c / np.maximum(mu - low[:, None], _TINY)
    dn = state.c / np.maximum(high[:, None] - mu, _TINY)
    lam = np.where(state.side == LOWER, np.clip(raw, 0.0, up), np.clip(raw, -dn, 0.0))
    return np.where(feasible, lam, 0.0), mu


def _range_hits(state: OneSidedState) -> np.ndarray:
    """Tests decided by the range of means still possible, shape (S, P)."""
    n = state.n_items
    lo = (state.total / n)[:, None]
    hi = ((state.total + (n - state.t)) / n)[:, None]
    return np.where(state.side == LOWER, lo > state.target + _TOL, hi < state.target - _TOL)


def _track_step(state, track: GridTrack, lam, y, low, high, rem, live) -> None:
    """The bet ``lam_p`` applied at every grid mean, capped by that mean's own range."""
    mu = (state.n_items * track.grid[None, :] - state.total[:, None]) / rem[:, None]
    mu = np.clip(mu, 0.0, 1.0)[:, None, :]
    up = state.c / np.maximum(mu - low[:, None, None], _TINY)
    dn = state.c / np.maximum(high[:, None, None] - mu, _TINY)
    lam_m = np.where(
        (state.side == LOWER)[None, :, None],
        np.minimum(lam[:, :, None], up),
        np.maximum(lam[:, :, None], -dn),
    )
    gain = np.log1p(lam_m * (y[:, None, None] - mu))
    track.log_capital += np.where(live[:, None, None], gain, 0.0)
    track.rejected |= track.log_capital >= state.log_threshold[:, :, None]


def _step(state: OneSidedState, a, y, fbar, low, high, rem, live, track=None) -> None:
    lam, mu = target_bets(state, fbar, low, high, rem)
    if track is not None:
        _track_step(state, track, lam, y, low, high, rem, live)
    mu_hat, _ = _bet_estimates(state, fbar)
    gain = np.log1p(lam * (y[:, None] - mu))
    state.log_capital += np.where(live[:, None], gain, 0.0)
    state.sq += np.where(live, (y - mu_hat) ** 2, 0.0)
    state.total += np.where(live, a, 0.0)
    state.resid += np.where(live, y - fbar, 0.0)
    state.t += live
    new = (state.hit == 0) & live[:, None]
    new &= (state.log_capital >= state.log_threshold) | _range_hits(state)
    state.hit[new] = np.broadcast_to(state.t[:, None], new.shape)[new]


def one_sided_update(
    state: OneSidedState,
    record: DrawRecord,
    values,
    *,
    live=None,
    inplace: bool = False,
    track: GridTrack | None = None,
) -> OneSidedState:
    """Feed recorded draws and their outcomes, in draw order.

    Parameters
    ----------
    state : OneSidedState
    record : DrawRecord
        Draws of shape (S, k) (:func:`~app.core.sequential.active.record_draws`,
        :func:`~app.core.sequential.active.draw_batch` or :func:`uniform_record`).
    values : array_like, shape (S, k)
        Outcomes ``a_{I_t}`` in [0, 1].
    live : array_like of bool, shape (S, k), optional
        Which entries are real draws (a round gives sessions different numbers of items; the
        others are padding and change nothing). Live entries come first in each row.
    inplace : bool
    track : GridTrack, optional
        Updated in place with the same bets at every grid mean (:func:`track_bounds`).

    Returns
    -------
    OneSidedState
    """
    a = np.asarray(values, dtype=np.float64)
    if a.ndim == 1 and state.sessions == 1:
        a = a[None, :]
    if a.shape != record.items.shape or a.shape[0] != state.sessions:
        raise ValueError(f"values: expected shape {record.items.shape}")
    mask = np.ones(a.shape, dtype=bool) if live is None else np.asarray(live, dtype=bool)
    if mask.shape != a.shape:
        raise ValueError("live: expected the shape of values")
    if np.any(mask[:, 1:] & ~mask[:, :-1]):
        raise ValueError("live: real draws must come first in each row")
    a = np.where(mask, a, 0.0)
    if not np.all(np.isfinite(a)) or a.min(initial=0.0) < 0 or a.max(initial=0.0) > 1:
        raise ValueError("values: must be finite and in [0, 1]")
    first = mask[:, 0] if a.shape[1] else np.zeros(state.sessions, dtype=bool)
    if np.any(first & (record.remaining[:, 0] != state.n_items - state.t)):
        raise ValueError("record: its draws do not continue this state")
    out = state if inplace else state.copy()
    rem = np.where(mask, record.remaining, 1).astype(np.float64)
    y = np.where(mask, increments(record, np.where(mask, a, record.prediction)), 0.0)
    for j in range(a.shape[1]):  # the capital is a product over draws, in order
        _step(
            out,
            a[:, j],
            y[:, j],
            record.mean_prediction[:, j],
            record.low[:, j],
            record.high[:, j],
            rem[:, j],
            mask[:, j],
            track,
        )
    return out


def uniform_record(predictions, order, start, k: int) -> tuple[DrawRecord, np.ndarray]:
    """The :class:`DrawRecord` of uniform draws that follow a fixed order, vectorised.

    Uniform draws without replacement (``gamma = 1``) are a uniformly random order served
    from the front; this gives the same record as
    :func:`~app.core.sequential.active.record_draws` with ``gamma=1`` for
    ``order[s, start_s : start_s + k]`` in ``O(S N)`` instead of ``O(S N k)``.

    Parameters
    ----------
    predictions : array_like, shape (S, N)
        ``f(i)`` in [0, 1], fixed for these draws.
    order : array_like of int, shape (S, N)
        Each row a permutation of ``0..N-1``; the first ``start_s`` are already drawn.
    start : array_like of int, shape (S,)
    k : int
        Draws per session; rows with fewer than ``k`` items left are padded (see the mask).

    Returns
    -------
    record : DrawRecord, shape (S, k)
    live : ndarray of bool, shape (S, k)
        False for padding beyond the end of a row.
    """
    f = np.asarray(predictions, dtype=np.float64)
    od = np.asarray(order, dtype=np.int64)
    st = np.asarray(start, dtype=np.int64).reshape(-1)
    s, n = f.shape
    pos = st[:, None] + np.arange(int(k))[None, :]
    live = pos < n
    pos = np.minimum(pos, n - 1)
    f_ord = np.take_along_axis(f, od, axis=1)
    before = np.concatenate([np.zeros((s, 1)), np.cumsum(f_ord, axis=1)], axis=1)
    rem = n - pos
    fbar = (before[:, -1:] - np.take_along_axis(before, pos, axis=1)) / rem
    top = np.maximum.accumulate(f_ord[:, ::-1], axis=1)[:, ::-1]  # max over what remains
    bottom = np.minimum.accumulate(f_ord[:, ::-1], axis=1)[:, ::-1]
    pred = np.take_along_axis(f_ord, pos, axis=1)
    # Variance prior of the record (not used by the one-sided bet): mean f(1 - f) over R_t.
    v_ord = f_ord * (1.0 - f_ord)
    v_before = np.concatenate([np.zeros((s, 1)), np.cumsum(v_ord, axis=1)], axis=1)
    var = (v_before[:, -1:] - np.take_along_axis(v_before, pos, axis=1)) / rem
    rec = DrawRecord(
        items=np.take_along_axis(od, pos, axis=1),
        prob=1.0 / rem,
        remaining=rem.astype(np.int64),
        prediction=pred,
        mean_prediction=fbar,
        low=fbar - np.take_along_axis(top, pos, axis=1),
        high=fbar + 1.0 - np.take_along_axis(bottom, pos, axis=1),
        mean_variance=var,
    )
    return rec, live


@dataclass(frozen=True)
class OrderedBaseline:
    """A baseline's results along serving orders, for :func:`affine_uniform_record`.

    Attributes
    ----------
    order : ndarray of int64, shape (S, N)
    b : ndarray, shape (S, N)
        ``b`` in serving order.
    before : ndarray, shape (S, N + 1)
        ``sum`` of ``b`` over the first ``j`` served items.
    top, bottom : ndarray, shape (S, N)
        Largest / smallest ``b`` from position ``j`` on (over what remains).
    """

    order: np.ndarray
    b: np.ndarray
    before: np.ndarray
    top: np.ndarray
    bottom: np.ndarray

    @classmethod
    def build(cls, baseline, order) -> OrderedBaseline:
        od = np.asarray(order, dtype=np.int64)
        b = np.take_along_axis(np.broadcast_to(np.asarray(baseline, np.float64), od.shape), od, 1)
        zero = np.zeros((b.shape[0], 1))
        return cls(
            order=od,
            b=b,
            before=np.concatenate([zero, np.cumsum(b, axis=1)], axis=1),
            top=np.maximum.accumulate(b[:, ::-1], axis=1)[:, ::-1],
            bottom=np.minimum.accumulate(b[:, ::-1], axis=1)[:, ::-1],
        )


def affine_uniform_record(
    ob: OrderedBaseline, f0, f1, start, k: int
) -> tuple[DrawRecord, np.ndarray]:
    """:func:`uniform_record` for predictions ``f = f0 + (f1 - f0) b`` (``f0, f1`` in [0, 1]).

    Every prediction of a gate (``random``: ``f0 = f1 = 0``; ``paired``: 0 and 1;
    ``calibrated``: the fitted ``P(a | b = 0)`` and ``P(a | b = 1)``) has this form, so the
    record needs only prefix sums and suffix extremes of ``b`` along the order, computed once:
    ``O(S k)`` per round instead of ``O(S N)``. Same result as :func:`uniform_record`.
    """
    lo = np.asarray(f0, dtype=np.float64).reshape(-1, 1)
    hi = np.asarray(f1, dtype=np.float64).reshape(-1, 1)
    slope = hi - lo
    st = np.asarray(start, dtype=np.int64).reshape(-1)
    n = ob.b.shape[1]
    pos = st[:, None] + np.arange(int(k))[None, :]
    live = pos < n
    pos = np.minimum(pos, n - 1)
    rem = n - pos
    b_rest = (ob.before[:, -1:] - np.take_along_axis(ob.before, pos, axis=1)) / rem
    fbar = lo + slope * b_rest
    top = np.take_along_axis(ob.top, pos, axis=1)
    bottom = np.take_along_axis(ob.bottom, pos, axis=1)
    f_max = lo + np.where(slope >= 0, slope * top, slope * bottom)
    f_min = lo + np.where(slope >= 0, slope * bottom, slope * top)
    pred = lo + slope * np.take_along_axis(ob.b, pos, axis=1)
    rec = DrawRecord(
        items=np.take_along_axis(ob.order, pos, axis=1),
        prob=1.0 / rem,
        remaining=rem.astype(np.int64),
        prediction=pred,
        mean_prediction=fbar,
        low=fbar - f_max,
        high=fbar + 1.0 - f_min,
        mean_variance=np.full(pos.shape, 0.25),  # not used by the one-sided bet
    )
    return rec, live


def track_bounds(state: OneSidedState, track: GridTrack) -> np.ndarray:
    """The one-sided confidence bound of every test, shape (S, P).

    Lower tests: the smallest feasible grid mean not rejected (a lower confidence bound for
    ``A`` at level ``alpha_p``; above ``m_p`` exactly when the test rejected); upper tests: the
    largest. Each is the CS of the test's own bet applied at every ``m`` of the grid.
    """
    g = track.grid
    n = state.n_items
    rlo = state.total / n
    rhi = (state.total + (n - state.t)) / n
    ok = ~track.rejected & (g >= rlo[:, None, None] - _TOL) & (g <= rhi[:, None, None] + _TOL)
    first = g[np.argmax(ok, axis=2)]
    last = g[g.size - 1 - np.argmax(ok[:, :, ::-1], axis=2)]
    any_ok = ok.any(axis=2)
    lo_b = np.where(any_ok, np.maximum(first, rlo[:, None]), rlo[:, None])
    hi_b = np.where(any_ok, np.minimum(last, rhi[:, None]), rhi[:, None])
    return np.where(state.side == LOWER, lo_b, hi_b)


def grid_bounds(
    state0: OneSidedState, record: DrawRecord, values, grid
) -> tuple[np.ndarray, OneSidedState]:
    """Replay draws from the initial state and return :func:`track_bounds` and the state.

    Parameters
    ----------
    state0 : OneSidedState
        The initial state (:func:`one_sided_init`).
    record, values
        Every draw so far and its outcome, shape (S, t) (all live).
    grid : array_like, shape (G,)
        Candidate means, increasing (the lattice ``k / N`` for 0/1 results).
    """
    st = state0.copy()
    track = GridTrack.start(st, grid)
    one_sided_update(st, record, values, inplace=True, track=track)
    return track_bounds(st, track), st


#: One-sided session goals: (decision when the lower test rejects, when the upper one does).
SESSION_GOALS = {
    "noninferior": ("noninferior", "regressed"),
    "superior": ("superior", "not_superior"),
}


def goal_tests(goal: str, baseline_mean: float, margin: float | None, alpha: float):
    """Targets, sides and levels of a one-sided session goal (one session).

    ``noninferior``: both tests at ``B - margin``; ``superior``: at ``B + margin`` (margin
    default 0). Each test spends all of ``alpha`` on its own side (a session asks one question,
    so no correction: the two sides reject incompatible hypotheses).

    Returns
    -------
    target : ndarray, shape (1, 2)
    side : ndarray, shape (2,)
    alpha : ndarray, shape (2,)
    """
    if goal not in SESSION_GOALS:
        raise ValueError(f"goal: expected one of {tuple(SESSION_GOALS)}, got {goal!r}")
    d = float(margin or 0.0)
    m = float(baseline_mean) + (-d if goal == "noninferior" else d)
    m = min(max(m, 0.0), 1.0)
    return np.array([[m, m]]), np.array([LOWER, UPPER], np.int8), np.array([alpha, alpha])


def goal_decision(state: OneSidedState, goal: str) -> str:
    """The decision of a one-sided goal from its tests (:func:`goal_tests`), session 0.

    The side that rejected first decides (the negative one on a tie); exhausted with neither:
    ``on_margin`` (the exact mean equals the target); else ``undecided``.
    """
    good, bad = SESSION_GOALS[goal]
    lo, up = int(state.hit[0, 0]), int(state.hit[0, 1])
    if up and (not lo or up <= lo):
        return bad
    if lo:
        return good
    return "on_margin" if state.t[0] >= state.n_items else "undecided"


__all__ = [
    "LOWER",
    "SESSION_GOALS",
    "UPPER",
    "GridTrack",
    "OneSidedState",
    "OrderedBaseline",
    "affine_uniform_record",
    "goal_decision",
    "goal_tests",
    "grid_bounds",
    "one_sided_init",
    "one_sided_update",
    "target_bets",
    "track_bounds",
    "uniform_record",
]
