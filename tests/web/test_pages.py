"""The browser view's pages over the test Postgres: status, content, headers, the 4xx pages.

Numbers on the pages are checked against independent oracles: the exact P(same order) of a
random subset by brute force over the multivariate hypergeometric law (scipy), accuracies from
the seeded matrix, the MDAD table against the API's JSON.
"""

from __future__ import annotations

import html
import re
import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.stats import multivariate_hypergeom

from tests.web.conftest import Seen, far_pair

SECURITY = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def _ok(r, status: int = 200) -> str:
    assert r.status_code == status, r.text[:2000]
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    for k, v in SECURITY.items():
        assert r.headers[k] == v
    assert r.headers["cache-control"] == "no-store"
    assert re.fullmatch(r"app;dur=[0-9.]+", r.headers["server-timing"])
    text = r.text
    # nothing inline that the CSP would block
    assert "<script" not in text and "<style" not in text and " style=" not in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "duplicate element ids"
    return text


def _models(page: str) -> list[str]:
    """Model names in the models table (not the flagged items')."""
    section = page.split('id="models"')[1].split("</section>")[0]
    return re.findall(r'<td class="name">([^<]*)</td>', section)


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_index_lists_the_benchmark(client: TestClient, seen: Seen) -> None:
    page = _ok(client.get("/ui/"))
    name = client.get(f"/v1/benchmarks/{seen.ref}").json()["name"]
    assert f'href="/ui/benchmarks/{name}"' in page
    row = page[page.index(f'href="/ui/benchmarks/{name}"') :].split("</tr>")[0]
    cells = [c.strip() for c in re.findall(r'<td class="num">([^<]*)</td>', row)]
    assert cells == ["v1", "1", "448", "2", "30"]  # version, versions, items, subtasks, models
    assert f"/ui/analyses/{seen.analysis_id}" in row


def test_benchmark_page(client: TestClient, seen: Seen) -> None:
    s = seen.seeded
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}"))
    text = _text(page)
    assert "Accuracy distribution" in text and 'class="plot"' in page
    assert "30 of 30 models match" in text
    # every model with its accuracy (independent: the seeded matrix)
    for name, row in zip(s.names, s.correct, strict=True):
        assert name in text
        assert f"{100 * row.mean():.1f}%" in text
    board = client.get(f"/v1/benchmarks/{seen.ref}/leaderboard").json()
    assert f"{board['n_tiers']} tier" in text
    top = board["rows"][0]
    assert f"{top['rank_low']}-{top['rank_high']}" in text
    # item health: constant items exist in a 30-model slice and are listed
    correct = s.correct
    constant = int(np.all(correct == correct[:1], axis=0).sum())
    assert f"constant {constant}" in text
    assert f"/ui/analyses/{seen.analysis_id}" in page
    assert f"/ui/subsets/{seen.subset_id}" in page
    assert f"/ui/sessions/{seen.session_id}" in page


def test_benchmark_models_search_and_sort(client: TestClient, seen: Seen) -> None:
    names = seen.seeded.names
    q = names[3][:4]  # "m003"
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}", params={"q": q}))
    assert _models(page) == [n for n in names if q.lower() in n.lower()]
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}", params={"sort": "-name"}))
    assert _models(page) == sorted(names, reverse=True)
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}", params={"sort": "accuracy"}))
    section = page.split('id="models"')[1].split("</section>")[0]
    acc = [float(a) for a in re.findall(r'<td class="num">([0-9.]+)%</td>', section)[::2]]
    assert acc == sorted(acc, reverse=True) and len(acc) == 30
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}", params={"q": "m00*"}))
    assert len(_models(page)) == 10


def test_benchmark_bad_params_and_refs(client: TestClient, seen: Seen) -> None:
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}", params={"sort": "bogus"}), 422)
    assert "unknown sort key" in page
    page = _ok(client.get("/ui/benchmarks/no-such-benchmark"), 404)
    assert "no benchmark named" in page
    page = _ok(client.get(f"/ui/benchmarks/{uuid.uuid4()}"), 404)
    name = client.get(f"/v1/benchmarks/{seen.ref}").json()["name"]
    for ref in (name, f"{name}@v1"):
        _ok(client.get(f"/ui/benchmarks/{ref}"))
    _ok(client.get(f"/ui/benchmarks/{name}@v9"), 404)


