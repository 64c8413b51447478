"""Issue 16.4 for the pages: every /ui response sends the security headers, and an API key used
to sign in never shows up in a page or in the log output.

With auth on, a read key signs in through the login form (CSRF token from the form), then every
page is fetched - each page kind with real data, its 4xx variants, the login form, static
files, a download - and each body and the whole captured log (every logger at DEBUG, SQL
included) is searched for the key and for its secret part.
"""

from __future__ import annotations

import logging
import re
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.access.keys import create_key
from tests.web.conftest import Seen

CSP_PARTS = ("default-src 'self'", "frame-ancestors 'none'", "object-src 'none'")


def _headers_ok(r, where: str) -> None:
    csp = r.headers.get("content-security-policy", "")
    for part in CSP_PARTS:
        assert part in csp, (where, csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, where
    assert r.headers.get("x-content-type-options") == "nosniff", where
    assert r.headers.get("referrer-policy") in ("same-origin", "no-referrer", "strict-origin"), (
        where
    )
    assert r.headers.get("x-frame-options") == "DENY", where


def _pages(seen: Seen, names: list[str], name: str) -> list[tuple[str, int]]:
    ref = seen.ref
    return [
        ("/ui/", 200),
        (f"/ui/benchmarks/{ref}", 200),
        (f"/ui/benchmarks/{name}", 200),
        (f"/ui/benchmarks/{name}@v1?q=model&sort=accuracy&all=1", 200),
        (f"/ui/benchmarks/{ref}/pair", 200),
        (f"/ui/benchmarks/{ref}/pair?model_a={names[0]}&model_b={names[1]}", 200),
        (f"/ui/benchmarks/{ref}/pair?model_a={names[0]}&model_b={names[1]}&size=20", 200),
        (f"/ui/analyses/{seen.analysis_id}", 200),
        (f"/ui/analyses/{seen.analysis_id}?n=25", 200),
        (f"/ui/subsets/{seen.subset_id}", 200),
        (f"/ui/subsets/{seen.subset_id}/download/csv", 200),
        (f"/ui/subsets/{seen.subset_id}/download/json", 200),
        (f"/ui/sessions/{seen.session_id}", 200),
        ("/ui/static/style.css", 200),
        ("/ui/login", 200),
        # the 4xx pages
        ("/ui/benchmarks/no-such-benchmark", 404),
        (f"/ui/benchmarks/{name}@v9", 404),
        (f"/ui/benchmarks/{ref}?sort=bogus", 422),
        (f"/ui/benchmarks/{ref}/pair?model_a={names[0]}&model_b={names[0]}", 422),
        (f"/ui/analyses/{uuid.uuid4()}", 404),
        ("/ui/analyses/not-an-id", 404),
        (f"/ui/analyses/{seen.analysis_id}?n=abc", 422),
        (f"/ui/subsets/{'0' * 64}", 404),
        (f"/ui/subsets/{seen.subset_id}/download/exe", 422),
        (f"/ui/sessions/{uuid.uuid4()}", 404),
        ("/ui/benchmarks/", 404),  # no such route: still an HTML page
        ("/ui/nowhere", 404),
    ]


def test_every_page_sends_the_security_headers_and_never_shows_the_key(
    auth_client: TestClient,
    client: TestClient,
    db_session: Session,
    seen: Seen,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, SQL included
    _, key = create_key(db_session, "ui-reader", ["read"])
    db_session.flush()
    secret = key.split("_", 2)[2]
    assert len(secret) >= 20

    # sign in through the form
    r = auth_client.get("/ui/login")
    _headers_ok(r, "/ui/login")
    token = re.search(r'name="csrf" value="([^"]+)"', r.text)
    assert token is not None
    # a wrong key first: refused, and not echoed either
    wrong = "bsk_" + secret[:8] + "_" + secret[::-1]
    r = auth_client.post("/ui/login", data={"key": wrong, "csrf": token.group(1), "next": "/ui/"})
    assert r.status_code == 401 and wrong not in r.text and secret[::-1] not in r.text
    _headers_ok(r, "POST /ui/login (wrong key)")
    r = auth_client.post("/ui/login", data={"key": key, "csrf": token.group(1), "next": "/ui/"})
    assert r.status_code == 303, r.text
    _headers_ok(r, "POST /ui/login")
    assert (
        "benchslice_session=" in r.headers["set-cookie"] and "HttpOnly" in r.headers["set-cookie"]
    )
    assert key not in r.headers["set-cookie"]
    assert key not in r.text

    name = client.get(f"/v1/benchmarks/{seen.ref}").json()["name"]
    names = seen.seeded.names
    pages = _pages(seen, names, name)
    for path, status in pages:
        r = auth_client.get(path)
        assert r.status_code == status, (path, r.status_code, r.text[:500])
        _headers_ok(r, path)
        if not path.startswith("/ui/static/") and "/download/" not in path:
            assert r.headers["content-type"].startswith("text/html"), path
            assert r.headers.get("cache-control") == "no-store", path
            assert "Sign out" in r.text or path == "/ui/login" or status >= 400, path
        assert key not in r.text and secret not in r.text, path
        assert secret not in str(r.headers), path  # no header echoes the cookie back

    # sign out (CSRF-checked), then a page is a 401 login form, with the headers
    page = auth_client.get("/ui/").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    r = auth_client.post("/ui/logout", data={"csrf": csrf.group(1)})
    assert r.status_code == 303
    _headers_ok(r, "POST /ui/logout")
    r = auth_client.get(f"/ui/benchmarks/{seen.ref}")
    assert r.status_code == 401 and 'action="/ui/login"' in r.text
    _headers_ok(r, "401")
    assert key not in r.text and secret not in r.text

    # the whole log output of all of the above
    assert caplog.records, "nothing was logged: the capture is not working"
    logged = caplog.text + "\n".join(str(rec.args) for rec in caplog.records)
    assert key not in logged and secret not in logged
