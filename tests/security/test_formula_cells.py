"""Spreadsheet formula injection: every CSV and Markdown export writes text cells that begin
with =, +, -, @, TAB or CR with a leading ' (numbers stay numbers)."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.platform.spreadsheet import FORMULA_STARTS, safe_cell, safe_text

FORMULAS = ["=HYPERLINK(1)", "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR"]


def test_safe_cell_rules() -> None:
    for text in FORMULAS:
        assert safe_text(text) == "'" + text
    assert safe_text("plain=text") == "plain=text" and safe_text("") == ""
    assert safe_cell(-0.25) == -0.25 and safe_cell(-3) == -3 and safe_cell(True) is True
    assert set(FORMULA_STARTS) == {"=", "+", "-", "@", "\t", "\r"}


@pytest.fixture
def hostile(client: TestClient) -> str:
    """A benchmark whose item ids, subtasks and model names all begin like formulas."""
    items = [{"id": f"{f}item{i}", "subtask": f"{f}sub"} for i, f in enumerate(FORMULAS * 3)]
    r = client.post("/v1/benchmarks", json={"name": "formulas", "items": items})
    assert r.status_code == 201, r.text
    bid = r.json()["id"]
    for k, f in enumerate(FORMULAS[:4]):  # a name with TAB or CR is refused outright
        results = {it["id"]: (k + j) % 2 for j, it in enumerate(items)}
        r = client.post(
            f"/v1/benchmarks/{bid}/results", json={"model": f"{f}model{k}", "results": results}
        )
        assert r.status_code == 201, r.text
    return bid


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def _no_formula(cells: list[str]) -> None:
    for cell in cells:
        if cell and cell[0] in FORMULA_STARTS:
            float(cell)  # only a number may begin with "-" (or "+")


def test_leaderboard_and_pairs_csv(client: TestClient, hostile: str) -> None:
    for path, name_columns in (
        ("leaderboard", ["model"]),
        ("leaderboard/pairs", ["model_a", "model_b"]),
    ):
        r = client.get(f"/v1/benchmarks/{hostile}/{path}", params={"format": "csv"})
        assert r.status_code == 200, r.text
        rows = _cells(r.text)
        header, body = rows[0], rows[1:]
        assert body
        for row in body:
            _no_formula(row)
            for col in name_columns:
                assert row[header.index(col)].startswith("'"), row
        if path == "leaderboard/pairs":  # numbers stay numbers, negative ones too
            lows = [row[header.index("ci_low")] for row in body]
            assert any(cell.startswith("-") for cell in lows) and min(map(float, lows)) < 0


def test_leaderboard_and_pairs_markdown(client: TestClient, hostile: str) -> None:
    for path in ("leaderboard", "leaderboard/pairs"):
        r = client.get(f"/v1/benchmarks/{hostile}/{path}", params={"format": "markdown"})
        assert r.status_code == 200, r.text
        table = [line for line in r.text.splitlines() if line.startswith("| ")][2:]
        assert table
        for line in table:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            _no_formula(cells)
            assert any(c.startswith("'") and "model" in c for c in cells), line


def test_subset_csv_api_and_page(client: TestClient, hostile: str, db_session: Session) -> None:
    from app.services.selection import subsets as subset_service

    req = subset_service.resolve_request(db_session, uuid.UUID(hostile), "random", 6, {}, 3, None)
    subset, _ = subset_service.build_subset(db_session, req, None)
    sid = subset.id
    for url in (f"/v1/subsets/{sid}?format=csv", f"/ui/subsets/{sid}/download/csv"):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text)
        rows = _cells(r.text)
        header, body = rows[0], rows[1:]
        assert len(body) == 6
        for row in body:
            _no_formula(row)
            assert row[header.index("item_id")].startswith("'")
            assert row[header.index("subtask")].startswith("'")
            int(row[header.index("doc_id")])
            float(row[header.index("weight")])
