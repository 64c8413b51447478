"""Errors no page handles itself are HTML under /ui (status, title, headers kept) and stay
problem+json under the API: a bug (500), the database unavailable (503), a routing error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from app.web import pages


def _html(r, status: int) -> str:
    assert r.status_code == status, r.text[:500]
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    return r.text


def test_a_bug_on_a_page_is_an_html_500(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_session):
        raise RuntimeError("planted bug in benchmarks_overview")

    monkeypatch.setattr(pages, "benchmarks_overview", broken)
    text = _html(client.get("/ui/"), 500)
    assert "Internal Server Error" in text
    assert "an unexpected error occurred; it has been logged" in text
    assert "planted bug" not in text  # no internals on the page
    assert any("unhandled error on GET /ui/" in r.getMessage() for r in caplog.records)


def test_database_unavailable_on_a_page_is_an_html_503_with_retry_after(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(_session, *_args):
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    monkeypatch.setattr(pages, "benchmarks_overview", down)
    text = _html(client.get("/ui/"), 503)
    assert "the database is unavailable or busy; retry later" in text
    assert client.get("/ui/").headers["retry-after"] == "5"


def test_api_errors_stay_problem_json(client: TestClient) -> None:
    r = client.get("/v1/no-such-route")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    r = client.get("/ui/no-such-page")
    assert _html(r, 404)
    r = client.post("/ui/")
    assert r.status_code == 405 and r.headers["content-type"].startswith("text/html")
    assert "GET" in r.headers["allow"]
