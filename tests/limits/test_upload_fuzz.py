"""A small run of bench/bench_transport_fuzz.py's generator (issue 39): 300 requests over every
upload format (built valid, then mutated) and every GET route's query parameters, against the
real service (two API processes, a worker, keys on): no answer >= 500. The big run (>= 10,000
requests) is the benchmark's; bench/RESULTS.md has its figures."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from bench.bench_transport_fuzz import request_for
from tests.support.stack import Stack, create_key, seed

pytestmark = pytest.mark.integration

REQUESTS = 300


def test_fuzzed_uploads_and_queries_never_answer_5xx(two_process_stack: Stack) -> None:
    stack = two_process_stack
    with stack.client(stack.admin_key) as admin:
        data = seed(admin, name="fuzzsmall")
    key = create_key(stack.database_url, ["write"], name="small-fuzzer")
    seen: Counter[str] = Counter()
    failures = []
    with stack.client(key) as client:
        for i in range(REQUESTS):
            kind, req = request_for(np.random.default_rng([2026, i]), data)
            r = client.request(**req)
            seen[kind] += 1
            if r.status_code >= 500:
                failures.append((i, kind, req["url"], r.status_code, r.text[:200]))
    assert failures == []
    assert set(seen) == {"get", "npz", "jsonl", "parquet", "csv", "json", "multipart"}, seen
