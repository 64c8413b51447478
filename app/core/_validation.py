"""Input validation and RNG normalisation shared by the engine.

Every public numerical entry point validates once, here, and raises ``ValueError`` naming the
argument at fault, so callers (services, CLI) can turn it into a field-level error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SeedLike = int | np.integer | np.random.Generator | None


def normalize_rng(rng: SeedLike) -> tuple[np.random.Generator, int | None]:
    """Return ``(generator, seed)`` for a keyword-only ``rng`` argument.

    Parameters
    ----------
    rng : int, numpy.random.Generator or None
        An integer seed (stored with the result), an existing generator (the caller owns its
        provenance, so the returned seed is ``None``) or ``None`` (a fresh seed is drawn from OS
        entropy and returned, so the result is still reproducible).

    Returns
    -------
    generator : numpy.random.Generator
    seed : int or None
    """
    if isinstance(rng, np.random.Generator):
        return rng, None
    if rng is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
        return np.random.default_rng(seed), seed
    if isinstance(rng, bool) or not isinstance(rng, int | np.integer):
        raise ValueError(
            f"rng: expected an int seed, a numpy Generator or None, got {type(rng).__name__}"
        )
    if int(rng) < 0:
        raise ValueError("rng: seed must be non-negative")
    return np.random.default_rng(int(rng)), int(rng)


@dataclass(frozen=True)
class ResultsData:
    """Validated, read-only view of a results matrix.

    Attributes
    ----------
    correct : ndarray of float64, shape (n_models, n_items)
        Correctness in [0, 1] (0/1 for exact-match metrics).
    confidence : ndarray of float64, shape (n_models, n_items) or None
        Probability each model puts on the gold option.
    subtasks : ndarray of str, shape (n_items,)
        Subtask label per item (a single label ``"all"`` when none was given).
    candidates : ndarray of int64, shape (n_candidates,)
        Sorted item positions a selector may choose from.
    """

    correct: np.ndarray
    confidence: np.ndarray | None
    subtasks: np.ndarray
    candidates: np.ndarray

    @property
    def n_models(self) -> int:
        return self.correct.shape[0]

    @property
    def n_items(self) -> int:
        return self.correct.shape[1]

    @property
    def signal(self) -> np.ndarray:
        """Confidence when available, else correctness (the documented fallback)."""
        return self.confidence if self.confidence is not None else self.correct

    @property
    def signal_name(self) -> str:
        return "confidence" if self.confidence is not None else "correct"


def _as_readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def validate_matrix(name: str, values, *, ndim: int = 2) -> np.ndarray:
    """Return ``values`` as a float64 array in [0, 1], raising ``ValueError`` naming ``name``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not numeric ({exc})") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name}: expected a {ndim}-d array, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: is empty (shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(f"{name}: values must lie in [0, 1]")
    return arr


def validate_results(
    correct,
    *,
    confidence=None,
    subtasks=None,
    candidates=None,
) -> ResultsData:
    """Validate a results matrix and its optional companions.

    Parameters
    ----------
    correct : array_like, shape (n_models, n_items)
        Correctness in [0, 1].
    confidence : array_like, shape (n_models, n_items), optional
        Probability on the gold option, in [0, 1].
    subtasks : array_like of str, shape (n_items,), optional
        Subtask label per item.
    candidates : array_like of int, optional
        Distinct item positions a selector may choose from; default all items.

    Returns
    -------
    ResultsData
        Read-only copies; the caller's arrays are never mutated.

    Raises
    ------
    ValueError
        Naming the argument at fault (``correct``, ``confidence``, ``subtasks``, ``candidates``).
    """
    c = validate_matrix("correct", correct)
    n_items = c.shape[1]
    conf = None
    if confidence is not None:
        conf = validate_matrix("confidence", confidence)
        if conf.shape != c.shape:
            raise ValueError(f"confidence: shape {conf.shape} does not match correct {c.shape}")
    if subtasks is None:
        st = np.full(n_items, "all", dtype=object).astype(str)
    else:
        st = np.asarray(subtasks)
        if st.ndim != 1 or st.shape[0] != n_items:
            raise ValueError(f"subtasks: expected shape ({n_items},), got {st.shape}")
        st = st.astype(str)
    if candidates is None:
        cand = np.arange(n_items, dtype=np.int64)
    else:
        cand_arr = np.asarray(candidates)
        if cand_arr.ndim != 1 or cand_arr.size == 0:
            raise ValueError("candidates: expected a non-empty 1-d array of item positions")
        if not np.issubdtype(cand_arr.dtype, np.integer):
            raise ValueError("candidates: item positions must be integers")
        cand = np.sort(cand_arr.astype(np.int64))
        if cand[0] < 0 or cand[-1] >= n_items:
            raise ValueError(f"candidates: positions must lie in [0, {n_items})")
        if np.any(np.diff(cand) == 0):
            raise ValueError("candidates: positions must be distinct")
    return ResultsData(
        correct=_as_readonly(c),
        confidence=None if conf is None else _as_readonly(conf),
        subtasks=_as_readonly(st),
        candidates=_as_readonly(cand),
    )


def validate_size(n, n_pool: int, *, name: str = "n") -> int:
    """Check a subset size ``1 <= n <= n_pool`` and return it as an int."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise ValueError(f"{name}: expected an integer, got {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"{name}: must be positive, got {n}")
    if n > n_pool:
        raise ValueError(f"{name}: {n} exceeds the candidate pool of {n_pool} items")
    return int(n)
