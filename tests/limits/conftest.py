"""The real service for the transport tests (issue 39): two API processes (uvicorn
``--workers 2``), a Celery worker, a migrated database of its own, the shared Redis, keys on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import _RUN_ID, ADMIN_DATABASE_URL, TEST_REDIS_URL
from tests.support.procs import migrated_database
from tests.support.stack import Stack, running_stack

# short deadlines so the tests take seconds (the defaults are 10 s)
TRANSPORT_SETTINGS = {
    "REQUEST_BODY_SECONDS": "5",
    "REQUEST_HEADER_SECONDS": "5",
}


@pytest.fixture(scope="session")
def two_process_stack() -> Iterator[Stack]:
    name = f"benchslice_test_{_RUN_ID}_transport"
    with (
        migrated_database(ADMIN_DATABASE_URL, name) as url,
        running_stack(
            url,
            TEST_REDIS_URL,
            queue=f"benchslice-test-{_RUN_ID}-transport",
            key_prefix=f"benchslice-test-{_RUN_ID}:transport:",
            workers=2,
            **TRANSPORT_SETTINGS,
        ) as stack,
    ):
        yield stack