def _exact_p_same(a: np.ndarray, b: np.ndarray, n: int) -> float:
    """P(a random n-subset orders a, b as the full benchmark), brute force over the
    multivariate hypergeometric counts of (a-only, b-only, other) items."""
    n10 = int(np.sum((a == 1) & (b == 0)))
    n01 = int(np.sum((a == 0) & (b == 1)))
    rest = a.size - n10 - n01
    sign = np.sign(a.mean() - b.mean())
    law = multivariate_hypergeom(m=[n10, n01, rest], n=n)
    total = 0.0
    for k10 in range(min(n10, n) + 1):
        for k01 in range(min(n01, n - k10) + 1):
            if np.sign(k10 - k01) == sign:
                total += law.pmf([k10, k01, n - k10 - k01])
    return total


def test_pair_verdict_matches_brute_force(client: TestClient, seen: Seen) -> None:
    s = seen.seeded
    acc = s.correct.mean(axis=1)
    order = np.argsort(acc)
    a, b = int(order[15]), int(order[16])  # a close pair
    size = 25
    url = f"/ui/benchmarks/{seen.ref}/pair"
    page = _ok(client.get(url, params={"model_a": s.names[a], "model_b": s.names[b], "size": size}))
    p = _exact_p_same(s.correct[a], s.correct[b], size)
    shown = re.search(r'id="p-same">([0-9.]+)<', page)
    assert shown is not None and float(shown.group(1)) == pytest.approx(p, abs=0.005)
    text = _text(page)
    assert f"P = {p:.2f}" in text
    api = client.get(
        f"/v1/benchmarks/{seen.ref}/verdict",
        params={"model_a": s.names[a], "model_b": s.names[b], "size": size},
    ).json()
    words = "DISTINGUISHABLE" if api["distinguishable"] else "NOT distinguishable"
    assert f"{words}: {s.names[a]} ({100 * acc[a]:.1f}%)" in text
    # the three answers in order, as the API words them (full benchmark, subset, next step)
    listed = re.findall(r"<li>(.*?)</li>", page.split('id="answers"')[1].split("</ol>")[0])
    assert [html.unescape(x) for x in listed] == api["answers"]
    assert api["answers"][0].startswith("Full benchmark (448 items)")
    assert "needs about" not in text and "DECIDABLE" not in text
    assert 'data-series="pair"' in page and 'data-series="curve"' in page
    # the empty form
    page = _ok(client.get(url))
    assert "Ask the verdict" in page and "p-same" not in page


@pytest.mark.parametrize(
    ("params", "status", "message"),
    [
        ({"model_a": "nobody/none", "model_b": 1}, 404, "has no results on this benchmark"),
        ({"model_a": 0, "model_b": 1, "size": 0}, 422, "out of range"),
        ({"model_a": 0, "model_b": 1, "size": 449}, 422, "out of range"),
        ({"model_a": 0, "model_b": 1, "size": "ten"}, 422, "not a whole number"),
        ({"model_a": 0, "model_b": 0}, 422, "must differ"),
        ({"model_a": 0}, 422, "choose both models"),
        ({"model_a": 0, "model_b": 1, "method": "magic"}, 422, "unknown method"),
    ],
)
def test_pair_bad_params_are_4xx_pages(
    client: TestClient, seen: Seen, params: dict, status: int, message: str
) -> None:
    names = seen.seeded.names
    query = {
        k: names[v] if k.startswith("model") and isinstance(v, int) else v
        for k, v in params.items()
    }
    page = _ok(client.get(f"/ui/benchmarks/{seen.ref}/pair", params=query), status)
    assert message in _text(page)
    assert "Ask the verdict" in page  # the form is still there to fix the mistake


