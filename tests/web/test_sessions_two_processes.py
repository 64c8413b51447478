"""Browser sessions across API processes (real ``uvicorn --workers 2`` on Postgres): a form
served by one process is accepted by the other (the CSRF secret is shared), every page works
whichever process answers, and logout ends the session everywhere, on /ui and on /v1."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import _RUN_ID, ADMIN_DATABASE_URL, TEST_REDIS_URL
from tests.support.procs import api_server, migrated_database, service_env
from tests.support.stack import create_key

pytestmark = pytest.mark.integration


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m is not None
    return m.group(1)


def test_login_works_on_every_request_and_logout_revokes_everywhere() -> None:
    name = f"benchslice_test_{_RUN_ID}_sessions2"
    with migrated_database(ADMIN_DATABASE_URL, name) as url:
        env = service_env(
            DATABASE_URL=url,
            BROKER_URL=TEST_REDIS_URL,
            CELERY_KEY_PREFIX=f"benchslice-test-{_RUN_ID}:sessions2:",
            AUTH_ENABLED="true",
        )
        key = create_key(url, ["read"], name="browser")
        with api_server(env, workers=2) as server:
            # 30 fresh browsers, a new connection per request: the form and its POST land on
            # either process (with a per-process CSRF secret about half the logins got 403)
            for attempt in range(30):
                with httpx.Client(base_url=server.url, timeout=30) as browser:
                    form = browser.get("/ui/login", headers={"Connection": "close"})
                    assert form.status_code == 200
                    r = browser.post(
                        "/ui/login",
                        data={"key": key, "csrf": _csrf(form.text), "next": "/ui/"},
                        headers={"Connection": "close"},
                    )
                    assert r.status_code == 303, (attempt, r.status_code, r.text[:300])
                    session_id = browser.cookies["benchslice_session"]
                    assert key not in session_id
                    for _ in range(3):
                        page = browser.get("/ui/", headers={"Connection": "close"})
                        assert page.status_code == 200, (attempt, page.status_code)
            # the last session: logout on one process ends it on both, and on /v1
            logout = browser_logout(server.url, key)
            assert logout["after_logout"] == [401] * 6
            assert logout["v1_with_session_id"] == 401


def browser_logout(base: str, key: str) -> dict:
    with httpx.Client(base_url=base, timeout=30) as browser:
        form = browser.get("/ui/login")
        r = browser.post("/ui/login", data={"key": key, "csrf": _csrf(form.text), "next": "/ui/"})
        assert r.status_code == 303
        session_id = browser.cookies["benchslice_session"]
        page = browser.get("/ui/")
        assert page.status_code == 200
        r = browser.post("/ui/logout", data={"csrf": _csrf(page.text)})
        assert r.status_code == 303
    with httpx.Client(base_url=base, timeout=30) as stale:  # the old cookie, replayed
        stale.cookies.set("benchslice_session", session_id, path="/ui")
        after = [stale.get("/ui/", headers={"Connection": "close"}).status_code for _ in range(6)]
        v1 = stale.get("/v1/benchmarks", headers={"Authorization": f"Bearer {session_id}"})
    return {"after_logout": after, "v1_with_session_id": v1.status_code}
