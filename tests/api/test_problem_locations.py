"""errors[].loc of a domain error: services name the field, the HTTP layer finds where it is."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.testclient import TestClient
from pydantic import BaseModel

from app.errors import FieldIssue, InvalidInput
from app.main import create_app
from app.settings import Settings


class Body(BaseModel):
    size: int = 0
    items: list[str] = []


def _client(settings: Settings) -> TestClient:
    app = create_app(settings)
    router = APIRouter()

    @router.post("/things/{thing_id}")
    def post_thing(
        thing_id: str,
        body: Body,
        model: Annotated[str | None, Query()] = None,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    ) -> None:
        raise InvalidInput(
            "bad",
            errors=[
                FieldIssue(("thing_id",), "path parameter"),
                FieldIssue(("model",), "query parameter"),
                FieldIssue(("idempotency-key",), "header, any case"),
                FieldIssue(("size",), "body field"),
                FieldIssue(("items", 2), "body path"),
                FieldIssue(("model", "name"), "a body field shadowing ?model=", "body"),
                FieldIssue(("format",), "an option no route declares", "query"),
                FieldIssue((), "the whole body"),
                FieldIssue((3, "x"), "no name first"),
            ],
        )

    @router.get("/one")
    def one(size: int = 1) -> None:
        raise InvalidInput("too big", field="size", message="at most 0")

    app.include_router(router)
    return TestClient(app)


def test_locations_come_from_the_route_declaration(settings: Settings) -> None:
    with _client(settings) as client:
        r = client.post("/things/t1?model=m", json={"size": 1, "items": []})
    assert r.status_code == 422
    assert [(e["loc"], e["field"]) for e in r.json()["errors"]] == [
        (["path", "thing_id"], "path.thing_id"),
        (["query", "model"], "query.model"),
        (["header", "idempotency-key"], "header.idempotency-key"),
        (["body", "size"], "body.size"),
        (["body", "items", 2], "body.items.2"),
        (["body", "model", "name"], "body.model.name"),
        (["query", "format"], "query.format"),
        (["body"], "body"),
        (["body", 3, "x"], "body.3.x"),
    ]


def test_one_field_shorthand(settings: Settings) -> None:
    with _client(settings) as client:
        r = client.get("/one?size=5")
    assert r.status_code == 422
    assert r.json()["detail"] == "too big"
    assert r.json()["errors"] == [
        {"loc": ["query", "size"], "field": "query.size", "message": "at most 0"}
    ]
