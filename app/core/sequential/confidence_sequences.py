"""Time-uniform confidence sequences for a finite-population mean, sampling without replacement.

The ``random`` session policy (issue 12) serves a benchmark's ``N`` items in a uniformly random
order without replacement and, after every item, updates a (1 - alpha) confidence sequence (CS) for
the finite-population mean ``m* = (1/N) sum_i x_i`` of values ``x_i`` in [0, 1] (0/1 correctness, a
fractional score, or the paired transform ``x = (d + 1) / 2`` of a difference ``d`` in [-1, 1]).
The CS is valid at every time simultaneously: one may look after each batch and stop whenever.

Construction (betting; Waudby-Smith & Ramdas 2020, 2024)
-------------------------------------------------------
After ``t - 1`` draws with running sum ``S_{t-1}``, the next draw has conditional mean, if the
population mean were ``m``,

    mu_t(m) = (N m - S_{t-1}) / (N - t + 1).

For each candidate ``m`` on a grid, a capital process ``K_t(m) = prod_{i<=t} (1 + lam_i(m) (X_i -
mu_i(m)))`` with a *predictable* bet ``lam_i(m)`` (a function of ``X_1..X_{i-1}`` only) in
``[-c / (1 - mu_i), c / mu_i]`` is a non-negative martingale at ``m = m*``; by Ville's inequality
``P(exists t: K_t(m*) >= 1/alpha) <= alpha``. The CS is the running intersection

    C_t = { m : max_{s<=t} K_s(m) < 1/alpha }  cap  [S_t / N, (S_t + N - t) / N],

the second set being the means still possible after ``t`` items (a candidate with some ``mu_i(m)``
outside [0, 1] is outside it), so ``C_N`` is the exact value. Capitals are kept in logs.

Bets (``bet=``)
---------------
``"agrapa"`` (default): approximate growth-rate adaptive to the particular alternative (WSR 2024,
§5.2), one signed bet per candidate, applied to the without-replacement centring:

    lam_t(m) = clip( D / (s2_{t-1} + D^2), -c / (1 - mu_t(m)), c / mu_t(m) ),
    D = mu_hat_{t-1} - mu_t(m),

with ``mu_hat_{t-1} = (1/2 + S_{t-1}) / t`` and ``s2_{t-1} = (1/4 + sum_{i<t} (X_i - mu_hat_{i-1})^2) / t``.
``mu_hat`` estimates ``E[X_t | past] = mu_t(m*)`` (the plug-in ``m_hat = S_{t-1}/(t-1)`` gives
``mu_t(m_hat) = m_hat``). The bet approximately maximises ``E log(1 + lam (X - mu))`` (Kelly); it is
large where ``m`` is far from the data and tiny near it. Sampling without replacement enters through
``mu_t(m)``: ``X_t - mu_t(m)`` changes with ``m`` at rate ``N / (N - t + 1)``, so later items weigh
more (the WoR "reweighting" of WSR 2020 §3) and the set collapses to the exact value at ``t = N``.
Many ties (the paired ``x = 1/2`` when both models agree) keep ``s2`` small and the bets large.

``"plugin"``: the hedged predictable plug-in bet of statistics-next §1 (WSR 2024, "PrPl" hedged
capital), kept as the reference: ``lam_t = sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t)))``,
``K = (K+ + K-)/2`` with ``lam+ <= c/mu``, ``lam- <= c/(1-mu)``.

``"mixture"``: the average of the ``agrapa`` capital and the hedged ``plugin`` capital (an average
of test martingales is a test martingale), robust when one of the two bets misfires.

All three are predictable, so validity holds for every one of them; the choice is about width. On
GPQA (``bench/bench_sessions.py``, 500 random sessions on pairs >= 15 points apart, alpha = 0.05)
``agrapa`` decided after a median of 85 items (one item per batch; 90 with batches of 10) against
94 (100) for ``plugin``; ``mixture`` and other truncations ``c`` (0.3, 0.65) or variance priors did
not do better. The grid and its interpolation rule are described in :func:`cs_interval`.

References
----------
Waudby-Smith, I. & Ramdas, A. (2020). Confidence sequences for sampling without replacement.
NeurIPS 33.
Waudby-Smith, I. & Ramdas, A. (2024). Estimating means of bounded random variables by betting.
JRSS-B 86(1), 1-27.
Ville, J. (1939). Étude critique de la notion de collectif.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

BETS = ("agrapa", "plugin", "mixture")
DECISIONS = ("undecided", "better", "worse", "equivalent")
UNDECIDED, BETTER, WORSE, EQUIVALENT = 0, 1, 2, 3
DEFAULT_ALPHA = 0.05
DEFAULT_C = 0.5
MAX_GRID = 4001


def mean_grid(n_items: int, *, paired: bool = False, binary: bool = True) -> np.ndarray:
    """Grid of candidate population means ``m`` in [0, 1].

    Parameters
    ----------
    n_items : int
        ``N``.
    paired : bool
        Values are ``(d + 1) / 2`` of 0/1 differences (half-integer sums).
    binary : bool
        Values are 0/1 (or paired 0/1). Then the grid is the lattice ``k / L`` with ``L = N``
        (``2N`` when paired), which contains every possible ``m*`` (:func:`grid_is_exact`).
        Otherwise (fractions) ``L`` is the largest multiple of ``N`` not above ``MAX_GRID - 1``
        (at least ``N``).

    Returns
    -------
    ndarray, shape (L + 1,)
    """
    n = _positive_int(n_items, "n_items")
    if binary:
        lattice = 2 * n if paired else n
    else:
        lattice = max(n, ((MAX_GRID - 1) // n) * n)
    return np.arange(lattice + 1, dtype=np.float64) / lattice


def grid_is_exact(grid: np.ndarray, n_items: int, *, paired: bool = False) -> bool:
    """Whether ``grid`` contains every mean of ``N`` values in {0, 1} (``{0, 1/2, 1}`` if paired)."""
    lattice = 2 * n_items if paired else n_items
    g = np.asarray(grid, dtype=np.float64)
    need = np.arange(lattice + 1) / lattice
    idx = np.searchsorted(g, need).clip(1, g.size - 1)
    dist = np.minimum(np.abs(g[idx] - need), np.abs(g[idx - 1] - need))
    return bool(dist.max() <= 1e-12)


@dataclass
class CSState:
    """State of the confidence sequences of ``S`` sessions (persistable; see :meth:`to_dict`).

    Attributes
    ----------
    n_items : int
        Population size ``N``.
    alpha : float
    bet : str
        One of :data:`BETS`.
    c : float
        Bet truncation in (0, 1).
    exact_grid : bool
        The grid holds every possible population mean (no interpolation margin needed).
    grid : ndarray, shape (G,)
        Candidate means, increasing.
    t : ndarray of int64, shape (S,)
        Items seen.
    total : ndarray, shape (S,)
        ``S_t = sum x``.
    sq : ndarray, shape (S,)
        ``sum_{i<=t} (X_i - mu_hat_{i-1})^2`` (bet variance statistic).
    log_capital : ndarray, shape (S, P, G)
        Log capital per process: ``P = 1`` (agrapa), 2 (plugin: K+, K-), 3 (mixture: agrapa, K+, K-).
    rejected : ndarray of bool, shape (S, G)
        Candidates whose capital has reached ``1/alpha`` at some time.
    """

    n_items: int
    alpha: float
    bet: str
    c: float
    exact_grid: bool
    grid: np.ndarray
    t: np.ndarray
    total: np.ndarray
    sq: np.ndarray
    log_capital: np.ndarray
    rejected: np.ndarray

    @property
    def sessions(self) -> int:
        return int(self.t.shape[0])

    def copy(self) -> CSState:
        """Deep copy (arrays copied)."""
        kw = {f.name: getattr(self, f.name) for f in fields(self)}
        return CSState(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()})

    def to_dict(self) -> dict:
        """Plain ``dict`` of scalars and ndarrays (e.g. for ``np.savez`` or a JSON encoder)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> CSState:
        """Inverse of :meth:`to_dict` (arrays converted and shape-checked)."""
        grid = np.asarray(d["grid"], dtype=np.float64)
        t = np.asarray(d["t"], dtype=np.int64).reshape(-1)
        s = t.shape[0]
        state = cls(
            n_items=int(d["n_items"]),
            alpha=float(d["alpha"]),
            bet=str(d["bet"]),
            c=float(d["c"]),
            exact_grid=bool(d["exact_grid"]),
            grid=grid,
            t=t,
            total=np.asarray(d["total"], dtype=np.float64).reshape(s),
            sq=np.asarray(d["sq"], dtype=np.float64).reshape(s),
            log_capital=np.asarray(d["log_capital"], dtype=np.float64),
            rejected=np.asarray(d["rejected"], dtype=bool),
        )
        if state.log_capital.shape != (s, _n_processes(state.bet), grid.size):
            raise ValueError("log_capital: shape does not match sessions, bet and grid")
        if state.rejected.shape != (s, grid.size):
            raise ValueError("rejected: shape does not match sessions and grid")
        return state


