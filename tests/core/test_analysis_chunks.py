"""Chunked protocol == single-shot protocol (invariance under how runs are split)."""

from __future__ import annotations

import numpy as np
import pytest

from app.core.reliability.analysis import chunk_bounds, combine_chunks, run_protocol_chunk
from app.core.reliability.protocol import run_protocol

FIELDS = (
    "targets",
    "sources",
    "seen",
    "acc_seen",
    "acc_unseen",
    "acc_full",
    "estimates",
    "subset_sizes",
)


def test_chunk_bounds_cover_runs_once() -> None:
    assert chunk_bounds(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert chunk_bounds(2, 5) == [(0, 1), (1, 2)]
    with pytest.raises(ValueError):
        chunk_bounds(0, 1)


@pytest.mark.parametrize("n_chunks", [1, 3, 7])
def test_chunked_equals_single_shot(gpqa: dict[str, np.ndarray], n_chunks: int) -> None:
    correct = gpqa["correct"]
    kwargs = dict(runs=7, n_sources=100, n_targets=20, seed=12345)
    methods, sizes = ("random", "subtask_stratified"), (10, 25)
    single = run_protocol(correct, methods, sizes, **kwargs)
    chunks = [
        run_protocol_chunk(correct, methods, sizes, run_start=a, run_stop=b, **kwargs)
        for a, b in chunk_bounds(7, n_chunks)
    ]
    combined = combine_chunks(
        chunks[::-1],  # order of arrival does not matter
        methods=methods,
        sizes=sizes,
        **kwargs,
    )
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(combined, name), getattr(single, name), err_msg=name)
    assert combined.methods == single.methods and combined.sizes == single.sizes
    assert (combined.runs, combined.seed) == (single.runs, single.seed)


def test_combine_rejects_gaps_and_overlaps(gpqa: dict[str, np.ndarray]) -> None:
    correct = gpqa["correct"]
    kw = dict(runs=3, n_sources=50, n_targets=10, seed=1)
    a = run_protocol_chunk(correct, ["random"], [10], run_start=0, run_stop=2, **kw)
    b = run_protocol_chunk(correct, ["random"], [10], run_start=1, run_stop=3, **kw)
    with pytest.raises(ValueError, match="exactly once"):
        combine_chunks([a], methods=["random"], sizes=[10], **kw)
    with pytest.raises(ValueError, match="exactly once"):
        combine_chunks([a, b], methods=["random"], sizes=[10], **kw)


def test_chunk_validates_its_range(gpqa: dict[str, np.ndarray]) -> None:
    with pytest.raises(ValueError, match="run_stop"):
        run_protocol_chunk(gpqa["correct"], ["random"], [10], run_start=0, run_stop=4, runs=3)
    with pytest.raises(ValueError, match="n_sources"):
        run_protocol_chunk(
            gpqa["correct"], ["random"], [10], run_start=0, run_stop=1, runs=1, n_sources=400
        )
