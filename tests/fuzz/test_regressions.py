"""Regressions found by the schemathesis pass, pinned where they live (no service needed)."""

from __future__ import annotations

import numpy as np

from app.api.middleware import json_depth
from app.core import smallest_n


def test_smallest_n_at_a_threshold_a_hair_under_one_is_the_full_size() -> None:
    # P(same order) is exactly 1 at n = N; round-off once made it 0.9999999999999998 < target
    # and the search indexed an empty array (a 500 on GET .../verdict?threshold=0.9999999999999999).
    rng = np.random.default_rng(0)
    correct = (rng.random((2, 40)) < [[0.7], [0.4]]).astype(np.uint8)
    n = smallest_n(correct, 0, 1, 0.9999999999999999)
    assert n is not None and 1 <= n <= 40
    assert smallest_n(correct, 0, 1, 0.8) <= n


def test_json_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth(b"1") == 0
    assert json_depth(b"[]") == 1
    assert json_depth(b'{"a": [1, {"b": "[[[[{{"}]}') == 3
    assert json_depth(b'["\\"[[[", [[]]]') == 3
    assert json_depth(b"[" * 5000 + b"]" * 5000) == 5000


def _max_chars(schema: dict) -> int | None:
    """The longest text a parameter schema admits (None: unbounded)."""
    if "anyOf" in schema:
        bounds = [_max_chars(s) for s in schema["anyOf"]]
        return None if None in bounds else max(bounds)  # type: ignore[type-var]
    kind = schema.get("type")
    if "enum" in schema:
        return max(len(str(v)) for v in schema["enum"])
    if kind == "string":
        return 36 if schema.get("format") == "uuid" else schema.get("maxLength")
    if kind in ("integer", "number"):
        return 32  # the longest float/integer repr
    if kind in ("boolean", "null"):
        return 5
    return None


def test_every_bounded_request_the_spec_allows_fits_the_servers_request_line() -> None:
    """Regression (schemathesis): the leaderboard's ``models`` allowed 20,000 characters; 20,000
    four-byte characters are 240 KB percent-encoded, past the 64 KiB request line uvicorn's
    httptools parser accepts, and the answer was a bare text/plain 400 the spec does not list.
    Every operation's bounded path and query parameters, at their maximum length in the widest
    characters (12 bytes each percent-encoded), must fit in 65,535 bytes."""
    import json
    from pathlib import Path

    spec = json.loads((Path(__file__).parents[2] / "openapi" / "openapi.json").read_text())
    limit = 65_535
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            worst = len(path) + 1
            for p in operation.get("parameters", []):
                if p["in"] not in ("path", "query"):
                    continue
                n = _max_chars(p["schema"])
                if n is not None:
                    worst += len(p["name"]) + 2 + 12 * n
            assert worst <= limit, (method, path, worst)


def test_csv_with_a_bare_carriage_return_or_a_huge_field_is_an_ingest_error() -> None:
    """Regression (schemathesis, POST /v1/subsets/{id}/scores with text/csv ``T\\r\\u0161``):
    csv.Error escaped parse_csv and the upload was a 500; now a bare CR ends a line and any
    csv.Error is a 422-mapped IngestError with its line."""
    import pytest

    from app.ingest.tabular import parse_csv
    from app.ingest.types import IngestError

    with pytest.raises(IngestError, match="line 1: expected at least two columns"):
        parse_csv("T\r\u0161".encode())
    parsed = parse_csv(b"item_id,correct\r\na,1\rb,0\n")  # old Mac line ends inside a file
    assert parsed.item_ids.tolist() == ["a", "b"] and parsed.correct.tolist() == [1, 0]
    with pytest.raises(IngestError, match="unreadable CSV: field larger than field limit"):
        parse_csv(b'a,"' + b"x" * 200_000 + b'"\n')
