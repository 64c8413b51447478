"""Pages with API keys on: a read key via the login form (HttpOnly, SameSite=Strict cookie,
CSRF-checked), refused without one; the key never appears in a page."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.api.deps import open_session
from app.main import create_app
from app.services.access.keys import create_key, revoke_key
from app.settings import Settings


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m is not None
    return m.group(1)


def _login(client: TestClient, key: str) -> str:
    """Sign in with ``key``; the session cookie's value."""
    token = _csrf(client.get("/ui/login").text)
    r = client.post("/ui/login", data={"key": key, "csrf": token, "next": "/ui/"})
    assert r.status_code == 303, r.text
    return r.cookies["benchslice_session"]


def test_missing_or_bad_session_is_refused(auth_client: TestClient, db_session: Session) -> None:
    for path in ("/ui/", "/ui/benchmarks/x", "/ui/analyses/x", "/ui/subsets/x/download/csv"):
        r = auth_client.get(path)
        assert r.status_code == 401, (path, r.status_code)
        assert 'action="/ui/login"' in r.text
    _, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    # the cookie is never a key: a raw key in it (or in the old key cookie) is refused
    for cookie in ("benchslice_session", "benchslice_key"):
        auth_client.cookies.set(cookie, key, path="/ui")
        assert auth_client.get("/ui/").status_code == 401
        auth_client.cookies.clear()
    auth_client.cookies.set("benchslice_session", "made-up", path="/ui")
    assert auth_client.get("/ui/").status_code == 401


def test_login_flow(auth_client: TestClient, db_session: Session) -> None:
    row, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    r = auth_client.get("/ui/login", params={"next": "/ui/benchmarks/gpqa?q=x"})
    assert r.status_code == 200
    token = _csrf(r.text)
    assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=strict" in r.headers["set-cookie"]
    assert 'value="/ui/benchmarks/gpqa?q=x"' in r.text

    # without the CSRF token (or with a forged one) the form is refused
    r = auth_client.post("/ui/login", data={"key": key, "csrf": "", "next": "/ui/"})
    assert r.status_code == 403 and "benchslice_session" not in r.headers.get("set-cookie", "")
    r = auth_client.post("/ui/login", data={"key": key, "csrf": "a.b", "next": "/ui/"})
    assert r.status_code == 403
    # a wrong key: 401, the form again, the submitted key not echoed
    r = auth_client.post("/ui/login", data={"key": "bsk_abc_wrong", "csrf": token, "next": "/ui/"})
    assert r.status_code == 401 and "bsk_abc_wrong" not in r.text
    # a read key signs in: redirect where asked, a session cookie that is not the key
    r = auth_client.post(
        "/ui/login", data={"key": key, "csrf": token, "next": "/ui/benchmarks/gpqa"}
    )
    assert r.status_code == 303 and r.headers["location"] == "/ui/benchmarks/gpqa"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("benchslice_session=")
    session_id = r.cookies["benchslice_session"]
    assert key not in cookie and len(session_id) >= 40
    for attr in ("HttpOnly", "SameSite=strict", "Path=/ui"):
        assert attr in cookie
    assert "Secure" not in cookie  # plain http here; https adds it
    r = auth_client.get("/ui/")
    assert r.status_code == 200 and key not in r.text and "Sign out" in r.text
    # the session id is no bearer token on /v1
    assert (
        auth_client.get(
            "/v1/benchmarks", headers={"Authorization": f"Bearer {session_id}"}
        ).status_code
        == 401
    )
    # sign out revokes the session on the server: the old cookie no longer works
    r = auth_client.post("/ui/logout", data={"csrf": _csrf(r.text)})
    assert r.status_code == 303
    assert auth_client.get("/ui/").status_code == 401
    auth_client.cookies.set("benchslice_session", session_id, path="/ui")
    assert auth_client.get("/ui/").status_code == 401
    # revoking the key ends its sessions at once
    auth_client.cookies.clear()
    _login(auth_client, key)
    assert auth_client.get("/ui/").status_code == 200
    revoke_key(db_session, row.prefix)
    assert auth_client.get("/ui/").status_code == 401


def test_sessions_expire(auth_client: TestClient, db_session: Session) -> None:
    from datetime import timedelta

    from app.db.base import utcnow
    from app.db.models import BrowserSession

    _, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    _login(auth_client, key)
    assert auth_client.get("/ui/").status_code == 200
    for row in db_session.query(BrowserSession).all():
        row.expires_at = utcnow() - timedelta(seconds=1)
    db_session.flush()
    assert auth_client.get("/ui/").status_code == 401


def test_rotating_the_key_ends_its_sessions(auth_client: TestClient, db_session: Session) -> None:
    """Issue 39: a browser signed in with a key's secret is signed out when the key is rotated
    (even inside the rotation's grace); signing in with the new secret works."""
    from datetime import timedelta

    from app.services.access.keys import rotate_key

    row, key = create_key(db_session, "ui-rotated", ["read"])
    db_session.flush()
    _login(auth_client, key)
    assert auth_client.get("/ui/").status_code == 200
    _, new = rotate_key(db_session, row.prefix, grace=timedelta(hours=1))
    assert auth_client.get("/ui/").status_code == 401
    auth_client.cookies.clear()
    _login(auth_client, new)
    assert auth_client.get("/ui/").status_code == 200


def test_no_open_redirect(auth_client: TestClient, db_session: Session) -> None:
    _, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    token = _csrf(auth_client.get("/ui/login").text)
    for target in ("//evil.example/", "https://evil.example/", "/v1/keys", "/ui/\\evil"):
        r = auth_client.post("/ui/login", data={"key": key, "csrf": token, "next": target})
        assert r.status_code == 303 and r.headers["location"] == "/ui/", target


def test_pages_are_open_without_auth(client: TestClient) -> None:
    assert client.get("/ui/").status_code == 200
    r = client.get("/ui/login", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"


def test_cookies_are_secure_over_https(settings: Settings, db_session: Session) -> None:
    app = create_app(settings.model_copy(update={"auth_enabled": True}))
    app.dependency_overrides[open_session] = lambda: db_session
    _, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    try:
        with TestClient(app, base_url="https://testserver", follow_redirects=False) as c:
            r = c.get("/ui/login")
            assert "Secure" in r.headers["set-cookie"]
            r = c.post("/ui/login", data={"key": key, "csrf": _csrf(r.text), "next": "/ui/"})
            assert r.status_code == 303 and "Secure" in r.headers["set-cookie"]
    finally:
        app.state.celery.close()
        app.state.engine.dispose()
