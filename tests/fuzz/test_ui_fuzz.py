"""The browser view's GET pages under random query parameters and path references (hypothesis),
on the Postgres fixtures of tests/web (a 30-model GPQA slice with an analysis, a scored subset
and a decided session).

For every request: never a 5xx; every response under /ui carries the security headers; every
4xx is an HTML page (not JSON, not a bare error); and no input is echoed unescaped: the markup
payloads (``<script>``, an ``<svg onload>``, a quote breaking out of an attribute) never appear
raw in a body, and no page ever contains a ``<script`` tag (the CSP allows none anyway).

Inputs: model names with unicode, quotes, angle brackets, NUL and 5,000-character runs; sizes
negative, huge, fractional, non-numeric; unknown benchmark references (``name@v999``, random
ids, markup); unknown or malformed subset / analysis / session ids; odd ``next`` targets.
"""

from __future__ import annotations

import html
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.web.conftest import Seen, seen  # noqa: F401  (the fixture, shared with tests/web)

EXAMPLES = 60  # per page family; 7 families
MARKUP = [
    "<script>alert(1)</script>",
    '"><svg onload=alert(1)>',
    "'><img src=x onerror=alert(1)>",
    "</title><script>x</script>",
]
NASTY = [
    *MARKUP,
    "",
    " ",
    "\x00",
    "a\x00b",
    "%00",
    "../../etc/passwd",
    "x" * 5000,
    "\u202e\u0301\U0001f600" * 300,
    "null",
    "-1",
    "0",
    "1e309",
    "NaN",
    "9" * 40,
    "-9223372036854775809",
    "1.5",
    "0x10",
    "org/model,other",
    "*",
    "[",
]
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
value = st.one_of(st.sampled_from(NASTY), text)
sizes = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(NASTY),
    text,
)
maybe = st.none() | value
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}


def _seg(raw: str) -> str:
    """``raw`` as one path segment (percent-encoded: slashes, controls, NUL and all)."""
    return quote(raw, safe="")


def _check(r: Any, inputs: list[str | None]) -> None:
    where = f"{r.request.method} {r.request.url}"[:400]
    assert r.status_code < 500, (where, r.status_code, r.text[:1000])
    csp = r.headers.get("content-security-policy", "")
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, where
    for k, v in HEADERS.items():
        assert r.headers.get(k) == v, (where, k)
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("text/html"), (where, r.headers)
        assert "<html" in r.text and "</html>" in r.text, where
    body = r.text
    assert "<script" not in body.lower(), where
    for raw in inputs:
        if raw and any(c in raw for c in "<>\"'") and len(raw) >= 4:
            if raw in body and html.escape(raw) != raw:
                raise AssertionError(f"{where}: input echoed unescaped: {raw!r}")
    for payload in MARKUP:
        assert payload not in body, (where, payload)


def _refs(data: Seen, client: TestClient) -> list[str]:
    name = client.get(f"/v1/benchmarks/{data.ref}").json()["name"]
    return [data.ref, name, f"{name}@v1", f"{name}@v999", str(uuid.uuid4())]


def _ref(data: Seen, client: TestClient) -> st.SearchStrategy[str]:
    return st.sampled_from(_refs(data, client)) | value


def test_benchmark_page_fuzzed(client: TestClient, seen: Seen) -> None:  # noqa: F811
    names = seen.seeded.names

    @SETTINGS
    @given(
        ref=_ref(seen, client),
        q=maybe | st.sampled_from(names),
        sort=maybe | st.sampled_from(["accuracy", "name", "-accuracy"]),
        all_=maybe | st.just("1"),
    )
    def run(ref: str, q: str | None, sort: str | None, all_: str | None) -> None:
        params = {k: v for k, v in {"q": q, "sort": sort, "all": all_}.items() if v is not None}
        r = client.get(f"/ui/benchmarks/{_seg(ref)}", params=params)
        _check(r, [ref, q, sort, all_])

    run()


