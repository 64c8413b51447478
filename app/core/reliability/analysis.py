"""The paper protocol in chunks of runs, combined exactly as one :func:`run_protocol` call.

A long analysis is executed as independent chunks of runs (so a job can report progress and honour
a cancel between chunks, and several worker processes can share the runs). Every random draw of run
``r`` derives from ``(seed, r)`` only (see :mod:`app.core.reliability.protocol`), so a chunk computes exactly
the records :func:`app.core.reliability.protocol.run_protocol` computes for those runs, and
:func:`combine_chunks` reassembles them into the same :class:`ProtocolResult`, whatever the
chunking and whichever process ran which chunk.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.core._validation import validate_results
from app.core.reliability.protocol import check_int, check_protocol_args, prepare_state, run_chunk
from app.core.results import PROTOCOL_ARRAYS, ProtocolResult


@dataclass(frozen=True)
class ProtocolChunk:
    """The protocol records of runs ``run_start <= r < run_stop``.

    Attributes
    ----------
    run_start, run_stop : int
    targets, sources, seen, acc_seen, acc_unseen, acc_full : ndarray
        As in :class:`ProtocolResult`, restricted to the chunk's runs (leading axis).
    estimates : ndarray of float64, shape (n_methods, n_sizes, k, n_targets)
    subset_sizes : ndarray of int64, shape (n_methods, n_sizes, k)
    seconds : Mapping[str, float]
        Wall time per method spent on this chunk.
    """

    run_start: int
    run_stop: int
    targets: np.ndarray
    sources: np.ndarray
    seen: np.ndarray
    acc_seen: np.ndarray
    acc_unseen: np.ndarray
    acc_full: np.ndarray
    estimates: np.ndarray
    subset_sizes: np.ndarray
    seconds: Mapping[str, float] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """The chunk's arrays by field name (for serialisation)."""
        return {name: getattr(self, name) for name in PROTOCOL_ARRAYS}


def chunk_bounds(runs: int, n_chunks: int) -> list[tuple[int, int]]:
    """Split ``range(runs)`` into ``min(n_chunks, runs)`` contiguous, near-equal ``[start, stop)``."""
    if runs < 1 or n_chunks < 1:
        raise ValueError(
            f"chunk_bounds: expected runs >= 1 and n_chunks >= 1, got {runs}, {n_chunks}"
        )
    edges = np.linspace(0, runs, min(n_chunks, runs) + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def run_protocol_chunk(
    correct,
    methods: Sequence[str],
    sizes: Sequence[int],
    *,
    run_start: int,
    run_stop: int,
    runs: int,
    confidence=None,
    subtasks=None,
    n_sources: int = 300,
    n_targets: int = 50,
    seed: int = 0,
    selector_params: Mapping[str, Mapping[str, Any]] | None = None,
    blas_threads: int | None = 1,
) -> ProtocolChunk:
    """Run the protocol's runs ``run_start <= r < run_stop`` (of ``runs``) in this process.

    Parameters
    ----------
    correct, methods, sizes, confidence, subtasks, n_sources, n_targets, seed, selector_params,
    blas_threads
        As in :func:`app.core.reliability.protocol.run_protocol`.
    run_start, run_stop : int
        Half-open range of run indices, ``0 <= run_start < run_stop <= runs``.
    runs : int
        Total runs of the analysis the chunk belongs to (validation only: a run's draws do not
        depend on it).

    Returns
    -------
    ProtocolChunk

    Notes
    -----
    The per-run computation is the protocol's own (same function, same per-run seeds), so
    ``combine_chunks([run_protocol_chunk(..., a, b) for a, b in chunk_bounds(R, k)])`` equals
    ``run_protocol(..., runs=R)`` array for array, for every ``k``.
    """
    data = validate_results(correct, confidence=confidence, subtasks=subtasks)
    methods, sizes = check_protocol_args(
        methods, sizes, runs=runs, n_targets=n_targets, n_sources=n_sources, seed=seed
    )
    run_start = check_int("run_start", run_start, 0)
    run_stop = check_int("run_stop", run_stop, run_start + 1)
    if run_stop > runs:
        raise ValueError(f"run_stop: expected <= runs ({runs}), got {run_stop}")
    state = prepare_state(
        data,
        methods,
        sizes,
        n_targets=n_targets,
        n_sources=n_sources,
        seed=seed,
        selector_params=selector_params,
        blas_threads=blas_threads,
    )
    part = run_chunk(state, list(range(run_start, run_stop)))
    return ProtocolChunk(
        run_start=run_start,
        run_stop=run_stop,
        seconds=dict(part["seconds"]),
        **{name: part[name] for name in PROTOCOL_ARRAYS},
    )


def combine_chunks(
    chunks: Sequence[ProtocolChunk],
    *,
    methods: Sequence[str],
    sizes: Sequence[int],
    runs: int,
    n_sources: int,
    n_targets: int,
    seed: int,
    selector_params: Mapping[str, Mapping[str, Any]] | None = None,
) -> ProtocolResult:
    """Reassemble chunks (any order) covering ``range(runs)`` exactly once into a result.

    Raises ``ValueError`` when the chunks leave a gap or overlap.
    """
    ordered = sorted(chunks, key=lambda c: c.run_start)
    covered = (
        np.concatenate([np.arange(c.run_start, c.run_stop) for c in ordered]) if ordered else []
    )
    if not np.array_equal(covered, np.arange(runs)):
        raise ValueError(f"chunks: expected runs 0..{runs - 1} each exactly once")
    methods = tuple(methods)
    seconds = dict.fromkeys(methods, 0.0)
    for c in ordered:
        for k, v in c.seconds.items():
            seconds[k] = seconds.get(k, 0.0) + float(v)

    def cat(name: str, axis: int = 0) -> np.ndarray:
        return np.concatenate([getattr(c, name) for c in ordered], axis=axis)

    return ProtocolResult(
        methods=methods,
        sizes=tuple(int(n) for n in sizes),
        runs=int(runs),
        n_sources=int(n_sources),
        n_targets=int(n_targets),
        seed=int(seed),
        targets=cat("targets"),
        sources=cat("sources"),
        seen=cat("seen"),
        acc_seen=cat("acc_seen"),
        acc_unseen=cat("acc_unseen"),
        acc_full=cat("acc_full"),
        estimates=cat("estimates", axis=2),
        subset_sizes=cat("subset_sizes", axis=2),
        seconds=seconds,
        selector_params={k: dict(v) for k, v in (selector_params or {}).items()},
    )


__all__ = ["ProtocolChunk", "chunk_bounds", "combine_chunks", "run_protocol_chunk"]
