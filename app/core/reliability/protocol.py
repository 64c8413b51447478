"""The paper's experiment protocol (methods spec §1.3): runs, source/target split, seen/unseen halves.

Per run ``r`` the protocol draws ``n_targets`` target models uniformly without replacement, then
``n_sources`` source models from the remaining models, and splits every subtask's items into a
*seen* half (the first ``floor(n_s / 2)`` of a uniform shuffle) and an *unseen* half. The split
is shared by all methods of the run. Each method is fitted once per run on the source models'
results restricted to the seen items, is told the requested sizes (``plan_sizes``: work shared by
the sizes is done once, e.g. the DPP's QR basis), then selects a subset of every requested size from
the seen items and estimates every target's accuracy from the target's results on that subset.

Randomness: all draws flow from ``seed`` through :class:`numpy.random.SeedSequence` spawn keys, so
each run and each (run, method, n) selection has an independent generator that does not depend on
how runs are distributed over processes, on the other methods requested or on their order:

* split of run ``r``: ``SeedSequence(seed, spawn_key=(r, 0))``;
* selection of (run ``r``, method ``m``, size ``n``):
  ``SeedSequence(seed, spawn_key=(r, 1, crc32(m), n))``, passed to ``select`` as an int seed
  (stored in the selection's provenance).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from app.core._validation import ResultsData, validate_results
from app.core.results import ProtocolResult
from app.core.selectors import SELECTORS, make_selector
from app.core.selectors.base import Selector

GPQA_SIZES = (10, 25, 50, 100, 200)
PAPER_SIZES = (10, 25, 50, 100, 250, 500, 1000)
ESTIMATE_DECIMALS = 12


def method_code(name: str) -> int:
    """Stable 32-bit code of a method name (used in seed spawn keys)."""
    return zlib.crc32(name.encode("utf-8"))


def selection_seed(seed: int, run: int, method: str, n: int) -> int:
    """Int seed of the (run, method, n) selection generator (see module docstring)."""
    ss = np.random.SeedSequence(seed, spawn_key=(run, 1, method_code(method), int(n)))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def split_run(
    n_models: int,
    subtask_codes: np.ndarray,
    *,
    n_targets: int,
    n_sources: int,
    seed: int,
    run: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw one run's targets, sources and seen-item mask.

    Parameters
    ----------
    n_models : int
    subtask_codes : ndarray of int, shape (n_items,)
        Integer subtask code per item.
    n_targets, n_sources : int
    seed, run : int

    Returns
    -------
    targets : ndarray of int64, shape (n_targets,)
        Drawn uniformly without replacement from all models (in draw order).
    sources : ndarray of int64, shape (n_sources,)
        Drawn uniformly without replacement from the non-targets.
    seen : ndarray of bool, shape (n_items,)

    Notes
    -----
    The per-subtask shuffle is realised as a sort of i.i.d. uniform keys within each subtask
    (``np.lexsort``), which is a uniformly random permutation of each subtask's items; the first
    ``floor(n_s / 2)`` positions of each permutation form the seen half.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(run, 0)))
    targets = rng.choice(n_models, size=n_targets, replace=False).astype(np.int64)
    rest = np.setdiff1d(np.arange(n_models, dtype=np.int64), targets)
    sources = rng.choice(rest, size=n_sources, replace=False).astype(np.int64)
    keys = rng.random(subtask_codes.shape[0])
    order = np.lexsort((keys, subtask_codes))
    counts = np.bincount(subtask_codes)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    ranks = np.empty_like(order)
    ranks[order] = np.arange(order.shape[0]) - np.repeat(starts, counts)
    seen = ranks < (counts // 2)[subtask_codes]
    return targets, sources, seen


def check_protocol_args(
    methods: Sequence[str],
    sizes: Sequence[int],
    *,
    runs: Any,
    n_targets: Any,
    n_sources: Any,
    seed: Any,
    workers: Any = 1,
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The protocol's argument checks (data-independent), shared by :func:`run_protocol` and
    :func:`app.core.reliability.analysis.run_protocol_chunk`; raises ``ValueError`` naming the argument.

    Returns the methods and sizes as tuples.
    """
    methods = tuple(methods)
    if not methods:
        raise ValueError("methods: at least one method is required")
    for name in methods:
        if name not in SELECTORS:
            raise ValueError(f"methods: unknown selector {name!r}; choose from {sorted(SELECTORS)}")
    if len(set(methods)) != len(methods):
        raise ValueError("methods: duplicate method names")
    sizes = tuple(int(n) for n in sizes)
    if not sizes or len(set(sizes)) != len(sizes):
        raise ValueError("sizes: expected distinct subset sizes")
    for name, value, low in (
        ("runs", runs, 1),
        ("n_targets", n_targets, 2),
        ("n_sources", n_sources, 1),
        ("workers", workers, 1),
    ):
        check_int(name, value, low)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int, got {seed!r}")
    return methods, sizes


