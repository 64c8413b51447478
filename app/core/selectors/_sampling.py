"""Vectorised sampling helpers shared by the stratified selectors."""

from __future__ import annotations

import numpy as np


def group_codes(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Encode labels as integer codes ``0..K-1`` (sorted label order).

    Returns
    -------
    uniques : ndarray, shape (K,)
        Distinct labels, sorted.
    codes : ndarray of int64, shape (N,)
        ``uniques[codes] == labels``.
    sizes : ndarray of int64, shape (K,)
        Number of items per group.
    """
    uniques, codes = np.unique(labels, return_inverse=True)
    codes = codes.astype(np.int64).reshape(-1)
    sizes = np.bincount(codes, minlength=uniques.shape[0]).astype(np.int64)
    return uniques, codes, sizes


def draw_within_groups(
    codes: np.ndarray, counts: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Draw ``counts[g]`` distinct members of every group ``g`` uniformly, without replacement.

    Parameters
    ----------
    codes : ndarray of int, shape (N,)
        Group code ``0..K-1`` of each element.
    counts : ndarray of int, shape (K,)
        How many elements to draw from each group; ``counts[g] <= |group g|``.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of int64
        Positions into ``codes`` of the drawn elements, sorted ascending.

    Notes
    -----
    One uniform key per element, a lexicographic sort by (group, key), and the first
    ``counts[g]`` elements of every group are kept: a uniformly random ``counts[g]``-subset of each
    group, independently across groups, in O(N log N) with no loop over groups.
    """
    n_el = codes.shape[0]
    keys = rng.random(n_el)
    order = np.lexsort((keys, codes))
    sorted_codes = codes[order]
    starts = np.searchsorted(sorted_codes, np.arange(counts.shape[0]))
    rank = np.arange(n_el) - starts[sorted_codes]
    take = rank < counts[sorted_codes]
    return np.sort(order[take]).astype(np.int64)
