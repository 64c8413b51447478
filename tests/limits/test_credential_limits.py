"""Limits keyed on the credential, against the real service (issue 39, "Medium — limits keyed
on the literal header" and "a key with roles on several projects is refused when another
project's bucket is empty"): two API processes, a worker, Postgres, the shared Redis, keys on,
with buckets small enough to empty in a few requests.

The finding: 12 requests of one key in six spellings of its ``Authorization`` header were
12/12 admitted where one spelling gets the bucket's share. Here the buckets live in Redis
(shared by both processes), the held refusals in each process: every spelling draws on the
key's one bucket and is held by its refusal.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import _RUN_ID, ADMIN_DATABASE_URL, TEST_REDIS_URL
from tests.support.procs import migrated_database
from tests.support.stack import Stack, create_key, project_keys, running_stack

pytestmark = pytest.mark.integration

BURST = 6
PROJECT_BURST = 10
SPELLINGS = [
    "Bearer {}",
    "bearer {}",
    "BEARER {}",
    "Bearer  {}",
    "Bearer   {}",
    "bEaReR \t{}",
]  # leading / trailing spaces are not sent: HTTP strips them (h11 refuses to send them)


@pytest.fixture(scope="module")
def small_buckets() -> Iterator[Stack]:
    name = f"benchslice_test_{_RUN_ID}_credlimits"
    with (
        migrated_database(ADMIN_DATABASE_URL, name) as url,
        running_stack(
            url,
            TEST_REDIS_URL,
            queue=f"benchslice-test-{_RUN_ID}-credlimits",
            key_prefix=f"benchslice-test-{_RUN_ID}:credlimits:",
            workers=2,
            RATE_LIMIT_PER_SECOND="0.01",
            RATE_LIMIT_BURST=str(BURST),
            PROJECT_RATE_LIMIT_PER_SECOND="0.01",
            PROJECT_RATE_LIMIT_BURST=str(PROJECT_BURST),
            HOLD_REFUSED_DELAY_SECONDS="0",
        ) as stack,
    ):
        yield stack


def _keys(stack: Stack, projects: list[str], roles: dict[str, dict[str, str]]) -> dict[str, str]:
    """Each test's keys on projects of their own, so no test drains another's project bucket."""
    return project_keys(stack.database_url, projects, roles)


def _codes(stack: Stack, requests: list[tuple[str, str]]) -> list[int]:
    """Each (path, Authorization header) on a new connection, so on either API process."""
    codes = []
    for path, header in requests:
        with httpx.Client(base_url=stack.api.url, timeout=30) as client:
            codes.append(client.get(path, headers={"Authorization": header}).status_code)
    return codes


def test_spellings_of_one_key_draw_on_its_one_bucket(small_buckets: Stack) -> None:
    keys = _keys(
        small_buckets,
        ["cred-one", "cred-six"],
        {"one": {"cred-one": "read"}, "six": {"cred-six": "read"}},
    )
    one, six = keys["one"], keys["six"]
    plain = _codes(small_buckets, [("/v1/benchmarks", f"Bearer {one}")] * 12)
    varied = _codes(
        small_buckets, [("/v1/benchmarks", SPELLINGS[i % 6].format(six)) for i in range(12)]
    )
    assert plain.count(200) == BURST and set(plain[BURST:]) == {429}, plain
    assert varied.count(200) == BURST and set(varied[BURST:]) == {429}, varied


def test_a_refusal_holds_every_spelling_and_not_another_key(small_buckets: Stack) -> None:
    """On one keep-alive connection (so one API process): once the key's refusal is held, every
    spelling of it is answered from the hold at once (the finding: a new spelling was a new
    credential, checked and refused for real, and so evaded the hold), another key is not."""
    keys = _keys(
        small_buckets,
        ["cred-held", "cred-bystander"],
        {"held": {"cred-held": "read"}, "bystander": {"cred-bystander": "read"}},
    )
    key, other = keys["held"], keys["bystander"]
    held_marker = "repeated without recomputing"
    with httpx.Client(base_url=small_buckets.api.url, timeout=30) as client:

        def get(header: str) -> httpx.Response:
            return client.get("/v1/benchmarks", headers={"Authorization": header})

        codes = [get(f"Bearer {key}") for _ in range(BURST + 2)]
        assert [r.status_code for r in codes] == [200] * BURST + [429] * 2
        assert held_marker in codes[-1].json()["detail"]  # the second refusal: from the hold
        for spelling in SPELLINGS[1:]:
            r = get(spelling.format(key))
            assert r.status_code == 429, (spelling, r.text)
            assert held_marker in r.json()["detail"], (spelling, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert int(r.headers["retry-after"]) >= 1
        assert get(f"bearer {other}").status_code == 200


def test_a_request_is_charged_only_to_the_project_it_touches(small_buckets: Stack) -> None:
    keys = _keys(
        small_buckets,
        ["cred-a", "cred-b"],
        {"both": {"cred-a": "read", "cred-b": "read"}, "only-b": {"cred-b": "read"}},
    )
    both, only_b = keys["both"], keys["only-b"]
    admin_key = create_key(small_buckets.database_url, [], name="exempt", instance_admin=True)
    bids = {}
    with small_buckets.client(admin_key) as admin:  # instance admins draw on no bucket
        for project in ("cred-a", "cred-b"):
            r = admin.post(
                "/v1/benchmarks",
                json={"name": f"touch-{project}", "project": project, "items": [{"id": "q1"}]},
            )
            assert r.status_code == 201, r.text
            bids[project] = r.json()["id"]
    # another key of cred-b takes its own bucket's BURST of cred-b's PROJECT_BURST tokens
    drain = _codes(small_buckets, [(f"/v1/benchmarks/{bids['cred-b']}", f"Bearer {only_b}")] * 8)
    assert drain.count(200) == BURST and drain[-1] == 429, drain
    # the two-project key then finds cred-b's bucket empty within PROJECT_BURST - BURST + 1
    # requests (fewer than its own bucket holds): refused naming the project's bucket
    refusal = None
    with httpx.Client(base_url=small_buckets.api.url, timeout=30) as client:
        for _ in range(PROJECT_BURST - BURST + 1):
            r = client.get(
                f"/v1/benchmarks/{bids['cred-b']}", headers={"Authorization": f"Bearer {both}"}
            )
            if r.status_code == 429:
                refusal = r.json()
                break
            assert r.status_code == 200, r.text
    assert refusal is not None and refusal["limit"] == "project-rate", refusal
    # cred-a's benchmark: cred-a's bucket and the key's own, not held by cred-b's refusal
    mine_a = _codes(small_buckets, [(f"/v1/benchmarks/{bids['cred-a']}", f"bearer {both}")])
    assert mine_a == [200], mine_a
