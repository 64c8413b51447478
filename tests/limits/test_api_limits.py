"""Limits as a client meets them, keys on: 429 problem+json naming the limit with Retry-After
and the RateLimit fields; admins exempt; the failure limiter and constant-cost path for API
keys; job quotas (the 1,000-run analysis is refused naming ANALYSIS_MAX_COST); /metrics."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.access import keys
from app.services.access.keys import create_key
from app.services.limits.limits_setup import configure_limits
from app.settings import Settings
from tests.conftest import TEST_KEY_PREFIX

LIMITED = {
    "auth_enabled": True,
    "rate_limit_per_second": 0.01,
    "rate_limit_burst": 30,
    "auth_attempts_per_second": 0.01,
    "auth_attempts_burst": 3,
    "job_quota": 1,
    "hold_refused_delay_seconds": 0.0,  # held 429s at once (the delay: its own test)
}


PROJECT_LIMITED = {
    **LIMITED,
    "project_rate_limit_per_second": 0.01,
    "project_rate_limit_burst": 20,
    "job_quota": 5,
    "project_job_quota": 1,
}


@contextmanager
def _client(settings: Settings, db_session: Session, update: dict) -> Iterator[TestClient]:
    from app.api.deps import open_session
    from app.main import create_app

    # fresh buckets for each test (they live in Redis under the key prefix)
    prefix = f"{TEST_KEY_PREFIX}limits-{uuid.uuid4().hex[:8]}:"
    app = create_app(settings.model_copy(update={**update, "celery_key_prefix": prefix}))
    app.dependency_overrides[open_session] = lambda: db_session
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        configure_limits(settings)  # the process-wide limits back to the suite's settings
        app.state.celery.close()
        app.state.engine.dispose()


@pytest.fixture
def limited_client(settings: Settings, db_session: Session) -> Iterator[TestClient]:
    with _client(settings, db_session, LIMITED) as client:
        yield client


@pytest.fixture
def project_client(settings: Settings, db_session: Session) -> Iterator[TestClient]:
    with _client(settings, db_session, PROJECT_LIMITED) as client:
        yield client


def _key(session: Session, *scopes: str) -> dict[str, str]:
    _, token = create_key(session, f"limits-{'-'.join(scopes)}", list(scopes))
    session.flush()
    return {"Authorization": f"Bearer {token}"}


def test_rate_limit_answers_429_with_the_ietf_fields(
    limited_client: TestClient, db_session: Session
) -> None:
    reader = _key(db_session, "read")
    statuses = []
    for _ in range(32):
        r = limited_client.get("/v1/benchmarks", headers=reader)
        statuses.append(r.status_code)
        if r.status_code == 200:
            assert r.headers["ratelimit-policy"] == '"key";q=30;w=3000'
            assert r.headers["ratelimit"].startswith('"key";r=')
    assert statuses == [200] * 30 + [429] * 2
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == 429 and body["limit"] == "rate"
    assert "RATE_LIMIT_BURST" in body["detail"] and "RATE_LIMIT_PER_SECOND" in body["detail"]
    assert int(r.headers["retry-after"]) >= 1
    assert r.headers["ratelimit"].startswith('"key";r=0;')
    # another key has its own bucket; an admin key is exempt
    assert limited_client.get("/v1/benchmarks", headers=_key(db_session, "read")).status_code == 200
    admin = _key(db_session, "admin")
    assert all(
        limited_client.get("/v1/benchmarks", headers=admin).status_code == 200 for _ in range(20)
    )


def test_unknown_prefixes_cost_an_argon2_verification_and_are_limited(
    limited_client: TestClient, db_session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real_verify, real_dummy = keys._verify, keys._dummy_verify

    def counted(row, token, now) -> bool:
        calls.append(row.key_hash)
        return real_verify(row, token, now)

    def counted_dummy(token: str) -> None:
        calls.append("dummy")
        real_dummy(token)

    monkeypatch.setattr(keys, "_verify", counted)
    monkeypatch.setattr(keys, "_dummy_verify", counted_dummy)
    r = limited_client.get("/v1/benchmarks", headers={"Authorization": "Bearer bsk_abcdef_nope"})
    assert r.status_code == 401 and calls == ["dummy"]  # unknown prefix: a dummy verification
    valid = _key(db_session, "read")
    prefix = valid["Authorization"].split("_")[1]
    wrong = {"Authorization": f"Bearer bsk_{prefix}_wrong-secret"}
    statuses = [limited_client.get("/v1/benchmarks", headers=wrong).status_code for _ in range(4)]
    # the address has 3 attempts: 1 spent above, 2 more wrong secrets, then 429 before hashing
    assert statuses == [401, 401, 429, 429]
    assert len(calls) == 3
    r = limited_client.get("/v1/benchmarks", headers=wrong)
    assert r.json()["limit"] == "auth-attempts" and "AUTH_ATTEMPTS_BURST" in r.json()["detail"]


ANALYSIS = {
    "methods": ["random", "subtask_stratified", "anchor_points", "confidence_stratified",
                "tiny_benchmarks", "dpp"],
    "sizes": list(range(5, 5 + 22)),
    "runs": 1000,
    "n_sources": 20,
    "n_targets": 10,
}  # fmt: skip


def test_job_quotas(limited_client: TestClient, db_session: Session) -> None:
    from tests.api._subset_data import seed_gpqa

    seeded = seed_gpqa(db_session, n_models=40)
    writer = _key(db_session, "write")
    db_session.commit()  # (a savepoint) a refused request below rolls back only its own work
    url = f"/v1/benchmarks/{seeded.version_id}/analyses"
    r = limited_client.post(url, json=ANALYSIS, headers=writer)
    assert r.status_code == 422, r.text
    body: dict[str, Any] = r.json()
    assert "ANALYSIS_MAX_COST" in body["detail"] and "132,000" in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "runs"]
    small = {**ANALYSIS, "methods": ["random"], "sizes": [5, 10], "runs": 4}
    r = limited_client.post(url, json=small, headers=writer)
    assert r.status_code == 202, r.text  # queued (no worker here): the key's one active job
    queued = r.json()
    r = limited_client.post(url, json={**small, "seed": 99}, headers=writer)
    assert r.status_code == 429 and r.json()["limit"] == "jobs", r.text
    assert "JOB_QUOTA" in r.json()["detail"] and int(r.headers["retry-after"]) >= 1
    # the first one again joins the active job (single flight): no new work, no quota
    first = limited_client.post(url, json={**small, "seed": queued["seed"]}, headers=writer)
    assert first.status_code == 202 and first.json()["job_id"] == queued["job_id"], first.text


def _sample(text: str, name: str, cache: str) -> float:
    m = re.search(rf'^{name}{{cache="{cache}"}} ([0-9.e+]+)$', text, re.MULTILINE)
    return float(m.group(1)) if m else 0.0


def test_metrics_count_cache_hits_and_misses(client: TestClient, db_session: Session) -> None:
    from tests.api._subset_data import seed_gpqa

    seeded = seed_gpqa(db_session, n_models=12)
    before = client.get("/metrics")
    assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
    url = f"/v1/benchmarks/{seeded.version_id}/leaderboard"
    assert client.get(url, params={"alpha": 0.0123}).status_code == 200  # a miss, then stored
    assert client.get(url, params={"alpha": 0.0123}).status_code == 200  # a hit
    after = client.get("/metrics").text
    for name, grew in (("benchslice_cache_misses_total", 1), ("benchslice_cache_hits_total", 1)):
        assert (
            _sample(after, name, "leaderboards")
            >= _sample(before.text, name, "leaderboards") + grew
        )
    assert _sample(after, "benchslice_cache_bytes", "leaderboards") > 0
    assert "benchslice_cache_evictions_total" in after


def test_a_projects_keys_share_its_bucket(project_client: TestClient, db_session: Session) -> None:
    from app.services.access.projects import create_project

    create_project(db_session, "team-z")
    first, second = _key(db_session, "read"), _key(db_session, "read")  # both on `default`
    _, token = create_key(db_session, "limits-team-z", {"team-z": "read"})
    db_session.flush()
    elsewhere = {"Authorization": f"Bearer {token}"}
    assert all(
        project_client.get("/v1/benchmarks", headers=first).status_code == 200 for _ in range(12)
    )
    statuses = [project_client.get("/v1/benchmarks", headers=second).status_code for _ in range(9)]
    assert statuses == [200] * 8 + [429]  # 20 for the project: its keys together
    r = project_client.get("/v1/benchmarks", headers=second)
    body = r.json()
    assert r.status_code == 429 and body["limit"] == "project-rate", r.text
    assert "project 'default'" in body["detail"] and "PROJECT_RATE_LIMIT_BURST" in body["detail"]
    assert r.headers["ratelimit-policy"] == '"project";q=20;w=2000'
    assert int(r.headers["retry-after"]) >= 1
    # another project's key has its own project bucket
    assert project_client.get("/v1/benchmarks", headers=elsewhere).status_code == 200


def test_a_projects_keys_share_its_job_quota(
    project_client: TestClient, db_session: Session
) -> None:
    from tests.api._subset_data import seed_gpqa

    seeded = seed_gpqa(db_session, n_models=40)
    first, second = _key(db_session, "write"), _key(db_session, "write")
    db_session.commit()  # (a savepoint) a refused request below rolls back only its own work
    url = f"/v1/benchmarks/{seeded.version_id}/analyses"
    small = {**ANALYSIS, "methods": ["random"], "sizes": [5, 10], "runs": 4}
    r = project_client.post(url, json=small, headers=first)
    assert r.status_code == 202, r.text  # the project's one active job
    r = project_client.post(url, json={**small, "seed": 99}, headers=second)
    body = r.json()
    assert r.status_code == 429 and body["limit"] == "project-jobs", r.text
    assert "project 'default'" in body["detail"] and "PROJECT_JOB_QUOTA" in body["detail"]
    assert int(r.headers["retry-after"]) >= 1


def test_a_refused_key_is_held_until_its_retry_after(
    limited_client: TestClient, db_session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a 429 for its rate, the same credential gets the same 429 at once (no key
    verification, no database) until Retry-After has passed; other keys are not held."""
    import app.api.admission as admission
    import app.api.deps as deps

    verified: list[int] = []
    real_authenticate = deps.authenticate

    def counted(*args: Any, **kwargs: Any) -> Any:
        verified.append(1)
        return real_authenticate(*args, **kwargs)

    monkeypatch.setattr(deps, "authenticate", counted)
    reader = _key(db_session, "read")
    statuses = [limited_client.get("/v1/benchmarks", headers=reader).status_code for _ in range(31)]
    assert statuses == [200] * 30 + [429] and len(verified) == 31
    for _ in range(5):
        r = limited_client.get("/v1/benchmarks", headers=reader)
        assert r.status_code == 429 and r.json()["limit"] == "rate"
        assert "RATE_LIMIT_BURST" in r.json()["detail"] and "repeated" in r.json()["detail"]
        assert int(r.headers["retry-after"]) >= 1
        assert r.headers["ratelimit"].startswith('"key";r=0;')
        assert r.headers["content-type"].startswith("application/problem+json")
    assert len(verified) == 31  # the held answers verified nothing
    other = _key(db_session, "read")
    assert limited_client.get("/v1/benchmarks", headers=other).status_code == 200
    # once Retry-After has passed the request is checked again (still short: a real refusal)
    later = admission.clock() + 3600
    monkeypatch.setattr(admission, "clock", lambda: later)
    r = limited_client.get("/v1/benchmarks", headers=reader)
    assert r.status_code == 429 and "repeated" not in r.json()["detail"]
    assert len(verified) == 33