def test_pair_page_fuzzed(client: TestClient, seen: Seen) -> None:  # noqa: F811
    names = seen.seeded.names
    refs = _refs(seen, client)

    @SETTINGS
    @given(
        ref=st.sampled_from(refs[:3]) | st.sampled_from(refs[3:]),
        model_a=maybe | st.sampled_from(names),
        model_b=maybe | st.sampled_from(names),
        size=st.none() | sizes,
        method=maybe | st.sampled_from(["random", "subtask_stratified", "anchor_points"]),
    )
    def run(
        ref: str, model_a: str | None, model_b: str | None, size: str | None, method: str | None
    ) -> None:
        params = {
            k: v
            for k, v in {
                "model_a": model_a,
                "model_b": model_b,
                "size": size,
                "method": method,
            }.items()
            if v is not None
        }
        r = client.get(f"/ui/benchmarks/{_seg(ref)}/pair", params=params)
        _check(r, [model_a, model_b, size, method])

    run()


def test_analysis_page_fuzzed(client: TestClient, seen: Seen) -> None:  # noqa: F811
    @SETTINGS
    @given(
        analysis=st.sampled_from([seen.analysis_id, str(uuid.uuid4())]) | value,
        n=st.none() | sizes,
    )
    def run(analysis: str, n: str | None) -> None:
        params = {"n": n} if n is not None else {}
        r = client.get(f"/ui/analyses/{_seg(analysis)}", params=params)
        _check(r, [analysis, n])

    run()


def test_subset_session_and_download_pages_fuzzed(client: TestClient, seen: Seen) -> None:  # noqa: F811
    @SETTINGS
    @given(
        subset=st.sampled_from([seen.subset_id, "0" * 64, seen.subset_id[:12]]) | value,
        session=st.sampled_from([seen.session_id, str(uuid.uuid4())]) | value,
        fmt=st.sampled_from(["csv", "json", "lm_eval", "helm"]) | value,
    )
    def run(subset: str, session: str, fmt: str) -> None:
        _check(client.get(f"/ui/subsets/{_seg(subset)}"), [subset])
        _check(client.get(f"/ui/sessions/{_seg(session)}"), [session])
        r = client.get(f"/ui/subsets/{_seg(subset)}/download/{_seg(fmt)}")
        assert r.status_code < 500, (subset, fmt, r.text[:500])
        if r.status_code >= 400:
            _check(r, [subset, fmt])

    run()


def test_index_and_login_fuzzed(client: TestClient, seen: Seen) -> None:  # noqa: F811
    @SETTINGS
    @given(junk=value, nxt=maybe)
    def run(junk: str, nxt: str | None) -> None:
        _check(client.get("/ui/", params={"junk": junk}), [junk])
        params = {"next": nxt} if nxt is not None else {}
        r = client.get("/ui/login", params=params, follow_redirects=False)
        assert r.status_code in (303, 200), r.status_code
        location = r.headers.get("location", "")
        assert location.startswith("/ui"), location  # never an open redirect

    run()


def test_the_markup_payload_is_escaped_where_it_is_shown(client: TestClient, seen: Seen) -> None:  # noqa: F811
    """The fuzz property can only fail if inputs are shown at all: these pages do show them
    (the search box, the error detail), escaped."""
    payload = MARKUP[0]
    page = client.get(f"/ui/benchmarks/{seen.ref}", params={"q": payload}).text
    assert html.escape(payload, quote=True) in page or "&lt;script&gt;" in page
    r = client.get(f"/ui/benchmarks/{seen.ref}/pair", params={"model_a": payload, "model_b": "x"})
    assert r.status_code in (404, 422)
    assert "&lt;script&gt;" in r.text and payload not in r.text


@pytest.mark.parametrize(
    "path",
    [
        "/ui/benchmarks/%00",
        "/ui/benchmarks/a%00b/pair?model_a=x&model_b=y",
        "/ui/subsets/%00",
        "/ui/subsets/%00/download/csv",
        "/ui/analyses/%00",
        "/ui/sessions/%00",
        "/v1/benchmarks/%00",
        "/v1/subsets/%00",
        "/v1/benchmarks/a%00b/leaderboard",
    ],
)
def test_nul_in_a_reference_is_a_404_not_a_500(client: TestClient, path: str) -> None:
    """Regression (found by this fuzzer): a NUL in a benchmark reference or a subset id reached
    Postgres ("text fields cannot contain NUL") and the page was a 500."""
    r = client.get(path)
    assert r.status_code in (404, 422), (path, r.status_code, r.text[:300])
    if path.startswith("/ui/"):
        assert r.headers["content-type"].startswith("text/html")
