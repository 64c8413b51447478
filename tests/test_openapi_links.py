"""The spec's OpenAPI links resolve: every source response, target operation and parameter
exists, and the committed document carries them (links are walked against a live service in
tests/fuzz/test_schemathesis.py)."""

from __future__ import annotations

import json
from pathlib import Path

from app.api.openapi_links import add_links, link_problems, links
from app.main import create_app

SPEC = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


def test_every_link_resolves_in_the_app_spec() -> None:
    spec = create_app().openapi()
    assert link_problems(spec) == []
    n = sum(len(named) for named in links().values())
    found = sum(
        len(r.get("links", {}))
        for path in spec["paths"].values()
        for op in path.values()
        for r in op["responses"].values()
    )
    assert found == n > 40


def test_a_dead_link_is_reported_and_left_out() -> None:
    spec = json.loads(SPEC.read_text())
    del spec["paths"]["/v1/sessions/{session_id}"]  # the target of GetSession links
    problems = link_problems(spec)
    assert any("no operation 'sessions-get_session'" in p for p in problems), problems
    for path in spec["paths"].values():
        for op in path.values():
            for r in op["responses"].values():
                r.pop("links", None)
    add_links(spec)
    created = spec["paths"]["/v1/benchmarks/{benchmark}/sessions"]["post"]["responses"]["201"]
    assert "GetSession" not in created["links"] and "PostDefaultBatch" in created["links"]


def test_session_links_carry_a_complete_batch() -> None:
    named = links()[("sessions-create_session", "201")]
    body = named["PostDefaultBatch"]["requestBody"]
    assert body["model"] == "$response.body#/model"
    keys = list(body["results"])
    assert keys == [f"$response.body#/next_items/{i}/item_id" for i in range(10)]
    assert len(named["PostOneItemBatch"]["requestBody"]["results"]) == 1
