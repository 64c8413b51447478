"""The gate page (issue 34): the outcome first, then per benchmark the difference, its one-sided
bound against the margin, the state and the items, as the API answers them (real GPQA slices
stored in Postgres; the browser checks at 1280 and 360 px are in test_browser.py)."""

from __future__ import annotations

import html
import re
import uuid

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app import formatting as fmt
from tests.api._subset_data import seed_gpqa


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_gate_page_shows_the_outcome_first_and_each_benchmark(
    client: TestClient, db_session: Session
) -> None:
    suite = [seed_gpqa(db_session, n_models=6, name=f"gpqa-page-{k}") for k in range(2)]
    db_session.commit()
    acc = suite[0].correct.mean(axis=1)
    worst, best = int(np.argmin(acc)), int(np.argmax(acc))
    body = {"model": suite[0].names[worst], "baseline": suite[0].names[best], "margin": 0.02,
            "batch_size": 30, "seed": 2,
            "benchmarks": [{"benchmark": str(s.version_id)} for s in suite]}  # fmt: skip
    gate = client.post("/v1/gates", json=body).json()
    open_page = _text(client.get(f"/ui/gates/{gate['id']}").text)
    assert "Outcome: OPEN" in open_page and "Round 1 is open" in open_page
    truth = [dict(zip(s.item_ids, s.correct[worst].tolist(), strict=True)) for s in suite]
    names = [b["benchmark"] for b in gate["benchmarks"]]
    while gate["state"] == "open":
        rnd = gate["next_round"]
        results = [{"benchmark": k, "item_ids": [it["item_id"] for it in items],
                    "correct": [float(truth[names.index(k)][it["item_id"]]) for it in items]}
                   for k, items in rnd["items"].items()]  # fmt: skip
        gate = client.post(f"/v1/gates/{gate['id']}/results",
                           json={"round": rnd["round"], "results": results}).json()  # fmt: skip
    assert gate["outcome"] == "fail"
    r = client.get(f"/ui/gates/{gate['id']}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    text = _text(r.text)
    assert "Outcome: FAIL" in text
    assert r.text.index('id="outcome"') < r.text.index('class="gate"')  # the outcome first
    assert f"regressed by more than the margin on {', '.join(gate['regressed'])}" in text
    for b in gate["benchmarks"]:
        row = f"{b['benchmark']} {b['state']} {fmt.pts(b['delta'], signed=True)}"
        assert row in text, row
        assert f"{fmt.count(b['items'])} of {fmt.count(b['n_items'])}" in text
        assert fmt.pts(b["bound"], signed=True) in text
    assert len(re.findall(r'<tr><td class="num">\d+</td>', r.text)) == gate["round"]
    assert client.get(f"/ui/gates/{uuid.uuid4()}").status_code == 404
    assert client.get("/ui/gates/zzz").status_code == 404
