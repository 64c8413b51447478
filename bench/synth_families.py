"""Seeded SYNTHETIC IRT benchmark families that are not GPQA-shaped (issue 24).

GPQA's 420 models all score 20-46 % and its items barely discriminate; intervals tuned there
need checking on other shapes. Each family below is a 2PL IRT benchmark
``P(correct_ij) = sigmoid(a_j (theta_i + tau eta_{i, s(j)}) - b_j)`` with a per (model, subtask)
deviation ``eta ~ N(0, 1)`` (subtasks are consecutive blocks), plus rows no IRT draw gives:

* all-wrong models (every item 0: a broken model or a parser that never matches);
* duplicate model rows (the same results uploaded under two names).

Families (``FAMILIES``), every one labelled synthetic:

``weak``
    40 % of the models weak (``theta ~ N(-3.5, 0.8)``: accuracy 0-6 %), the rest spread;
    items discriminate (``a ~ LogNormal(0.3, 0.3)``); 3 % all-wrong rows, 5 % duplicates.
``wide``
    ``theta ~ U(-4, 4)``: accuracies from 0 to 100 %; sharply discriminating items
    (``a ~ LogNormal(0.5, 0.3)``); 2 % all-wrong rows, 5 % duplicates.
``strong``
    the mirror of ``weak``: 40 % of the models near 100 % (tests the all-right end).
``discriminative``
    ``theta ~ N(0, 1)``, very sharp items (``a ~ LogNormal(1.2, 0.3)``, about 3.3) of spread
    difficulty (``b ~ N(0, 3)``): each item separates models above and below its level (issue 38).

Deterministic: the same family, sizes and seed give the same matrix (one ``default_rng(seed)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FAMILIES = ("weak", "wide", "strong", "discriminative")
SOURCE = (
    "SYNTHETIC: 2PL IRT family {family!r} (bench/synth_families.py, seed {seed}); "
    "not real model results"
)


@dataclass(frozen=True)
class FamilyResults:
    """A synthetic family's matrix and what it was drawn from.

    Attributes
    ----------
    correct : ndarray of uint8, shape (n_models, n_items)
    subtasks : ndarray of str, shape (n_items,)
    theta : ndarray, shape (n_models,)
        True abilities (``-inf`` for all-wrong rows; a duplicate repeats its original's).
    a, b : ndarray, shape (n_items,)
    duplicate_of : ndarray of int, shape (n_models,)
        Row a duplicate copies, ``-1`` for original rows.
    family : str
    seed : int
    synthetic : bool
        Always True.
    source : str
    """

    correct: np.ndarray
    subtasks: np.ndarray
    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    duplicate_of: np.ndarray
    family: str
    seed: int
    synthetic: bool = True
    source: str = ""


_SPECS = {
    # weak share, weak theta (mean, sd), other theta sampler, log a (mean, sd), all-wrong, dup
    "weak": dict(weak=0.4, weak_theta=(-3.5, 0.8), log_a=(0.3, 0.3), b=(0.5, 1.0), zero=0.03),
    "wide": dict(weak=0.0, weak_theta=(0.0, 1.0), log_a=(0.5, 0.3), b=(0.0, 1.2), zero=0.02),
    "strong": dict(weak=0.4, weak_theta=(3.5, 0.8), log_a=(0.3, 0.3), b=(-0.5, 1.0), zero=0.03),
    "discriminative": dict(
        weak=0.0, weak_theta=(0.0, 1.0), log_a=(1.2, 0.3), b=(0.0, 3.0), zero=0.0
    ),
}


def make_family(
    family: str,
    n_models: int = 420,
    n_items: int = 448,
    *,
    seed: int,
    n_subtasks: int = 8,
    subtask_effect: float = 0.5,
    duplicate_share: float = 0.05,
) -> FamilyResults:
    """Draw one synthetic benchmark of ``family`` (see the module docstring).

    Parameters
    ----------
    family : {"weak", "wide", "strong", "discriminative"}
    n_models, n_items : int
        At least 10 models and ``n_subtasks`` items.
    seed : int
    n_subtasks : int
        Consecutive item blocks of near-equal size.
    subtask_effect : float
        Standard deviation ``tau`` of the per (model, subtask) ability deviation.
    duplicate_share : float
        Share of rows that are exact copies of another (original) row.

    Returns
    -------
    FamilyResults
        ``synthetic=True``; ``source`` names the family and seed.
    """
    if family not in _SPECS:
        raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")
    if n_models < 10 or n_items < n_subtasks or n_subtasks < 1:
        raise ValueError("n_models: need >= 10 models and >= n_subtasks items")
    spec = _SPECS[family]
    rng = np.random.default_rng(seed)
    sizes = np.full(n_subtasks, n_items // n_subtasks)
    sizes[: n_items % n_subtasks] += 1
    block = np.repeat(np.arange(n_subtasks), sizes)
    subtasks = np.array([f"subtask_{k:02d}" for k in range(n_subtasks)])[block]
    weak = rng.random(n_models) < spec["weak"]
    if family == "wide":
        theta = rng.uniform(-4.0, 4.0, n_models)
    elif family == "discriminative":
        theta = rng.normal(0.0, 1.0, n_models)
    else:
        sign = 1.0 if family == "weak" else -1.0
        theta = rng.normal(0.3 * sign, 1.3, n_models)
    mu, sd = spec["weak_theta"]
    theta = np.where(weak, rng.normal(mu, sd, n_models), theta)
    a = np.exp(rng.normal(*spec["log_a"], n_items))
    b = rng.normal(*spec["b"], n_items)
    eta = subtask_effect * rng.standard_normal((n_models, n_subtasks))
    z = a * (theta[:, None] + eta[:, block]) - b
    correct = (rng.random(z.shape) < 1.0 / (1.0 + np.exp(-z))).astype(np.uint8)
    zero = rng.random(n_models) < spec["zero"]
    correct[zero] = 0
    theta = np.where(zero, -np.inf, theta)
    dup_of = np.full(n_models, -1)
    n_dup = round(duplicate_share * n_models)
    if n_dup:
        copies = rng.choice(n_models, n_dup, replace=False)
        originals = np.setdiff1d(np.arange(n_models), copies)
        dup_of[copies] = rng.choice(originals, n_dup)
        correct[copies] = correct[dup_of[copies]]
        theta[copies] = theta[dup_of[copies]]
    return FamilyResults(
        correct=correct,
        subtasks=subtasks,
        theta=theta,
        a=a,
        b=b,
        duplicate_of=dup_of,
        family=family,
        seed=int(seed),
        source=SOURCE.format(family=family, seed=seed),
    )
