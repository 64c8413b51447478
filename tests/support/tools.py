"""Missing tools: skip on a developer's machine, fail loudly in CI.

With ``CI=true`` a test that needs a tool (a server binary, ``pg_dump``, ``docker-compose``,
Chromium, the shared data) fails naming what is missing instead of skipping silently: CI installs
everything it needs (``.ci/run``), so a missing tool there is a broken CI, not an optional test.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> None:
    """Skip (locally) or fail (``CI=true``) with ``reason``; never returns."""
    if in_ci():
        pytest.fail(f"required in CI but missing: {reason}", pytrace=False)
    pytest.skip(reason)
