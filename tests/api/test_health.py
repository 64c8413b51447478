from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["saturated"] is False
    assert body["in_flight"] == 0 and body["max_in_flight"] >= 0


def test_readyz_with_real_database_and_broker(client: TestClient, redis_isolation: str) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"] == {
        "database": {"ok": True, "detail": None},
        "broker": {"ok": True, "detail": None},
    }


def test_readyz_is_503_problem_when_dependencies_are_down(settings: Settings) -> None:
    broken = settings.model_copy(
        update={
            "database_url": "postgresql+psycopg://postgres@127.0.0.1:1/nothing",
            "broker_url": "redis://127.0.0.1:1/0",
            "broker_publish_timeout": 0.5,
        }
    )
    app = create_app(broken)
    with TestClient(app) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "5"
    body: dict[str, Any] = response.json()
    assert body["status"] == 503 and body["title"] == "Not ready"
    assert "database" in body["detail"] and "broker" in body["detail"]
    assert body["instance"] == "/readyz"


def test_readyz_on_the_embedded_default(tmp_path: Any) -> None:
    from app.db.migrate import upgrade

    local = Settings(
        database_url=f"sqlite:///{tmp_path}/db.sqlite3",
        broker_url=f"sqla+sqlite:///{tmp_path}/broker.sqlite3",
    )
    upgrade(local.database_url)
    with TestClient(create_app(local)) as client:
        response = client.get("/readyz")
    assert response.status_code == 200, response.text
