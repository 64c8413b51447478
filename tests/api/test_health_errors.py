"""problem+json rendering for every kind of error."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.testclient import TestClient

from app.errors import Conflict
from app.main import create_app
from app.settings import Settings


def _app_with_failing_routes(settings: Settings) -> TestClient:
    app = create_app(settings)
    router = APIRouter()

    @router.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret connection string postgres://user:pw@host")

    @router.get("/conflict")
    def conflict() -> None:
        raise Conflict("already there")

    app.include_router(router)
    return TestClient(app, raise_server_exceptions=False)


def test_unhandled_error_is_a_500_problem_that_leaks_nothing(settings: Settings) -> None:
    with _app_with_failing_routes(settings) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == 500 and body["title"] == "Internal Server Error"
    assert "secret" not in response.text and "RuntimeError" not in response.text


def test_domain_error_is_rendered_with_its_status(settings: Settings) -> None:
    with _app_with_failing_routes(settings) as client:
        response = client.get("/conflict")
    assert response.status_code == 409
    assert response.json()["detail"] == "already there"
    assert response.json()["type"].endswith("/conflict")


def test_unknown_route_is_a_404_problem(client: TestClient) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == 404


def test_wrong_method_is_a_405_problem(client: TestClient) -> None:
    response = client.delete("/healthz")
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/problem+json"


def test_declared_body_over_the_limit_is_a_413_problem(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"max_body_bytes": 100}))
    with TestClient(app) as client:
        too_big = client.post(
            "/v1/jobs", content=b"x" * 101, headers={"content-type": "application/json"}
        )
        small = client.post("/v1/jobs", content=b"{}", headers={"content-type": "application/json"})
    assert too_big.status_code == 413
    assert too_big.headers["content-type"] == "application/problem+json"
    assert "100 bytes" in too_big.json()["detail"]
    assert small.status_code == 422  # reached the route: the limit only stops oversized bodies