def test_only_refusals_that_concern_every_request_hold_the_caller() -> None:
    from app.errors import TooManyRequests
    from app.services.limits.ratelimit import Decision, Policy, refusal

    quota = TooManyRequests("at the job quota", limit="jobs")
    assert not quota.holds_caller
    short = Decision(False, 0.0, 2.0, 3.0, "key:x", Policy(1.0, 3.0))
    assert refusal(short, 1.0, "a request").holds_caller


def test_a_held_refusal_is_sent_when_the_hold_ends_at_most_the_delay_later(
    settings: Settings, db_session: Session
) -> None:
    import time

    with _client(settings, db_session, {**LIMITED, "hold_refused_delay_seconds": 0.3}) as client:
        reader = _key(db_session, "read")
        statuses = [client.get("/v1/benchmarks", headers=reader).status_code for _ in range(31)]
        assert statuses[-1] == 429
        started = time.perf_counter()
        r = client.get("/v1/benchmarks", headers=reader)
        waited = time.perf_counter() - started
        assert r.status_code == 429 and "repeated" in r.json()["detail"]
        assert 0.25 <= waited < 5  # held for the delay (the hold itself lasts ~100 s)


def test_metrics_need_an_instance_admin_key(
    limited_client: TestClient, db_session: Session
) -> None:
    """Issue 39: /metrics counts every tenant's refusals and caches: a read key (or a project
    admin) is 403, an instance admin reads it."""
    assert limited_client.get("/metrics").status_code == 401
    assert limited_client.get("/metrics", headers=_key(db_session, "read")).status_code == 403
    assert limited_client.get("/metrics", headers=_key(db_session, "admin")).status_code == 403
    _, token = create_key(db_session, "metrics-admin", [], instance_admin=True)
    db_session.flush()
    r = limited_client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and "benchslice_" in r.text


