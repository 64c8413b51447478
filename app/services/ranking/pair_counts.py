"""A version's stored pairwise counts, kept current by the worker (issue 27).

The ``precompute_views`` job (:mod:`app.services.ranking.precompute`) keeps one blob per version
in ``precomputed_views`` (view :data:`COUNTS_VIEW`): the pair counts of
:class:`app.core.ranking.stored_counts.PairCounts` over every model of the leaderboard's results
matrix (:func:`app.services.ranking.leaderboards.results_matrix`, rows in name order), with the
model names and, per model, the fingerprint the counts were computed from: its 0/1 row and
coverage row bit-packed (``N / 8`` bytes each; compared exactly, so no hash can collide).

:func:`current_counts` loads the stored blob and compares fingerprints with the current matrix,
whatever triggered the job: models whose name and rows are unchanged keep their counts; added,
replaced or restored models get their rows and columns computed
(:func:`app.core.ranking.stored_counts.update_pair_counts`, ``O(k m N)``), deleted ones are
dropped. The base is the counts this worker process computed last for the version when it still
holds them (a bounded cache: no read of the blob), else the blob. When there is no base, the item count or the kind of coverage changed, or more than
:data:`INCREMENTAL_MAX_FRACTION` of the models changed, every pair is computed (``O(m² N)``).

Size: ``m²`` bytes per matrix for ``N < 256`` (2 ``m²`` for ``N < 65,536``); one matrix without
coverage gaps (``n10``; ``n01 = n10ᵀ``), three with them (``n10``, ``n11``, shared). Stored
uncompressed (``np.savez``; Postgres compresses large values itself).
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass

import numpy as np
from prometheus_client import Counter
from sqlalchemy.orm import Session

from app.core.ranking.stored_counts import PairCounts, pair_counts, update_pair_counts
from app.db.repositories.benchmarks import PrecomputedViewRepository
from app.services.platform.caching import MB, BoundedCache

COUNTS_VIEW = "pair_counts.npz"
INCREMENTAL_MAX_FRACTION = 0.25  # above this share of changed models, compute every pair
LAST_COUNTS_BYTES = (
    512 * MB
)  # the worker process's last counts per version (10,000 x 1,000: 194 MiB)

UPDATES = Counter(
    "benchslice_pair_count_updates",
    "Stored pair counts brought up to date by the worker, by path (incremental or full)",
    ["path"],
)


@dataclass(frozen=True)
class StoredCounts:
    """Counts with the model names and per-model fingerprints they were computed from."""

    names: np.ndarray
    fp_correct: np.ndarray  # uint8 (m, ceil(N / 8)): packed 0/1 rows
    fp_coverage: np.ndarray  # uint8 (m, ceil(N / 8)): packed coverage rows
    counts: PairCounts


# the counts this worker process computed last, per version: the base of its next update without
# reading the blob back from the database (a state with its own names and fingerprints, so an
# older one than the database's is still a correct base; another process or a restart reads it)
_LAST: BoundedCache[uuid.UUID, StoredCounts] = BoundedCache("pair_counts", LAST_COUNTS_BYTES)


def fingerprints(correct: np.ndarray, coverage: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-model fingerprints: the bit-packed 0/1 and coverage rows."""
    return np.packbits(correct == 1, axis=1), np.packbits(coverage, axis=1)


def encode(stored: StoredCounts) -> bytes:
    """The blob (``np.savez``, no pickles)."""
    c = stored.counts
    arrays = {
        "names": stored.names.astype(str),
        "fp_correct": stored.fp_correct,
        "fp_coverage": stored.fp_coverage,
        "n10": c.n10,
        "n_own": c.n_own,
        "k_own": c.k_own,
        "n_items": np.array(c.n_items),
    }
    if c.masked:
        arrays["n11"], arrays["shared"] = c.n11, c.shared
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def decode(data: bytes) -> StoredCounts:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        masked = "shared" in z.files
        counts = PairCounts(
            z["n10"],
            z["n11"] if masked else None,
            z["shared"] if masked else None,
            z["n_own"],
            z["k_own"],
            int(z["n_items"]),
        )
        return StoredCounts(z["names"], z["fp_correct"], z["fp_coverage"], counts)


def _unchanged(old: StoredCounts, names, fp_c, fp_k) -> tuple[np.ndarray, np.ndarray]:
    """``(old rows, new rows)`` of the models with the same name and fingerprints."""
    _, i_old, i_new = np.intersect1d(old.names.astype(str), names, return_indices=True)
    same = np.all(old.fp_correct[i_old] == fp_c[i_new], axis=1) & np.all(
        old.fp_coverage[i_old] == fp_k[i_new], axis=1
    )
    return i_old[same], i_new[same]


def current_counts(
    session: Session, version_id: uuid.UUID, names: np.ndarray, correct, coverage
) -> tuple[StoredCounts, dict]:
    """The counts of the given matrix (rows = ``names``), updated from the version's stored
    blob where fingerprints allow, and how: ``{"path": "incremental" | "full", "changed": k}``."""
    names = np.asarray(names).astype(str)
    fp_c, fp_k = fingerprints(correct, coverage)
    cov = None if coverage.all() else coverage
    m = names.shape[0]
    old = _LAST.get(version_id)
    how = {"base": "process"}
    if old is None:
        prior = PrecomputedViewRepository(session).latest(version_id, COUNTS_VIEW)
        old = None if prior is None else decode(prior[1])
        how = {"base": "database" if old is not None else "none"}
    counts = None
    if old is not None:
        keep_old, keep_new = _unchanged(old, names, fp_c, fp_k)
        changed = m - keep_new.size
        same_kind = old.counts.n_items == correct.shape[1] and old.counts.masked == (
            cov is not None
        )
        if same_kind and changed <= INCREMENTAL_MAX_FRACTION * m:
            counts, rows = update_pair_counts(old.counts, keep_old, keep_new, correct, cov)
            how |= {"path": "incremental", "changed": int(rows.size)}
    if counts is None:
        counts = pair_counts(correct, cov)
        how |= {"path": "full", "changed": m}
    UPDATES.labels(how["path"]).inc()
    stored = StoredCounts(names, fp_c, fp_k, counts)
    _LAST.put(version_id, stored)
    return stored, how


def clear_caches() -> None:
    _LAST.clear()


__all__ = [
    "COUNTS_VIEW",
    "INCREMENTAL_MAX_FRACTION",
    "StoredCounts",
    "clear_caches",
    "current_counts",
    "decode",
    "encode",
    "fingerprints",
]