def test_pair_method_list_offers_what_can_answer(client: TestClient, seen: Seen) -> None:
    """Was: all six selectors, five of which answered 409 with a raw API recipe."""
    url = f"/ui/benchmarks/{seen.ref}/pair"
    page = _ok(client.get(url))
    select = page.split('<select id="method"')[1].split("</select>")[0]
    assert re.findall(r'<option value="([^"]+)"', select) == ["random", "subtask_stratified"]
    note = _text(page.split('id="method-note"')[1].split("</p>")[0])
    assert "anchor_points, confidence_stratified, dpp, tiny_benchmarks" in note
    assert "benchslice analyze --benchmark " in note
    names = seen.seeded.names
    page = _ok(
        client.get(url, params={"model_a": names[0], "model_b": names[1], "method": "dpp"}), 409
    )
    text = _text(page)
    assert "benchslice analyze --benchmark " in text and "--methods dpp" in text
    assert '{"methods"' not in text


def test_analysis_page(client: TestClient, seen: Seen) -> None:
    page = _ok(client.get(f"/ui/analyses/{seen.analysis_id}"))
    api = client.get(f"/v1/analyses/{seen.analysis_id}").json()
    mdad, agreement = (
        page.split(f'id="{fig}"')[1].split("</figure>")[0]
        for fig in ("mdad-plot", "agreement-plot")
    )
    for svg in (mdad, agreement):
        series = re.findall(r'data-series="([^"]+)"', svg)
        assert series == ["random", "subtask_stratified"]  # one line per method
        ids = set(re.findall(r'\bid="([^"]+)"', svg))
        refs = set(re.findall(r'href="#([^"]+)"', svg)) | set(re.findall(r"url\(#([^)]+)\)", svg))
        assert refs <= ids  # prefixed ids still resolve inside each figure
    assert not set(re.findall(r'\bid="([^"]+)"', mdad)) & set(
        re.findall(r'\bid="([^"]+)"', agreement)
    )
    text = _text(page)
    for cell in api["result"]["mdad"]:
        shown = (
            f"{100 * cell['mdad']:.1f}"
            if cell["mdad"] is not None
            else f">{100 * cell['max_gap']:.1f}"
        )
        assert shown in text
    assert "smallest evaluated size" in text or "none of the evaluated sizes" in text
    assert "http-equiv" not in page  # finished: no refresh
    assert "\u2013\u2013" not in page  # an open CI end was "16.5" and two en dashes
    assert "Split says which items define the true order" in " ".join(text.split())
    # random's exact MDAD (what verdicts and plans report) next to the analysis' estimate
    from app.core.reliability.exact import exact_agreement

    table = page.split('id="mdad-table"')[1]
    for cell in api["result"]["mdad"]:
        if cell["method"] != "random" or cell["split"] != "seen":
            continue
        exact = exact_agreement(seen.seeded.correct, cell["n"], threshold=0.8).mdad
        row = re.search(
            rf'<tr><td>random</td><td class="num">{cell["n"]}</td>(.*?)</tr>', table, re.S
        )
        assert row is not None
        shown = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))[1].strip()
        assert shown == ("not reached" if exact is None else f"{100 * exact:.1f}")
    page = _ok(client.get(f"/ui/analyses/{seen.analysis_id}", params={"n": 10}))
    assert "Agreement curves at n = 10" in _text(page)


def test_analysis_bad_params(client: TestClient, seen: Seen) -> None:
    page = _ok(client.get(f"/ui/analyses/{seen.analysis_id}", params={"n": 11}), 422)
    assert "size 11 is not in this analysis" in page
    _ok(client.get(f"/ui/analyses/{seen.analysis_id}", params={"n": "x"}), 422)
    _ok(client.get(f"/ui/analyses/{uuid.uuid4()}"), 404)
    _ok(client.get("/ui/analyses/not-an-id"), 404)


