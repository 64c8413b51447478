"""A pair's paired outcome and the planner's significance answer (issue 13 §2).

Pure glue between :mod:`app.core.estimation.stats` / :mod:`app.core.reliability.power` and the verdict and plan
responses: no SQL (the caller passes the full 0/1 rows it loaded).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from app.core.estimation.stats import paired_outcomes
from app.core.reliability.power import pair_power, paired_sample_size, typical_discordance
from app.errors import InvalidInput
from app.schemas.subsets import PairedOutcomePublic, SignificancePublic
from app.services.platform.caching import MB, BoundedCache

# (version id, results stamp) -> the benchmark's median omega^2 over model pairs
_OMEGA2: BoundedCache[Hashable, float] = BoundedCache("paired_omega2", 4 * MB)


def check_min_discordant(k: int) -> None:
    if isinstance(k, bool) or k < 0:
        raise InvalidInput(
            "min_discordant must be a non-negative count",
            field="min_discordant",
            message="an integer >= 0",
        )


def paired_public(a: np.ndarray, b: np.ndarray, min_discordant: int) -> PairedOutcomePublic:
    """:func:`app.core.estimation.stats.paired_outcomes` of two full 0/1 rows, as the response model."""
    po = paired_outcomes(a, b, min_discordant=int(min_discordant))
    return PairedOutcomePublic(
        n11=po.n11,
        n10=po.n10,
        n01=po.n01,
        n00=po.n00,
        p_a_better=po.p_a_better,
        mcnemar_p=po.mcnemar_p,
        min_discordant=po.min_discordant,
        status=po.status,  # type: ignore[arg-type]
    )


def significance(
    correct: np.ndarray,
    key: Hashable,
    gap: float,
    *,
    alpha: float,
    power: float,
    rows: tuple[int, int] | None = None,
) -> SignificancePublic | None:
    """Shared items a paired test needs to detect ``gap`` at ``alpha`` with ``power``.

    With ``rows`` (a pair): :func:`app.core.reliability.power.pair_power` on the two models' full rows;
    otherwise the benchmark's median ``omega^2`` over all model pairs
    (:func:`app.core.reliability.power.typical_discordance`, cached under ``key``, e.g. a version and its
    results stamp). Both finite-population corrected to the benchmark's ``N`` items. ``None``
    with fewer than two models.
    """
    big_n = int(correct.shape[1])
    if rows is not None:
        ans = pair_power(
            correct[rows[0]],
            correct[rows[1]],
            delta=gap,
            alpha=alpha,
            power=power,
            n_population=big_n,
        )
        return SignificancePublic(
            n=ans.n, delta=ans.delta, omega2=ans.omega2, alpha=alpha, power=power, source="pair"
        )
    if correct.shape[0] < 2:
        return None
    omega2 = _OMEGA2.get(key)
    if omega2 is None:
        omega2 = typical_discordance(correct)
        _OMEGA2.put(key, omega2)
    n = int(paired_sample_size(gap, omega2, alpha=alpha, power=power, n_population=big_n))
    return SignificancePublic(
        n=n, delta=gap, omega2=omega2, alpha=alpha, power=power, source="benchmark_typical"
    )


def clear_caches() -> None:
    _OMEGA2.clear()
