"""A small run of bench/bench_transport_fuzz.py's generator (issue 39): 400 requests over every
upload format (built valid, then mutated; the log formats included: Inspect, Every Eval Ever,
HELM, zips of logs) and every GET route's query parameters, against the real service (two API
processes, a worker, keys on): no answer >= 500, and nothing half-written (no stored results of
a model whose every upload was refused, no model row nothing refers to). The big run (>= 10,000
requests) is the benchmark's; bench/RESULTS.md has its figures."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from bench.bench_transport_fuzz import LOG_KINDS, half_written, request_for, seed_logs
from tests.support.stack import Stack, create_key, seed

pytestmark = pytest.mark.integration

REQUESTS = 400


def test_fuzzed_uploads_and_queries_never_answer_5xx(two_process_stack: Stack) -> None:
    stack = two_process_stack
    with stack.client(stack.admin_key) as admin:
        data = seed(admin, name="fuzzsmall")
        data.extra["logs"] = seed_logs(admin, prefix="fuzzsmall")
    key = create_key(stack.database_url, ["write"], name="small-fuzzer")
    seen: Counter[str] = Counter()
    answered: dict[str, bool] = {}
    failures = []
    with stack.client(key) as client:
        for i in range(REQUESTS):
            kind, req = request_for(np.random.default_rng([2026, i]), data)
            r = client.request(**req)
            seen[kind] += 1
            named = (req.get("params") or {}).get("model")
            if named is not None and kind != "get":
                answered[named] = answered.get(named, False) or 200 <= r.status_code < 300
            if r.status_code >= 500:
                failures.append((i, kind, req["url"], r.status_code, r.text[:200]))
    assert failures == []
    assert set(seen) == {"get", "npz", "jsonl", "parquet", "csv", "json", "multipart", *LOG_KINDS}
    assert not all(answered.values()) and any(answered.values())  # both kinds of upload ran
    assert half_written(stack.database_url, answered) == {
        "results_of_refused_models": [],
        "orphan_models": [],
    }
