"""Ability, item information and the model-based estimate under a fitted IRT model (Fluid).

Building blocks of the IRT session policies (:mod:`app.core.sequential.policies`): the MAP ability
from the items seen so far, the IRT probabilities used as predictions, and Fluid Benchmarking's
information criterion used (with a floor) as sampling weights. Those policies decide with the
design-based confidence sequence of :mod:`app.core.sequential.active`, not with the model-based
interval below, which remains for display and for ``fluid`` sessions created before issue 23
(on held-out GPQA pairs < 2 points apart that interval decided wrongly in 15 % of sessions,
statistics-next §7). Every function is vectorised over ``S`` sessions (arrays shaped
``(S, ...)``; a service uses ``S = 1``).

Model and notation (the parameterisation of :class:`app.core.irt.fit.IRTModel`)
-------------------------------------------------------------------------
``P(y_j = 1 | theta) = sigmoid(z_j)``, ``z_j = a_j . theta - c_j`` with ``c_j`` the item offset
(``D b_j`` in the scalar-difficulty form, ``a_j . b_j`` per dimension), ``p_j = sigmoid(z_j)``,
``q_j = 1 - p_j``, prior ``theta ~ N(0, I_D)``.

* Fisher information of item ``j``: ``I_j(theta) = p_j q_j a_j a_j^T``.
* MAP ability from the seen items ``O``: minimise
  ``F(theta) = sum_{j in O} [log(1 + e^{z_j}) - y_j z_j] + |theta|^2 / 2`` by damped Newton from the
  previous estimate (strictly convex; gradient ``sum_O (p_j - y_j) a_j + theta``, Hessian
  ``H = sum_O I_j + I``). Posterior covariance (Laplace) ``Sigma = H^{-1}``.
* Item choice: ``g(theta) = (1/N) sum_j p_j q_j a_j`` is the gradient of the predicted full accuracy
  ``A(theta) = (1/N) sum_j p_j``; the next batch is the ``k`` unused items with the largest
  ``g^T I_j g = p_j q_j (a_j . g)^2`` (statistics-next §2; the c-optimal design criterion for the
  linear functional ``A``).
* Estimate: ``A_hat = (1/N) (sum_O y_j + sum_{j not in O} p_j(theta_hat))``.
* Standard error (delta method): ``SE^2 = g_U^T Sigma g_U + (1/N^2) sum_{j not in O} p_j q_j`` with
  ``g_U = (1/N) sum_{j not in O} p_j q_j a_j``. The second term (``item_noise=True``, default) is
  the Bernoulli variance of the unseen responses given ``theta``: the target is the model's
  *realised* full-benchmark accuracy, not its expected accuracy ``A(theta)``, so the unseen items'
  own randomness belongs in the error (statistics-next §2 gives the first term only; without the
  second the SE would vanish as ``theta`` is pinned down while the unseen outcomes stay unknown).
  Both terms vanish when every item is seen, so at exhaustion the estimate is exact.

Paired difference against a baseline with stored full results: the baseline's full accuracy
``acc_b`` is a known constant, so ``Delta_hat = A_hat - acc_b`` with the same ``SE`` (no baseline
term; the baseline's responses carry no extra information about the model's unseen items once
``theta_hat`` is fixed, and using them in the item choice would need a joint model of the pair).

This is *model-based*: the interval ``estimate +- z_{1 - alpha/2} SE`` is only as good as the IRT fit
(item parameters are treated as known, and it is re-read after every batch without correction), so
its error level is not ``alpha``; no decision of a new session is taken from it.

References
----------
Hofmann, V. et al. (2025). Fluid Language Model Benchmarking. COLM.
van der Linden, W. J. & Glas, C. A. W. (2010). Elements of Adaptive Testing. Springer.
Reckase, M. (2009). Multidimensional Item Response Theory. Springer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from scipy.special import expit, log_expit
from scipy.stats import norm

from app.core.irt.fit import IRTModel


@dataclass(frozen=True)
class ItemBank:
    """Calibrated item parameters: ``z_j = a_j . theta - offset_j``.

    Attributes
    ----------
    a : ndarray, shape (N, D)
    offset : ndarray, shape (N,)
    """

    a: np.ndarray
    offset: np.ndarray

    @property
    def n_items(self) -> int:
        return int(self.a.shape[0])

    @property
    def dims(self) -> int:
        return int(self.a.shape[1])

    @classmethod
    def from_irt(cls, model: IRTModel) -> ItemBank:
        """Item bank of a fitted :class:`~app.core.irt.fit.IRTModel` (either form)."""
        return cls.from_arrays(model.a, model.item_offsets())

    @classmethod
    def from_arrays(cls, a, offset) -> ItemBank:
        """Validated bank from ``a`` (N, D) and offsets (N,)."""
        aa = np.array(a, dtype=np.float64, copy=True)
        cc = np.array(offset, dtype=np.float64, copy=True).reshape(-1)
        if aa.ndim != 2 or aa.shape[0] != cc.shape[0] or aa.shape[0] < 1:
            raise ValueError("a: expected shape (n_items, D) matching offset (n_items,)")
        if not (np.all(np.isfinite(aa)) and np.all(np.isfinite(cc))):
            raise ValueError("a: item parameters must be finite")
        aa.setflags(write=False)
        cc.setflags(write=False)
        return cls(a=aa, offset=cc)

    def probabilities(self, theta) -> np.ndarray:
        """``p_j(theta)``, shape (S, N)."""
        return expit(np.atleast_2d(theta) @ self.a.T - self.offset)


@dataclass
class FluidState:
    """State of ``S`` fluid sessions (persistable; see :meth:`to_dict`).

    Attributes
    ----------
    theta : ndarray, shape (S, D)
        Current MAP abilities.
    cov : ndarray, shape (S, D, D)
        Laplace posterior covariance at ``theta``.
    seen : ndarray of bool, shape (S, N)
    y : ndarray, shape (S, N)
        Observed values on seen items (0 elsewhere).
    """

    theta: np.ndarray
    cov: np.ndarray
    seen: np.ndarray
    y: np.ndarray

    @property
    def items_used(self) -> np.ndarray:
        return self.seen.sum(axis=1)

    def copy(self) -> FluidState:
        return FluidState(**{f.name: getattr(self, f.name).copy() for f in fields(self)})

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> FluidState:
        st = cls(
            theta=np.asarray(d["theta"], dtype=np.float64),
            cov=np.asarray(d["cov"], dtype=np.float64),
            seen=np.asarray(d["seen"], dtype=bool),
            y=np.asarray(d["y"], dtype=np.float64),
        )
        s, dd = st.theta.shape
        if st.cov.shape != (s, dd, dd) or st.seen.shape != st.y.shape or st.seen.shape[0] != s:
            raise ValueError("theta: state arrays have inconsistent shapes")
        return st


def fluid_init(bank: ItemBank, *, sessions: int = 1) -> FluidState:
    """Sessions with no item seen: ``theta = 0``, ``Sigma = I`` (the prior)."""
    if isinstance(sessions, bool) or int(sessions) < 1:
        raise ValueError("sessions: expected a positive integer")
    s, d, n = int(sessions), bank.dims, bank.n_items
    return FluidState(
        theta=np.zeros((s, d)),
        cov=np.broadcast_to(np.eye(d), (s, d, d)).copy(),
        seen=np.zeros((s, n), dtype=bool),
        y=np.zeros((s, n)),
    )


def _objective(bank: ItemBank, theta, y, w, prec):
    z = theta @ bank.a.T - bank.offset
    # sum_O softplus(z) - y z = -sum_O [y log p + (1 - y) log q]
    ll = -(y * log_expit(z) + (1.0 - y) * log_expit(-z))
    return (ll * w).sum(axis=1) + 0.5 * prec * np.einsum("sd,sd->s", theta, theta)


def map_ability(
    bank: ItemBank,
    y,
    seen,
    theta0=None,
    *,
    prior: float = 1.0,
    max_iter: int = 30,
    tol: float = 1e-9,
) -> tuple[np.ndarray, np.ndarray]:
    """MAP abilities under ``theta ~ N(0, prior^2 I)`` from the seen items, batched over sessions.

    Parameters
    ----------
    bank : ItemBank
    y : array_like, shape (S, N)
        Values in [0, 1] (fractions are fractional Bernoulli targets); ignored where not seen.
    seen : array_like of bool, shape (S, N)
    theta0 : array_like, shape (S, D), optional
        Starting point (the previous estimate); default 0.
    prior : float
        Prior standard deviation.
    max_iter, tol
        Newton iterations and the max-abs gradient tolerance.

    Returns
    -------
    theta : ndarray, shape (S, D)
    cov : ndarray, shape (S, D, D)
        ``H^{-1}``, ``H = sum_seen p q a a^T + I / prior^2`` at ``theta``.

    Notes
    -----
    Damped Newton with per-session backtracking (halving until the objective decreases); the
    objective is strictly convex, so a few iterations suffice from a warm start.
    """
    w = np.asarray(seen, dtype=np.float64)
    yy = np.where(w > 0, np.asarray(y, dtype=np.float64), 0.0)
    s, d = w.shape[0], bank.dims
    theta = np.zeros((s, d)) if theta0 is None else np.array(theta0, dtype=np.float64)
    prec = 1.0 / prior**2
    eye = np.eye(d)
    a = bank.a
    f = _objective(bank, theta, yy, w, prec)
    for _ in range(max_iter):  # Newton iterations, batched over sessions
        p = expit(theta @ a.T - bank.offset)
        grad = (w * (p - yy)) @ a + prec * theta
        if np.abs(grad).max(initial=0.0) < tol:
            break
        hess = np.einsum("sn,nd,ne->sde", w * p * (1.0 - p), a, a) + prec * eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        scale = np.ones(s)
        todo = np.ones(s, dtype=bool)
        new = theta.copy()
        for _ in range(30):  # backtracking halvings, batched over sessions
            cand = theta - scale[:, None] * step
            fc = _objective(bank, cand, yy, w, prec)
            ok = todo & (fc <= f + 1e-12 * np.abs(f))
            new[ok] = cand[ok]
            f = np.where(ok, fc, f)
            todo &= ~ok
            if not todo.any():
                break
            scale = np.where(todo, scale / 2.0, scale)
        theta = new
    p = expit(theta @ a.T - bank.offset)
    hess = np.einsum("sn,nd,ne->sde", w * p * (1.0 - p), a, a) + prec * eye
    return theta, np.linalg.inv(hess)


def fisher_information(bank: ItemBank, theta, items=None) -> np.ndarray:
    """``I_j(theta) = p_j q_j a_j a_j^T``, shape (S, k, D, D) for the chosen items (default all)."""
    idx = np.arange(bank.n_items) if items is None else np.asarray(items, dtype=np.int64)
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    p = expit(th @ bank.a[idx].T - bank.offset[idx])
    return (p * (1.0 - p))[..., None, None] * np.einsum("nd,ne->nde", bank.a[idx], bank.a[idx])


def accuracy_gradient(bank: ItemBank, theta, mask=None) -> np.ndarray:
    """``(1/N) sum_j m_j p_j q_j a_j`` (gradient of predicted accuracy over items ``mask``), (S, D)."""
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    p = expit(th @ bank.a.T - bank.offset)
    pq = p * (1.0 - p)
    if mask is not None:
        pq = pq * np.asarray(mask, dtype=np.float64)
    return pq @ bank.a / bank.n_items


def accuracy_information(bank: ItemBank, theta) -> np.ndarray:
    """Item-choice criterion ``g^T I_j g = p_j q_j (a_j . g)^2``, shape (S, N)."""
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    p = expit(th @ bank.a.T - bank.offset)
    pq = p * (1.0 - p)
    g = pq @ bank.a / bank.n_items
    return pq * (g @ bank.a.T) ** 2


def fluid_next(bank: ItemBank, state: FluidState, k: int) -> np.ndarray:
    """Next batch: the ``k`` unused items with the largest :func:`accuracy_information`.

    Returns
    -------
    ndarray of int64, shape (S, k)
        Item positions, most informative first. Raises if a session has fewer than ``k`` unused
        items (serve ``min(k, unused)`` then).
    """
    k = int(k)
    if k < 1:
        raise ValueError("batch_size: expected a positive integer")
    if np.any((~state.seen).sum(axis=1) < k):
        raise ValueError("batch_size: larger than the number of unused items")
    score = np.where(state.seen, -np.inf, accuracy_information(bank, state.theta))
    top = np.argpartition(-score, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(score, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def fluid_update(
    bank: ItemBank, state: FluidState, items, values, *, inplace: bool = False
) -> FluidState:
    """Record a batch of results and re-estimate ``theta`` (Newton from the previous MAP).

    Parameters
    ----------
    bank : ItemBank
    state : FluidState
    items : array_like of int, shape (S, k) (or (k,) when S = 1)
        Item positions served (not seen before, distinct within a row).
    values : array_like, shape (S, k)
        Results in [0, 1].
    inplace : bool

    Returns
    -------
    FluidState
    """
    s = state.theta.shape[0]
    idx = np.asarray(items)
    v = np.asarray(values, dtype=np.float64)
    if idx.ndim == 1 and s == 1:
        idx, v = idx[None, :], v.reshape(1, -1)
    if idx.shape != v.shape or idx.ndim != 2 or idx.shape[0] != s:
        raise ValueError(f"items: expected shape ({s}, k) matching values")
    if not np.issubdtype(idx.dtype, np.integer) or idx.min(initial=0) < 0:
        raise ValueError("items: expected integer item positions")
    if idx.max(initial=0) >= bank.n_items:
        raise ValueError(f"items: positions must lie in [0, {bank.n_items})")
    if not np.all(np.isfinite(v)) or v.min(initial=0) < 0 or v.max(initial=0) > 1:
        raise ValueError("values: must be finite and in [0, 1]")
    rows = np.arange(s)[:, None]
    if state.seen[rows, idx].any():
        raise ValueError("items: an item was already seen")
    srt = np.sort(idx, axis=1)
    if np.any(srt[:, 1:] == srt[:, :-1]):
        raise ValueError("items: duplicate item in a batch")
    out = state if inplace else state.copy()
    out.seen[rows, idx] = True
    out.y[rows, idx] = v
    out.theta, out.cov = map_ability(bank, out.y, out.seen, out.theta)
    return out


def fluid_estimate(
    bank: ItemBank, state: FluidState, *, item_noise: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Model-based full-accuracy estimate and its delta-method SE (module docstring).

    Returns
    -------
    estimate, se : ndarray, shape (S,)
    """
    n = bank.n_items
    p = bank.probabilities(state.theta)
    unseen = ~state.seen
    est = (
        np.where(state.seen, state.y, 0.0).sum(axis=1) + np.where(unseen, p, 0.0).sum(axis=1)
    ) / n
    pq_u = np.where(unseen, p * (1.0 - p), 0.0)
    g_u = pq_u @ bank.a / n
    var = np.einsum("sd,sde,se->s", g_u, state.cov, g_u)
    if item_noise:
        var = var + pq_u.sum(axis=1) / n**2
    return est, np.sqrt(np.maximum(var, 0.0))


def normal_interval(estimate, se, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """``estimate -+ z_{1 - alpha/2} se`` (model-based interval)."""
    if not (0.0 < alpha < 1.0):
        raise ValueError("alpha: must lie in (0, 1)")
    z = norm.ppf(1.0 - alpha / 2.0)
    e, s = np.asarray(estimate, dtype=np.float64), np.asarray(se, dtype=np.float64)
    return e - z * s, e + z * s


__all__ = [
    "FluidState",
    "ItemBank",
    "accuracy_gradient",
    "accuracy_information",
    "fisher_information",
    "fluid_estimate",
    "fluid_init",
    "fluid_next",
    "fluid_update",
    "map_ability",
    "normal_interval",
]
