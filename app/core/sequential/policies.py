"""Session policies: how items are drawn and predicted, all deciding with the §7 CS.

Every policy decides with the confidence sequence of :mod:`app.core.sequential.active` for the new
model's mean ``A`` (the interval for ``Delta`` is that CS minus the baseline's known mean), so every
decision carries the same design-based guarantee, ``P(any wrong decision) <= alpha``, whatever the
IRT fit is worth. Policies differ only in the predictions ``f`` (control variates) and the
sampling probabilities ``pi``, both computed before a batch from the results seen so far:

========== ================================================= =====================================
policy     predictions ``f``                                 sampling probabilities ``pi``
========== ================================================= =====================================
random     none (``f = 0``)                                  uniform over the unseen items
assisted   IRT probability ``sigmoid(a_i . theta - c_i)``    uniform
neyman     IRT probability                                   ``(1 - g) s_i / sum s + g / r``,
                                                             ``s_i = sqrt(f_i (1 - f_i))``
fluid      IRT probability                                   ``(1 - g) I_i / sum I + g / r``,
                                                             ``I_i`` Fluid's information criterion
========== ================================================= =====================================

``theta`` is the MAP ability from the items seen before the batch under the stored population's
item parameters (:func:`app.core.sequential.fluid.map_ability`, Newton from the previous
estimate); ``g`` is the floor (:data:`POLICY_GAMMA`). ``assisted`` bets with ``"agrapa-cv"``
(:data:`POLICY_BET`: aGRAPA whose mean and variance priors are the predictions', scaled by 1.5,
truncation ``c = 0.9``); the others with aGRAPA at ``c = 1/2``. The measured items per decision of each
policy are in ``bench/RESULTS.md`` (``bench/bench_sessions.py``).

A :class:`PolicyState` holds everything: the CS, the seen items and their values, the ability.
:func:`policy_draw` draws the next batch (no state change; keep the returned record until the
outcomes arrive), :func:`policy_update` feeds the outcomes. :func:`replay` rebuilds the CS from the
stored draw records and values (a deterministic function of them).

References
----------
Zrnic, T. & Candès, E. J. (2024). Active statistical inference. ICML.
Hofmann, V. et al. (2025). Fluid Language Model Benchmarking. COLM.
Neyman, J. (1934). On the two different aspects of the representative method. JRSS 97, 558-625.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from app.core.sequential.active import (
    CV_BET,
    ActiveCSState,
    DrawRecord,
    acs_init,
    acs_interval,
    acs_update,
    draw_batch,
    neyman_scores,
    record_draws,
)
from app.core.sequential.confidence_sequences import DEFAULT_ALPHA, DEFAULT_C
from app.core.sequential.cost import cost_scores
from app.core.sequential.fluid import ItemBank, accuracy_information, map_ability

POLICIES = ("random", "assisted", "neyman", "fluid")
IRT_POLICIES = ("assisted", "neyman", "fluid")
UNIFORM_POLICIES = ("random", "assisted")
DEFAULT_POLICY = "assisted"
POLICY_GAMMA = {"random": 1.0, "assisted": 1.0, "neyman": 0.5, "fluid": 0.5}
#: Bet and truncation of new sessions (stored with each session, so older ones keep theirs).
POLICY_BET = {"random": "agrapa", "assisted": CV_BET[0], "neyman": "agrapa", "fluid": "agrapa"}
POLICY_C = {"random": DEFAULT_C, "assisted": 0.9, "neyman": DEFAULT_C, "fluid": DEFAULT_C}


@dataclass
class PolicyState:
    """State of ``S`` sessions of one policy (persistable: :meth:`to_dict`).

    Attributes
    ----------
    policy : str
    gamma : float
        Floor of the sampling probabilities.
    cs : ActiveCSState
    seen : ndarray of bool, shape (S, N)
    y : ndarray, shape (S, N)
        Observed values (0 where not seen).
    theta : ndarray, shape (S, D)
        MAP abilities (``D = 0`` for ``random``).
    """

    policy: str
    gamma: float
    cs: ActiveCSState
    seen: np.ndarray
    y: np.ndarray
    theta: np.ndarray

    @property
    def sessions(self) -> int:
        return int(self.seen.shape[0])

    def to_dict(self) -> dict:
        out = {"policy": self.policy, "gamma": self.gamma}
        out.update({f"cs_{k}": v for k, v in self.cs.to_dict().items()})
        out.update(seen=self.seen, y=self.y, theta=self.theta)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> PolicyState:
        cs = ActiveCSState.from_dict({k[3:]: v for k, v in d.items() if k.startswith("cs_")})
        st = cls(
            policy=str(d["policy"]),
            gamma=float(d["gamma"]),
            cs=cs,
            seen=np.asarray(d["seen"], dtype=bool),
            y=np.asarray(d["y"], dtype=np.float64),
            theta=np.asarray(d["theta"], dtype=np.float64),
        )
        s = cs.sessions
        if st.seen.shape != (s, cs.n_items) or st.y.shape != st.seen.shape:
            raise ValueError("seen: shape does not match the confidence sequence")
        if st.theta.ndim != 2 or st.theta.shape[0] != s:
            raise ValueError("theta: expected shape (sessions, D)")
        return st

    def keep(self, rows) -> None:
        """Keep only the sessions ``rows`` (the simulator drops finished sessions)."""
        for f in fields(self.cs):
            v = getattr(self.cs, f.name)
            if isinstance(v, np.ndarray) and f.name != "grid":
                setattr(self.cs, f.name, v[rows])
        self.seen, self.y, self.theta = self.seen[rows], self.y[rows], self.theta[rows]


def _check_policy(policy: str, bank: ItemBank | None) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy: expected one of {POLICIES}, got {policy!r}")
    if policy in IRT_POLICIES and bank is None:
        raise ValueError(f"policy: {policy!r} needs an IRT item bank")


def policy_init(
    policy: str,
    n_items: int,
    *,
    bank: ItemBank | None = None,
    sessions: int = 1,
    alpha: float = DEFAULT_ALPHA,
    bet: str | None = None,
    c: float | None = None,
    gamma: float | None = None,
    binary: bool = True,
) -> PolicyState:
    """Sessions of ``policy`` with no item seen.

    Parameters
    ----------
    policy : {"random", "assisted", "neyman", "fluid"}
    n_items : int
    bank : ItemBank, optional
        Stored population's item parameters (needed by every policy but ``random``; its item
        count must be ``n_items``).
    sessions, alpha, binary
        As in :func:`app.core.sequential.active.acs_init`.
    bet, c : optional
        Bet and truncation (:func:`~app.core.sequential.active.acs_init`); default
        :data:`POLICY_BET` and :data:`POLICY_C` of the policy (``assisted``: ``"agrapa-cv"``,
        ``c = 0.9``; the others aGRAPA with ``c = 1/2``).
    gamma : float, optional
        Floor; default :data:`POLICY_GAMMA` of the policy.

    Returns
    -------
    PolicyState
    """
    _check_policy(policy, bank)
    if bank is not None and bank.n_items != n_items:
        raise ValueError("bank: its item count differs from n_items")
    g = POLICY_GAMMA[policy] if gamma is None else float(gamma)
    if not (0.0 < g <= 1.0):
        raise ValueError("gamma: the floor must lie in (0, 1]")
    bet = POLICY_BET[policy] if bet is None else bet
    c = POLICY_C[policy] if c is None else float(c)
    cs = acs_init(n_items, sessions=sessions, alpha=alpha, bet=bet, c=c, binary=binary)
    dims = 0 if policy == "random" else bank.dims  # type: ignore[union-attr]
    return PolicyState(
        policy=policy,
        gamma=g,
        cs=cs,
        seen=np.zeros((sessions, n_items), dtype=bool),
        y=np.zeros((sessions, n_items)),
        theta=np.zeros((sessions, dims)),
    )


def predictions(state: PolicyState, bank: ItemBank | None) -> np.ndarray:
    """``f``, shape (S, N): 0 for ``random``, else the IRT probabilities at the current ``theta``."""
    if state.policy == "random":
        return np.zeros(state.seen.shape)
    return bank.probabilities(state.theta)  # type: ignore[union-attr]


def allocation_scores(state: PolicyState, bank: ItemBank | None, f: np.ndarray, costs=None):
    """Scores of the sampling design (``None``: uniform).

    With ``costs`` (predicted cost per item, shape (N,), fixed for the session) the scores are
    per unit of cost, ``s_i / sqrt(c_i)`` (:func:`app.core.sequential.cost.cost_scores`;
    ``s = 1`` for the uniform policies), so cheap informative items are drawn more often; the
    floor ``gamma`` still applies (a policy whose ``gamma`` is 1 stays uniform).
    """
    scores = None
    if state.policy == "neyman":
        scores = neyman_scores(f)
    elif state.policy == "fluid":
        scores = accuracy_information(bank, state.theta)  # type: ignore[arg-type]
    if costs is None:
        return scores
    return cost_scores(scores, costs, ~state.seen)


def policy_draw(
    state: PolicyState, bank: ItemBank | None, k: int, uniforms, *, costs=None
) -> DrawRecord:
    """Draw the next batch of ``k`` items of every session (the state is not changed).

    ``uniforms`` (S, k) come from the session's seeded generator (:func:`draw_batch`);
    ``costs`` makes the design cost-aware (:func:`allocation_scores`).
    """
    _check_policy(state.policy, bank)
    f = predictions(state, bank)
    scores = allocation_scores(state, bank, f, costs)
    return draw_batch(f, scores, ~state.seen, k, uniforms=uniforms, gamma=state.gamma)


def policy_record(state: PolicyState, bank: ItemBank | None, items, *, costs=None) -> DrawRecord:
    """The record of given next draws ``items`` (S, k) under the policy's design.

    For the uniform policies a uniformly random permutation drawn up front (the service's seeded
    order) is a valid way to draw; this computes its ``pi`` (``1 / r``), ``f`` and ranges.
    ``costs`` as in :func:`policy_draw`.
    """
    _check_policy(state.policy, bank)
    f = predictions(state, bank)
    scores = allocation_scores(state, bank, f, costs)
    return record_draws(f, scores, ~state.seen, items, gamma=state.gamma)


def policy_update(
    state: PolicyState, bank: ItemBank | None, record: DrawRecord, values, *, inplace=False
) -> PolicyState:
    """Feed a drawn batch's outcomes (S, k) in draw order; re-estimate ``theta``."""
    out = state if inplace else _copy(state)
    acs_update(out.cs, record, values, inplace=True)
    rows = np.arange(out.sessions)[:, None]
    out.seen[rows, record.items] = True
    out.y[rows, record.items] = np.asarray(values, dtype=np.float64).reshape(record.items.shape)
    if out.policy != "random":
        out.theta, _ = map_ability(bank, out.y, out.seen, out.theta)  # type: ignore[arg-type]
    return out