def check_int(name: str, value: Any, low: int) -> int:
    """``value`` as an int if it is an integer ``>= low``; else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    return int(value)


def run_chunk(
    state: Mapping[str, Any],
    run_ids: Sequence[int],
    *,
    selectors: dict[str, Selector] | None = None,
) -> dict[str, Any]:
    """The protocol records of runs ``run_ids`` on a prepared state (:func:`prepare_state`).

    Parameters
    ----------
    state : mapping
        From :func:`prepare_state`.
    run_ids : sequence of int
    selectors : dict, optional
        Selector instances by method name, refitted for every run and kept in the dict for the
        caller's next chunk (a pool process keeps one per method for all its chunks). Every fit
        replaces all of a selector's fitted state, so a refitted instance selects exactly what a
        fresh one would; refitting lets a selector reuse its large buffers (Anchor Points'
        N x N dissimilarity). ``None``: fresh instances, dropped at the end.
    """
    limit = state["blas_threads"]
    selectors = {} if selectors is None else selectors
    if limit is None:
        return _run_chunk_body(state, run_ids, selectors)
    with threadpool_limits(limits=limit):  # BLAS and OpenMP (scikit-learn's KMeans) pools
        return _run_chunk_body(state, run_ids, selectors)


def _protocol_selector(
    selectors: dict[str, Selector], name: str, params: Mapping[str, Any]
) -> Selector:
    """The chunk's instance of ``name`` (made once with the protocol's parameters)."""
    selector = selectors.get(name)
    if selector is None or selector.params != make_selector(name, **params).params:
        selector = selectors[name] = make_selector(name, **params)
    return selector


def _run_chunk_body(
    s: Mapping[str, Any], run_ids: Sequence[int], selectors: dict[str, Selector]
) -> dict[str, Any]:
    correct: np.ndarray = s["correct"]
    confidence: np.ndarray | None = s["confidence"]
    subtasks: np.ndarray = s["subtasks"]
    methods: tuple[str, ...] = s["methods"]
    sizes: tuple[int, ...] = s["sizes"]
    params: Mapping[str, Mapping[str, Any]] = s["params"]
    n_t, n_m, n_s = s["n_targets"], len(methods), len(sizes)
    k = len(run_ids)
    out = {
        "runs": np.asarray(run_ids, dtype=np.int64),
        "targets": np.empty((k, n_t), np.int64),
        "sources": np.empty((k, s["n_sources"]), np.int64),
        "seen": np.empty((k, correct.shape[1]), bool),
        "acc_seen": np.empty((k, n_t)),
        "acc_unseen": np.empty((k, n_t)),
        "acc_full": np.empty((k, n_t)),
        "estimates": np.empty((n_m, n_s, k, n_t)),
        "subset_sizes": np.empty((n_m, n_s, k), np.int64),
        "seconds": dict.fromkeys(methods, 0.0),
    }
    for j, run in enumerate(run_ids):
        targets, sources, seen = split_run(
            correct.shape[0],
            s["codes"],
            n_targets=n_t,
            n_sources=s["n_sources"],
            seed=s["seed"],
            run=int(run),
        )
        seen_idx = np.flatnonzero(seen)
        y_t = correct[targets]
        y_t_seen = y_t[:, seen_idx]
        out["targets"][j], out["sources"][j], out["seen"][j] = targets, sources, seen
        out["acc_seen"][j] = y_t_seen.mean(axis=1)
        out["acc_unseen"][j] = y_t[:, ~seen].mean(axis=1)
        out["acc_full"][j] = y_t.mean(axis=1)
        src_correct = correct[np.ix_(sources, seen_idx)]
        src_conf = None if confidence is None else confidence[np.ix_(sources, seen_idx)]
        p_t_seen = None if confidence is None else confidence[np.ix_(targets, seen_idx)]
        # validated once per run: every method is fitted on the same read-only copies
        src_data = validate_results(src_correct, confidence=src_conf, subtasks=subtasks[seen_idx])
        for mi, name in enumerate(methods):
            t0 = time.perf_counter()
            selector = _protocol_selector(
                selectors, name, {**SELECTORS[name].protocol_params, **params.get(name, {})}
            )
            selector.fit_data(src_data)
            selector.plan_sizes(sizes)
            for si, n in enumerate(sizes):
                sel = selector.select(n, rng=selection_seed(s["seed"], int(run), name, n))
                y_sel = y_t_seen[:, sel.indices]
                if p_t_seen is not None:
                    p_sel = p_t_seen[:, sel.indices]
                elif sel.estimate_on == "confidence":
                    p_sel = y_sel  # documented fallback: correctness stands in for confidence
                else:
                    p_sel = None
                est = np.asarray(selector.estimate(sel, y_sel, p_sel), dtype=np.float64)
                # Canonicalise: mathematically equal estimates (e.g. equal counts over n) must tie
                # exactly, as the reference's np.mean does; BLAS dot products differ by ~1 ulp.
                out["estimates"][mi, si, j] = np.round(est, ESTIMATE_DECIMALS)
                out["subset_sizes"][mi, si, j] = sel.size
            out["seconds"][name] += time.perf_counter() - t0
    return out


# The state of a pool process (set by its initializer, never in the calling process): the
# results matrix is shipped once per process, not once per task; the process's selector
# instances live as long as the process (refitted for every run).
_POOL_STATE: dict[str, Any] = {}
_POOL_SELECTORS: dict[str, Selector] = {}


def _init_pool_process(state: dict[str, Any]) -> None:
    _POOL_STATE.update(state)
    # The objects inherited from the parent (every imported module) never become garbage: keep
    # them out of the collector's full passes, which otherwise walk all of them again and again
    # (~2 % of a pool process's CPU at MMLU-Pro scale), and off the copy-on-write pages.
    gc.freeze()


def _pool_chunk(run_ids: Sequence[int]) -> dict[str, Any]:
    return run_chunk(_POOL_STATE, run_ids, selectors=_POOL_SELECTORS)


def _pool_context() -> multiprocessing.context.BaseContext | None:
    """``fork`` on Linux (also where a newer Python defaults to ``forkserver``), else the default.

    Forked workers inherit the already imported numpy / scipy / scikit-learn (~1.7 s of imports
    per process otherwise) and the payload (the results matrix) without pickling it. The engine
    holds no locks or threads of its own at that point; OpenBLAS re-initialises its thread pool
    in the child (it registers ``pthread_atfork`` handlers).
    """
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return None


def _subtask_codes(subtasks: np.ndarray) -> np.ndarray:
    _, codes = np.unique(subtasks, return_inverse=True)
    return codes.astype(np.int64)


def prepare_state(
    data: ResultsData,
    methods: tuple[str, ...],
    sizes: tuple[int, ...],
    *,
    n_targets: int,
    n_sources: int,
    seed: int,
    selector_params: Mapping[str, Mapping[str, Any]] | None,
    blas_threads: int | None,
) -> dict[str, Any]:
    """Check the split and the sizes against the data; the state :func:`run_chunk` runs on.

    Shared by :func:`run_protocol` and :func:`app.core.reliability.analysis.run_protocol_chunk`, so a chunk
    runs on exactly the state a single-shot run would.
    """
    if n_targets + n_sources > data.n_models:
        raise ValueError(
            f"n_sources: {n_targets} targets + {n_sources} sources exceed the {data.n_models} models"
        )
    codes = _subtask_codes(data.subtasks)
    n_seen = int((np.bincount(codes) // 2).sum())
    bad = [n for n in sizes if n < 1 or n > n_seen]
    if bad:
        raise ValueError(f"sizes: {bad} outside [1, {n_seen}] (the seen half)")
    return {
        "correct": data.correct,
        "confidence": data.confidence,
        "subtasks": data.subtasks,
        "codes": codes,
        "methods": methods,
        "sizes": sizes,
        "params": {k: dict(v) for k, v in (selector_params or {}).items()},
        "n_targets": int(n_targets),
        "n_sources": int(n_sources),
        "seed": int(seed),
        "blas_threads": blas_threads,
    }


def run_protocol(
    correct,
    methods: Sequence[str] = ("random",),
    sizes: Sequence[int] = GPQA_SIZES,
    *,
    confidence=None,
    subtasks=None,
    runs: int = 50,
    n_sources: int = 300,
    n_targets: int = 50,
    seed: int = 0,
    workers: int = 1,
    selector_params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    blas_threads: int | None = 1,
) -> ProtocolResult:
    """Run the paper's micro-benchmarking protocol (methods spec §1.3).

    Parameters
    ----------
    correct : array_like, shape (n_models, n_items)
        Correctness in [0, 1] of every model on every item.
    methods : sequence of str
        Registry names of the selectors (:data:`app.core.selectors.SELECTORS`).
    sizes : sequence of int
        Subset sizes; each must not exceed the seen half.
    confidence : array_like, shape (n_models, n_items), optional
        Gold-option probabilities; methods fall back to correctness without it.
    subtasks : array_like of str, shape (n_items,), optional
        Subtask label per item (one subtask when omitted).
    runs, n_sources, n_targets : int
        Protocol constants (paper: 50, 300, 50).
    seed : int
        Root seed; see the module docstring for how every draw derives from it.
    workers : int
        Processes to spread runs over (``1``: in-process). Results do not depend on it.
    selector_params : mapping, optional
        Extra constructor parameters per method name.
    progress : callable, optional
        Called as ``progress(done_runs, runs)`` as chunks of runs finish.
    blas_threads : int or None
        Threads per process of the BLAS and OpenMP pools while the runs execute (scoped with
        ``threadpoolctl``; ``None`` leaves the pools as they are). The per-run work is small (a
        224 x 200 QR, k-means on a few hundred items), where extra threads only add
        synchronisation: on a busy 2-core machine one thread per process made a GPQA QR 3x and a
        k-means with k = 10 20x faster. It also avoids oversubscription when ``workers > 1``.

    Returns
    -------
    ProtocolResult
        Dense arrays of the per-(method, n, run) records.

    Notes
    -----
    Estimates are rounded to 12 decimals so that mathematically equal estimates tie exactly
    (the reference computes plain means with ``np.mean``, for which equal counts give equal floats;
    a weighted dot product can differ by one ulp depending on where the ones are). Ties matter:
    a tied estimate counts as a disagreement (§4.1).
    """
    data = validate_results(correct, confidence=confidence, subtasks=subtasks)
    methods, sizes = check_protocol_args(
        methods,
        sizes,
        runs=runs,
        n_targets=n_targets,
        n_sources=n_sources,
        seed=seed,
        workers=workers,
    )
    payload = prepare_state(
        data,
        methods,
        sizes,
        n_targets=n_targets,
        n_sources=n_sources,
        seed=seed,
        selector_params=selector_params,
        blas_threads=blas_threads,
    )
    workers = min(int(workers), int(runs))
    # One run per pool task: the pool hands the next run to whichever process is free, so the
    # processes finish at most one run apart (chunks of 6-7 runs left one process idle for up
    # to a chunk at the end, ~20-40 s at MMLU-Pro scale). A task's result is a few kB.
    n_chunks = 1 if workers == 1 else int(runs)
    chunks = [c.tolist() for c in np.array_split(np.arange(runs), n_chunks)]
    parts: list[dict[str, Any]] = []
    done = 0
    if workers == 1:
        for chunk in chunks:
            parts.append(run_chunk(payload, chunk))
            done += len(chunk)
            if progress is not None:
                progress(done, runs)
    else:
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_pool_context(),
            initializer=_init_pool_process,
            initargs=(payload,),
        ) as pool:
            futures = [pool.submit(_pool_chunk, chunk) for chunk in chunks]
            for fut in as_completed(futures):
                part = fut.result()
                parts.append(part)
                done += len(part["runs"])
                if progress is not None:
                    progress(done, runs)
    parts.sort(key=lambda p: int(p["runs"][0]))
    seconds = dict.fromkeys(methods, 0.0)
    for p in parts:
        for k, v in p["seconds"].items():
            seconds[k] += v
    return ProtocolResult(
        methods=methods,
        sizes=sizes,
        runs=int(runs),
        n_sources=int(n_sources),
        n_targets=int(n_targets),
        seed=int(seed),
        targets=np.concatenate([p["targets"] for p in parts]),
        sources=np.concatenate([p["sources"] for p in parts]),
        seen=np.concatenate([p["seen"] for p in parts]),
        acc_seen=np.concatenate([p["acc_seen"] for p in parts]),
        acc_unseen=np.concatenate([p["acc_unseen"] for p in parts]),
        acc_full=np.concatenate([p["acc_full"] for p in parts]),
        estimates=np.concatenate([p["estimates"] for p in parts], axis=2),
        subset_sizes=np.concatenate([p["subset_sizes"] for p in parts], axis=2),
        seconds=seconds,
        selector_params=payload["params"],
    )


def default_workers() -> int:
    """A sensible process count: the CPUs available to this process."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


__all__ = [
    "GPQA_SIZES",
    "PAPER_SIZES",
    "check_int",
    "check_protocol_args",
    "default_workers",
    "prepare_state",
    "run_chunk",
    "run_protocol",
    "selection_seed",
    "split_run",
]
