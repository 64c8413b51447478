"""Pages of ``/leaderboard/pairs`` on real Postgres: cursors, filters, bounded pages."""

from __future__ import annotations

import csv
import io
import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.core.ranking.leaderboard import leaderboard as core_leaderboard
from app.ingest import parse_columnar
from app.schemas.leaderboards import LeaderboardPairsPublic
from app.schemas.results import ModelCreate
from app.services.catalog.benchmarks import create_version
from app.services.catalog.results import store_results
from app.services.ranking.pair_pages import DEFAULT_PAIRS_PAGE, MAX_PAIRS_PAGE
from tests.api._subset_data import Seeded, seed_gpqa

N_MODELS = 30


@pytest.fixture
def seeded(db_session: Session) -> Seeded:
    seeded = seed_gpqa(db_session, n_models=N_MODELS)
    db_session.commit()
    return seeded


def _url(ref: object) -> str:
    return f"/v1/benchmarks/{ref}/leaderboard/pairs"


def _all_pages(client: TestClient, ref: object, **params) -> tuple[list[dict], int]:
    pairs, pages, cursor = [], 0, None
    while True:
        r = client.get(_url(ref), params=params | ({"cursor": cursor} if cursor else {}))
        assert r.status_code == 200, r.text
        body = r.json()
        assert LeaderboardPairsPublic.model_validate(body).model_dump(mode="json") == body
        assert len(body["pairs"]) <= params.get("limit", DEFAULT_PAIRS_PAGE)
        assert r.headers.get("Next-Cursor") == body["next_cursor"]
        pairs += body["pairs"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return pairs, pages


def _key(p: dict) -> tuple[str, str]:
    return p["model_a"], p["model_b"]


def test_pages_concatenate_to_the_whole_table(client: TestClient, seeded: Seeded) -> None:
    whole = client.get(_url(seeded.version_id)).json()  # 435 pairs: one default page
    m = N_MODELS
    assert whole["n_pairs"] == len(whole["pairs"]) == m * (m - 1) // 2
    assert whole["next_cursor"] is None
    paged, pages = _all_pages(client, seeded.version_id, limit=61)
    assert pages == -(-whole["n_pairs"] // 61)
    assert paged == whole["pairs"]
    # leaderboard order: by model_a's position, then model_b's
    board = client.get(f"/v1/benchmarks/{seeded.version_id}/leaderboard").json()["rows"]
    pos = {r["model"]: i for i, r in enumerate(board)}
    keys = [(pos[p["model_a"]], pos[p["model_b"]]) for p in paged]
    assert keys == sorted(keys) and all(a < b for a, b in keys)
    # the engine's numbers for a few pairs
    engine = core_leaderboard(seeded.correct)
    idx = {n: i for i, n in enumerate(seeded.names)}
    for p in paged[::37]:
        a, b = idx[p["model_a"]], idx[p["model_b"]]
        lo, hi = min(a, b), max(a, b)
        rec = engine.table.pairs(np.array([lo]), np.array([hi]))
        sign = 1.0 if a < b else -1.0
        assert p["difference"] == pytest.approx(sign * rec.difference[0], abs=1e-15)
        assert p["p_adjusted"] == rec.p_adjusted[0] and p["significant"] == rec.significant[0]


def test_filters(client: TestClient, seeded: Seeded) -> None:
    whole = client.get(_url(seeded.version_id)).json()
    sig, pages = _all_pages(client, seeded.version_id, significant=True, limit=7)
    assert sig == [p for p in whole["pairs"] if p["significant"]]
    assert len(sig) == whole["n_significant"] > 0 and pages >= len(sig) // 7
    non, _ = _all_pages(client, seeded.version_id, significant=False, limit=50)
    assert non == [p for p in whole["pairs"] if not p["significant"]]
    rows = client.get(f"/v1/benchmarks/{seeded.version_id}/leaderboard").json()["rows"]
    tier = {r["model"]: r["tier"] for r in rows}
    for t in sorted(set(tier.values())):
        got, _ = _all_pages(client, seeded.version_id, tier=t, limit=9)
        want = [p for p in whole["pairs"] if tier[p["model_a"]] == tier[p["model_b"]] == t]
        assert got == want
        both, _ = _all_pages(client, seeded.version_id, tier=t, significant=True, limit=4)
        assert both == [p for p in want if p["significant"]]
    # with the leaderboard's own selection
    top, _ = _all_pages(client, seeded.version_id, top=6, limit=4)
    assert len(top) == 15


def test_csv_pages_and_cursor_errors(client: TestClient, seeded: Seeded) -> None:
    r = client.get(_url(seeded.version_id), params={"format": "csv", "limit": 100})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert len(list(csv.DictReader(io.StringIO(r.text)))) == 100
    cursor = r.headers["Next-Cursor"]
    nxt = client.get(_url(seeded.version_id), params={"cursor": cursor, "limit": 100}).json()
    whole = client.get(_url(seeded.version_id)).json()["pairs"]
    assert nxt["pairs"] == whole[100:200]
    # a cursor of another selection, garbage, too large a page: 422 naming the field
    for params, field in (
        ({"cursor": cursor, "top": 5}, "cursor"),
        ({"cursor": cursor, "significant": True}, "cursor"),
        ({"cursor": "bm90LWEtY3Vyc29y"}, "cursor"),
        ({"cursor": "%%%"}, "cursor"),
        ({"limit": MAX_PAIRS_PAGE + 1}, "limit"),
        ({"tier": 0}, "tier"),
    ):
        bad = client.get(_url(seeded.version_id), params=params)
        assert bad.status_code == 422, (params, bad.text)
        assert bad.headers["content-type"].startswith("application/problem+json")
        fields = {e["loc"][-1] for e in bad.json().get("errors", [])}
        assert field in fields, (params, bad.json())


def test_unfiltered_pairs_of_a_large_population_are_one_bounded_page(
    client: TestClient, db_session: Session
) -> None:
    """400 SYNTHETIC models: 79,800 pairs; the unfiltered request returns one page."""
    rng = np.random.default_rng(27)
    m, n = 400, 12
    skill = rng.uniform(-2, 2, m)[:, None]
    correct = (rng.random((m, n)) < 1 / (1 + np.exp(-skill))).astype(np.uint8)
    version, _ = create_version(
        db_session, f"big-{uuid.uuid4().hex[:8]}", list(map(str, range(n))), [None] * n
    )
    for i in range(m):
        store_results(
            db_session,
            version.id,
            ModelCreate(name=f"model-{i:04d}"),
            parse_columnar(correct[i].tolist()),
        )
    db_session.commit()
    r = client.get(_url(version.id))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["n_pairs"] == m * (m - 1) // 2
    assert len(body["pairs"]) == DEFAULT_PAIRS_PAGE and body["next_cursor"]
    assert len(r.content) < 400 * DEFAULT_PAIRS_PAGE  # bytes: ~300 per pair
    last = client.get(_url(version.id), params={"limit": MAX_PAIRS_PAGE, "cursor": "x"})
    assert last.status_code == 422
