"""Shared fixtures for the engine tests: the real GPQA matrix (no DB, no network)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """``$BENCHSLICE_SHARED_DATA``, default ``<repo>/../shared/data``."""
    return Path(os.environ.get("BENCHSLICE_SHARED_DATA") or REPO.parent / "shared" / "data")


@pytest.fixture(scope="session")
def gpqa() -> dict[str, np.ndarray]:
    """Real GPQA-main results: ``correct`` (420 models x 448 items, uint8) and metadata arrays."""
    path = shared_data_dir() / "gpqa.npz"
    if not path.exists():
        pytest.fail(f"real data missing: {path} (set BENCHSLICE_SHARED_DATA)")
    with np.load(path, allow_pickle=False) as d:
        return {k: d[k] for k in d.files}
