"""The number style (docs/number-style.md) as code, the closest-name hints, and the client's
count of the problems a server left out of a long list (issue 28)."""

from __future__ import annotations

import math

import pytest

from app import formatting as F
from app.client.errors import BenchsliceError
from app.services.catalog.names import closest, did_you_mean


def test_number_style() -> None:
    assert F.pct(0.35) == "35.0%" and F.pct(None) == F.MISSING == "\u2013"
    assert F.pct(math.nan) == F.MISSING
    assert F.pts(0.022) == "2.2 pts" and F.pts(0.129, signed=True) == "+12.9 pts"
    assert F.pts(0.022, unit=False) == "2.2"
    assert F.prob(0.5123) == "0.51"
    assert F.p_value(0.5327) == "0.53" and F.p_value(0.00312) == "0.0031"
    assert F.p_equals(0.5327) == "p = 0.53" and F.p_equals(1e-9) == "p < 0.0001"
    assert F.count(87990) == "87,990" and F.count(None) == F.MISSING
    assert F.span(1, 132) == "1-132"
    assert F.interval(0.408, 0.499) == "[40.8%, 49.9%]"
    # exact: one value, never "0.51 to 0.51"; an open end in words (was "16.5" + two en dashes)
    assert F.interval(0.51, 0.51, F.prob) == "0.51 (exact)"
    assert F.interval(0.165, None, F.pts) == "[16.5 pts, not reached]"
    assert F.more(5, 60) == "… and 55 more" and F.more(5, 5) == ""


def test_closest_names_ignore_case_and_typos() -> None:
    names = [
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "Qwen/Qwen2-72B",
    ]
    assert closest("meta-llama/llama-3.3-70b-instruct", names)[0] == names[0]
    assert closest("meta-llama/Meta-Llama-3-8B-Instrct", names)[0] == names[2]
    assert closest("qwen2-72b", names) == ["Qwen/Qwen2-72B"]
    assert closest("nobody/none", names) == []
    hint = did_you_mean("META-LLAMA/LLAMA-3.3-70B-INSTRUCT", names)
    assert hint.startswith(f"; did you mean '{names[0]}'") and "case-sensitive" in hint
    assert did_you_mean("nobody/none", names) == ""


@pytest.mark.parametrize(("listed", "total", "tail"), [(20, 60, 55), (20, None, 15), (3, None, 0)])
def test_client_counts_the_problems_left_out(listed: int, total: int | None, tail: int) -> None:
    """Was "… and 15 more" when the server had listed 20 of 60 problems (55 more)."""
    errors = [{"loc": ["body", "line", i], "message": "bad"} for i in range(listed)]
    exc = BenchsliceError("Invalid input", status=422, errors=errors, errors_total=total)
    text = str(exc)
    if tail:
        assert text.endswith(f"… and {tail} more")
    else:
        assert "more" not in text