def test_running_analysis_refreshes(client: TestClient, seen: Seen) -> None:
    r = client.post(f"/v1/benchmarks/{seen.ref}/analyses", json={**dict(seen_params()), "seed": 8})
    assert r.status_code == 202, r.text
    page = _ok(client.get(f"/ui/analyses/{r.json()['id']}"))
    assert '<meta http-equiv="refresh" content="3">' in page and "<progress" in page


def seen_params() -> dict:
    from tests.web.conftest import ANALYSIS

    return ANALYSIS


def test_subset_page_and_downloads(client: TestClient, seen: Seen) -> None:
    page = _ok(client.get(f"/ui/subsets/{seen.subset_id}"))
    api = client.get(f"/v1/subsets/{seen.subset_id}").json()
    text = _text(page)
    for it in api["items"]:
        assert it["item_id"] in text
    assert f"{api['items'][0]['weight']:.4f}" in text
    a, _ = far_pair(seen.seeded)
    assert seen.seeded.names[a] in text  # the model scored on it
    for fmt in ("json", "ids", "csv", "lm-eval"):
        link = f"/ui/subsets/{seen.subset_id}/download/{fmt}"
        assert f'href="{link}"' in page
        r = client.get(link)
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        assert (
            r.content == client.get(f"/v1/subsets/{seen.subset_id}", params={"format": fmt}).content
        )
    _ok(client.get(f"/ui/subsets/{seen.subset_id}/download/xml"), 422)
    _ok(client.get("/ui/subsets/nope"), 404)


def test_session_page(client: TestClient, seen: Seen) -> None:
    body = seen.session_body
    page = _ok(client.get(f"/ui/sessions/{seen.session_id}"))
    text = _text(page)
    assert f"Decision: {body['decision']}" in text
    assert f"After {body['items_used']} items in {len(body['history'])} batch" in text
    assert 'data-series="lower"' in page and 'data-series="upper"' in page
    rows = re.findall(r"<tr><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>", page)
    assert [(int(a), int(b)) for a, b in rows] == [
        (h["step"], h["items_used"]) for h in body["history"]
    ]
    _ok(client.get(f"/ui/sessions/{uuid.uuid4()}"), 404)
    _ok(client.get("/ui/sessions/zzz"), 404)


def test_static_and_schema(client: TestClient, app) -> None:
    r = client.get("/ui/static/style.css")
    assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"
    assert "cache-control" not in r.headers or r.headers["cache-control"] != "no-store"
    assert not [p for p in app.openapi()["paths"] if p.startswith("/ui")]
    # API responses keep their own headers (no page CSP on JSON)
    assert "content-security-policy" not in client.get("/healthz").headers


def test_sparse_benchmarks_render(client: TestClient, db_session) -> None:
    """A benchmark with no results, then with two models: pages say what is missing, no 500."""
    from app.ingest import parse_columnar
    from app.schemas.results import ModelCreate
    from app.services.catalog.benchmarks import create_version
    from app.services.catalog.results import store_results

    version, _ = create_version(
        db_session, f"tiny-{uuid.uuid4().hex[:6]}", ["a", "b", "c"], ["s"] * 3
    )
    db_session.commit()
    ref = str(version.id)
    text = _text(_ok(client.get(f"/ui/benchmarks/{ref}")))
    assert "No results yet" in text and "item health needs at least 3 models" in text
    assert "No leaderboard" in text
    page = _ok(
        client.get(f"/ui/benchmarks/{ref}/pair", params={"model_a": "x", "model_b": "y"}), 404
    )
    assert "has no results" in page
    for k, row in enumerate(([1, 0, 1], [0, 0, 1])):
        name = f"<img src=x onerror=alert({k})>"  # names are text, never markup
        store_results(db_session, version.id, ModelCreate(name=name), parse_columnar(row))
    db_session.commit()
    page = _ok(client.get(f"/ui/benchmarks/{ref}"))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(0)&gt;" in page
    text = _text(page)
    assert "2 of 2 models match" in text and "66.7%" in text and "33.3%" in text
    assert "item health needs at least 3 models" in text
    _ok(client.get("/ui/"))