def _copy(state: PolicyState) -> PolicyState:
    return PolicyState(
        policy=state.policy,
        gamma=state.gamma,
        cs=state.cs.copy(),
        seen=state.seen.copy(),
        y=state.y.copy(),
        theta=state.theta.copy(),
    )


def policy_interval(state: PolicyState) -> tuple[np.ndarray, np.ndarray]:
    """Design-based interval for the mean ``A`` of every session (exact at exhaustion)."""
    return acs_interval(state.cs)


def point_estimate(state: PolicyState, bank: ItemBank | None) -> np.ndarray:
    """Model-assisted (difference) estimate of ``A``, shape (S,).

    ``(S_t + sum_{unseen} f + (N - t) e_t) / N`` with ``e_t`` the mean inverse-probability-weighted
    residual so far: the seen values, the predictions for the unseen items, and the predictions'
    average error. For ``random`` (``f = 0``) it is the sample mean. ``NaN`` before any result.
    """
    cs = state.cs
    t = cs.t.astype(np.float64)
    f_unseen = np.where(state.seen, 0.0, predictions(state, bank)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = cs.resid / t
        est = (cs.total + f_unseen + (cs.n_items - t) * e) / cs.n_items
    return np.where(t > 0, np.clip(est, 0.0, 1.0), np.nan)


#: items the variance comparison of :func:`prediction_gain` needs before it says anything
MIN_GAIN_ITEMS = 20


def prediction_gain(values, predictions, *, recent: int = 50) -> dict | None:
    """How much the predictions cut the variance the bets see, over the items answered so far.

    The bets (and the model-assisted estimate) work on ``y - f`` instead of ``y``: the gain is
    the ratio of the residuals' variance to the values' own, ``var(y - f) / var(y)`` (1: no help;
    above 1: the predictions add noise, e.g. for a candidate unlike the stored models). Computed
    over every answered item and over the ``recent`` last ones (to see help that stopped).

    Parameters
    ----------
    values, predictions : array_like, shape (T,)
        ``y_t`` and ``f_t(I_t)`` of the answered draws, in draw order.
    recent : int

    Returns
    -------
    dict or None
        ``items``, ``ratio``, ``recent_items``, ``recent_ratio`` (NaN when the values do not vary)
        and ``helping`` (``ratio < 1`` and ``recent_ratio < 1``); None before
        :data:`MIN_GAIN_ITEMS` answered items.
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    f = np.asarray(predictions, dtype=np.float64).ravel()
    if y.size < MIN_GAIN_ITEMS:
        return None

    def ratio(yy: np.ndarray, ff: np.ndarray) -> float:
        raw = yy.var()
        return float((yy - ff).var() / raw) if raw > 0 else float("nan")

    k = min(int(recent), y.size)
    whole, last = ratio(y, f), ratio(y[-k:], f[-k:])
    helping = bool(whole < 1.0 and (np.isnan(last) or last < 1.0))
    return {"items": int(y.size), "ratio": whole, "recent_items": k, "recent_ratio": last,
            "helping": helping}  # fmt: skip


def replay(state0: PolicyState, records, values) -> ActiveCSState:
    """The CS after feeding stored draws and outcomes to ``state0``'s (fresh) CS.

    Parameters
    ----------
    state0 : PolicyState
        Gives ``n_items``, ``alpha``, ``bet``, ``c`` and the grid (e.g. a fine grid once values
        are fractional).
    records : DrawRecord
        Every draw so far (concatenated).
    values : array_like, shape (S, T)
        Their outcomes in draw order.
    """
    cs = state0.cs.copy()
    return acs_update(cs, records, values, inplace=True)


__all__ = [
    "DEFAULT_POLICY",
    "IRT_POLICIES",
    "POLICIES",
    "POLICY_BET",
    "POLICY_C",
    "POLICY_GAMMA",
    "UNIFORM_POLICIES",
    "PolicyState",
    "allocation_scores",
    "point_estimate",
    "policy_draw",
    "policy_init",
    "policy_interval",
    "policy_record",
    "policy_update",
    "prediction_gain",
    "predictions",
    "replay",
]