def _positive_int(v, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or int(v) < 1:
        raise ValueError(f"{name}: expected a positive integer")
    return int(v)


def _n_processes(bet: str) -> int:  # "agrapa-cv": the §7 bet of app.core.sequential.active
    return {"agrapa": 1, "agrapa-cv": 1, "plugin": 2, "mixture": 3}[bet]


def cs_init(
    n_items: int,
    *,
    sessions: int = 1,
    alpha: float = DEFAULT_ALPHA,
    bet: str = "agrapa",
    c: float = DEFAULT_C,
    grid=None,
    paired: bool = False,
    binary: bool = True,
) -> CSState:
    """Initial state (no item seen) of ``sessions`` independent confidence sequences.

    Parameters
    ----------
    n_items : int
        Population size ``N`` (items in the benchmark).
    sessions : int
        Number of sessions updated in lockstep (1 for a service session).
    alpha : float
        Miscoverage, in (0, 1).
    bet : {"agrapa", "plugin", "mixture"}
        Betting strategy (module docstring).
    c : float
        Truncation of the bets, in (0, 1); 1/2 is WSR's default.
    grid : array_like, optional
        Candidate means (sorted, in [0, 1]); default :func:`mean_grid` ``(N, paired, binary)``.
    paired, binary : bool
        Describe the values, for the default grid and :attr:`CSState.exact_grid`.

    Returns
    -------
    CSState
    """
    n = _positive_int(n_items, "n_items")
    s = _positive_int(sessions, "sessions")
    if not (0.0 < float(alpha) < 1.0):
        raise ValueError("alpha: must lie in (0, 1)")
    if bet not in BETS:
        raise ValueError(f"bet: expected one of {BETS}, got {bet!r}")
    if not (0.0 < float(c) < 1.0):
        raise ValueError("c: must lie in (0, 1)")
    if grid is None:
        g = mean_grid(n, paired=paired, binary=binary)
    else:
        g = np.array(grid, dtype=np.float64, copy=True).reshape(-1)
        if g.size < 2 or not np.all(np.isfinite(g)) or g.min() < 0 or g.max() > 1:
            raise ValueError("grid: expected at least two finite values in [0, 1]")
        if np.any(np.diff(g) <= 0):
            raise ValueError("grid: must be strictly increasing")
    exact = binary and grid_is_exact(g, n, paired=paired)
    return CSState(
        n_items=n,
        alpha=float(alpha),
        bet=bet,
        c=float(c),
        exact_grid=bool(exact),
        grid=g,
        t=np.zeros(s, dtype=np.int64),
        total=np.zeros(s),
        sq=np.zeros(s),
        log_capital=np.zeros((s, _n_processes(bet), g.size)),
        rejected=np.zeros((s, g.size), dtype=bool),
    )


def _check_values(x, sessions: int) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    if v.ndim == 1 and sessions == 1:
        v = v[None, :]
    elif v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[0] != sessions:
        raise ValueError(f"x: expected shape ({sessions}, k), got {np.shape(x)}")
    if not np.all(np.isfinite(v)) or v.min(initial=0.0) < 0.0 or v.max(initial=0.0) > 1.0:
        raise ValueError("x: values must be finite and in [0, 1]")
    return v


def conditional_mean(m, total, seen, n_items: int) -> np.ndarray:
    """``mu_t(m) = (N m - S_{t-1}) / (N - t + 1)``: mean of the next draw if the population mean is ``m``.

    Parameters
    ----------
    m : array_like
        Candidate population means (broadcast against ``total[..., None]``).
    total : array_like
        ``S_{t-1}``, the sum of the ``seen = t - 1`` values drawn so far.
    seen : array_like of int
        ``t - 1`` (must be ``< N``).
    n_items : int

    Returns
    -------
    ndarray
        Shape ``total.shape + m.shape``; values outside [0, 1] mean ``m`` is impossible.
    """
    tot = np.asarray(total, dtype=np.float64)[..., None]
    sn = np.asarray(seen, dtype=np.float64)[..., None]
    return (n_items * np.asarray(m, dtype=np.float64) - tot) / (n_items - sn)


def _step(state: CSState, x: np.ndarray, log_thr: float) -> None:
    """Advance every session by one item with values ``x`` (S,), in place.

    Written with in-place operations (it is the simulator's inner loop over items).
    """
    t_prev = state.t.astype(np.float64)
    mu = conditional_mean(state.grid, state.total, t_prev, state.n_items)
    np.clip(mu, 0.0, 1.0, out=mu)  # out-of-range candidates are excluded by the range anyway
    mu_hat = (0.5 + state.total) / (t_prev + 1.0)
    s2 = (0.25 + state.sq) / (t_prev + 1.0)
    c = state.c
    up = np.maximum(mu, 1e-12)  # upper bet bound c / mu
    np.divide(c, up, out=up)
    lo = np.subtract(1.0, mu)  # lower bet bound -c / (1 - mu), stored as a positive number
    np.maximum(lo, 1e-12, out=lo)
    np.divide(c, lo, out=lo)
    dx = np.subtract(x[:, None], mu)
    lk = state.log_capital
    if state.bet in ("agrapa", "mixture"):
        d = np.subtract(mu_hat[:, None], mu, out=mu)  # mu is not needed any more
        lam = d * d
        lam += s2[:, None]
        np.divide(d, lam, out=lam)
        np.minimum(lam, up, out=lam)
        np.negative(lam, out=lam)
        np.minimum(lam, lo, out=lam)
        lam *= dx  # = -lam * dx
        np.negative(lam, out=lam)
        np.log1p(lam, out=lam)
        lk[:, 0, :] += lam
    if state.bet in ("plugin", "mixture"):
        tt = t_prev + 1.0
        lam_p = np.sqrt(2.0 * np.log(2.0 / state.alpha) / (s2 * tt * np.log1p(tt)))[:, None]
        j = 0 if state.bet == "plugin" else 1
        np.minimum(up, lam_p, out=up)
        up *= dx
        lk[:, j, :] += np.log1p(up, out=up)
        np.minimum(lo, lam_p, out=lo)
        lo *= dx
        np.negative(lo, out=lo)
        lk[:, j + 1, :] += np.log1p(lo, out=lo)
    state.rejected |= combined_log_capital(state) >= log_thr
    state.sq += (x - mu_hat) ** 2
    state.total += x
    state.t += 1


def combined_log_capital(state: CSState) -> np.ndarray:
    """Log of the capital the CS tests with, shape (S, G).

    ``agrapa``: ``log K``; ``plugin``: ``log((K+ + K-)/2)``; ``mixture``:
    ``log(K_agrapa/2 + (K+ + K-)/4)``.
    """
    lk = state.log_capital
    if state.bet in ("agrapa", "agrapa-cv"):
        return lk[:, 0, :]
    if state.bet == "plugin":
        return np.logaddexp(lk[:, 0, :], lk[:, 1, :]) - np.log(2.0)
    hedged = np.logaddexp(lk[:, 1, :], lk[:, 2, :]) - np.log(2.0)
    return np.logaddexp(lk[:, 0, :], hedged) - np.log(2.0)


def cs_update(state: CSState, x, *, inplace: bool = False) -> CSState:
    """Feed one batch of values (in serving order) to every session.

    Parameters
    ----------
    state : CSState
    x : array_like, shape (S, k) (or (k,) when S = 1)
        Values in [0, 1] of the next ``k`` items of each session, in the order they were served.
    inplace : bool
        Update ``state`` itself (the simulator); default returns an updated copy.

    Returns
    -------
    CSState
        Capital, rejections and running sums after the batch. The items are processed one at a
        time (the capital is a product over items), and candidates are rejected after every item.
    """
    v = _check_values(x, state.sessions)
    if np.any(state.t + v.shape[1] > state.n_items):
        raise ValueError(f"x: more values than the {state.n_items} items of the population")
    out = state if inplace else state.copy()
    log_thr = float(np.log(1.0 / out.alpha))
    for j in range(v.shape[1]):  # loop over items of the batch (the capital is sequential)
        _step(out, v[:, j], log_thr)
    return out


def cs_interval(state: CSState) -> tuple[np.ndarray, np.ndarray]:
    """Current confidence interval for the population mean of every session.

    Returns
    -------
    lower, upper : ndarray, shape (S,)
        Hull of the grid candidates not rejected and inside the feasible range
        ``[S_t/N, (S_t + N - t)/N]``, intersected with that range. With a non-exact grid (fractions)
        the hull is widened by one grid step on each side (the true mean may lie between grid
        points). If no candidate survives (the probability-``alpha`` event, or a range narrower
        than a grid step) the feasible range itself is returned. At ``t = N`` both ends equal
        ``S_N / N`` exactly.
    """
    n = state.n_items
    g = state.grid
    rlo = state.total / n
    rhi = (state.total + (n - state.t)) / n
    tol = 1e-12
    ok = ~state.rejected & (g[None, :] >= rlo[:, None] - tol) & (g[None, :] <= rhi[:, None] + tol)
    any_ok = ok.any(axis=1)
    first = np.argmax(ok, axis=1)
    last = g.size - 1 - np.argmax(ok[:, ::-1], axis=1)
    if state.exact_grid:
        glo, ghi = g[first], g[last]
    else:
        glo, ghi = g[np.maximum(first - 1, 0)], g[np.minimum(last + 1, g.size - 1)]
    lower = np.where(any_ok, np.maximum(rlo, glo), rlo)
    upper = np.where(any_ok, np.minimum(rhi, ghi), rhi)
    done = state.t >= n
    lower = np.where(done, rlo, lower)
    upper = np.where(done, rlo, upper)
    return lower, upper


@dataclass(frozen=True)
class CSPath:
    """Confidence sequences over whole paths.

    Attributes
    ----------
    lower, upper : ndarray, shape (S, T)
        Interval for the mean after items ``1..T`` (column ``t - 1`` after ``t`` items).
    state : CSState
        Final state.
    """

    lower: np.ndarray
    upper: np.ndarray
    state: CSState


def confidence_sequence(
    x,
    *,
    n_items: int,
    alpha: float = DEFAULT_ALPHA,
    bet: str = "agrapa",
    c: float = DEFAULT_C,
    grid=None,
    paired: bool = False,
    binary: bool | None = None,
) -> CSPath:
    """Confidence sequence for the finite-population mean along whole paths.

    Parameters
    ----------
    x : array_like, shape (S, T) or (T,)
        Values in [0, 1] in serving order (a uniformly random order without replacement of the
        ``N`` population values), ``T <= N``.
    n_items : int
        ``N``.
    alpha, bet, c, grid, paired
        As in :func:`cs_init`.
    binary : bool, optional
        Default: whether every value is 0/1 (or in {0, 1/2, 1} when ``paired``).

    Returns
    -------
    CSPath
        Same as feeding the items one at a time to :func:`cs_update` and reading
        :func:`cs_interval` after each.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2:
        raise ValueError("x: expected shape (S, T) or (T,)")
    if binary is None:
        allowed = (0.0, 0.5, 1.0) if paired else (0.0, 1.0)
        binary = bool(np.isin(v, allowed).all())
    state = cs_init(
        n_items,
        sessions=v.shape[0],
        alpha=alpha,
        bet=bet,
        c=c,
        grid=grid,
        paired=paired,
        binary=binary,
    )
    v = _check_values(v, state.sessions)
    if v.shape[1] > state.n_items:
        raise ValueError(f"x: more values than the {state.n_items} items of the population")
    lower = np.empty(v.shape)
    upper = np.empty(v.shape)
    log_thr = float(np.log(1.0 / state.alpha))
    for j in range(v.shape[1]):  # loop over time steps, vectorised over sessions and grid
        _step(state, v[:, j], log_thr)
        lower[:, j], upper[:, j] = cs_interval(state)
    return CSPath(lower=lower, upper=upper, state=state)


# -- paired differences and decisions ------------------------------------------------------------
def paired_values(y_model, y_baseline) -> np.ndarray:
    """``x = (d + 1) / 2`` with ``d = y_model - y_baseline``; both in [0, 1], broadcast."""
    ym = np.asarray(y_model, dtype=np.float64)
    yb = np.asarray(y_baseline, dtype=np.float64)
    for name, v in (("y_model", ym), ("y_baseline", yb)):
        if not np.all(np.isfinite(v)) or v.min(initial=0) < 0 or v.max(initial=0) > 1:
            raise ValueError(f"{name}: values must be finite and in [0, 1]")
    return (ym - yb + 1.0) / 2.0


def difference_interval(lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """Map an interval for ``m`` (mean of ``(d + 1)/2``) to ``Delta = 2 m - 1``."""
    return 2.0 * np.asarray(lower) - 1.0, 2.0 * np.asarray(upper) - 1.0


def decide(lower, upper, *, margin: float | None = None) -> np.ndarray:
    """Decision codes from an interval for a difference ``Delta``.

    Parameters
    ----------
    lower, upper : array_like
        Interval for ``Delta`` (:func:`difference_interval`).
    margin : float, optional
        Equivalence margin ``delta >= 0``.

    Returns
    -------
    ndarray of int8
        :data:`BETTER` (1) when ``lower > 0``, :data:`WORSE` (2) when ``upper < 0``,
        :data:`EQUIVALENT` (3) when a margin is given and ``-delta <= lower <= upper <= delta``
        (and the interval does not exclude 0), else :data:`UNDECIDED` (0); names in
        :data:`DECISIONS`. Each is wrong only if the interval misses ``Delta``, so for a CS the
        probability of any wrong decision is at most ``alpha``.
    """
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    out = np.zeros(np.broadcast(lo, hi).shape, dtype=np.int8)
    if margin is not None:
        if not (np.isfinite(margin) and margin >= 0):
            raise ValueError("margin: must be a non-negative number")
        out[(lo >= -margin) & (hi <= margin)] = EQUIVALENT
    out[lo > 0] = BETTER
    out[hi < 0] = WORSE
    return out


def precision_met(lower, upper, target: float) -> np.ndarray:
    """``(upper - lower) / 2 <= target`` (half-width goal, same units as the interval)."""
    if not (np.isfinite(target) and target > 0):
        raise ValueError("precision: must be a positive number")
    return (np.asarray(upper) - np.asarray(lower)) / 2.0 <= target


def decision_names(codes) -> np.ndarray:
    """Decision codes to names (:data:`DECISIONS`)."""
    return np.asarray(DECISIONS)[np.asarray(codes, dtype=np.int64)]


__all__ = [
    "BETS",
    "BETTER",
    "DECISIONS",
    "EQUIVALENT",
    "UNDECIDED",
    "WORSE",
    "CSPath",
    "CSState",
    "combined_log_capital",
    "conditional_mean",
    "confidence_sequence",
    "cs_init",
    "cs_interval",
    "cs_update",
    "decide",
    "decision_names",
    "difference_interval",
    "grid_is_exact",
    "mean_grid",
    "paired_values",
    "precision_met",
]