def test_a_request_is_charged_only_to_the_project_it_touches(
    project_client: TestClient, db_session: Session
) -> None:
    """Issue 39: a key with roles on two projects reading project A's benchmark is not refused
    because project B's bucket is empty (it used to be charged to both), and B's refusal does
    not hold the key's requests to A."""
    from app.services.access.projects import create_project

    create_project(db_session, "team-a")
    create_project(db_session, "team-b")
    _, admin = create_key(db_session, "limits-admin", [], instance_admin=True)
    _, both = create_key(db_session, "limits-both", {"team-a": "read", "team-b": "read"})
    _, only_b = create_key(db_session, "limits-b", {"team-b": "read"})
    db_session.flush()
    bids = {}
    for project in ("team-a", "team-b"):
        r = project_client.post(
            "/v1/benchmarks",
            json={"name": f"touch-{project}", "project": project, "items": [{"id": "q1"}]},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert r.status_code == 201, r.text
        bids[project] = r.json()["id"]
    drain = {"Authorization": f"Bearer {only_b}"}
    codes = [
        project_client.get(f"/v1/benchmarks/{bids['team-b']}", headers=drain).status_code
        for _ in range(25)
    ]
    assert codes[-1] == 429, codes  # team-b's bucket (20) is empty
    mine = {"Authorization": f"Bearer {both}"}
    r = project_client.get(f"/v1/benchmarks/{bids['team-b']}", headers=mine)
    assert r.status_code == 429 and r.json()["limit"] == "project-rate", r.text
    for _ in range(3):  # team-a's benchmark: team-a's bucket only, not held by team-b's 429
        r = project_client.get(f"/v1/benchmarks/{bids['team-a']}", headers=mine)
        assert r.status_code == 200, r.text
