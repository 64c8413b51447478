"""Per-item cost columns of plain uploads (app.ingest.costs): parsed, validated, named."""

from __future__ import annotations

import numpy as np
import pytest

from app.ingest import IngestError, parse_columnar, parse_csv, parse_keyed
from app.ingest.costs import cost_matrix


def test_csv_cost_columns_and_aliases():
    p = parse_csv(
        "item_id,correct,prompt_tokens,tokens,time_s,cost\na,1,50,120,2.5,0.01\nb,0,60,,3,0.5\n"
    )
    c = p.costs
    assert c is not None and c.source == "csv cost columns"
    np.testing.assert_array_equal(c.input_tokens, [50, 60])
    np.testing.assert_array_equal(c.output_tokens, [120, np.nan])  # empty cell: not reported
    np.testing.assert_array_equal(c.seconds, [2.5, 3.0])
    np.testing.assert_array_equal(c.usd, [0.01, 0.5])
    m = cost_matrix(c, 2)
    assert m.shape == (4, 2) and m[3, 1] == 0.5
    assert parse_csv("item_id,correct\na,1\n").costs is None
    assert parse_csv("item_id,correct,usd\na,1,\n").costs is None  # all empty: no costs


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("tokens", "-3", "negative"),
        ("seconds", "nan", "NaN"),
        ("usd", "inf", "infinite"),
        ("usd", "250000", "implausible"),
        ("seconds", "3600000", "milliseconds"),
        ("output_tokens", "2.5", "whole number"),
        ("input_tokens", "20000000", "implausible"),
        ("cost", "abc", "not a number"),
    ],
)
def test_csv_bad_costs_name_the_column_and_line(column, value, words):
    with pytest.raises(IngestError) as exc:
        parse_csv(f"item_id,correct,{column}\na,1,1\nb,0,{value}\n")
    err = exc.value.errors[0]
    assert err.field == column and err.line == 3 and words in err.message


def test_csv_two_columns_for_one_field_are_refused():
    with pytest.raises(IngestError) as exc:
        parse_csv("item_id,correct,tokens,output_tokens\na,1,2,3\n")
    assert exc.value.errors[0].field == "output_tokens"


def test_json_keyed_and_columnar_costs():
    p = parse_keyed({"a": {"correct": 1, "usd": 0.2}, "b": {"correct": 0}, "c": 1.0})
    np.testing.assert_array_equal(p.costs.usd, [0.2, np.nan, np.nan])
    assert p.costs.output_tokens is None and p.costs.source == "json cost fields"
    with pytest.raises(IngestError) as exc:
        parse_keyed({"a": {"correct": 1, "seconds": -1}})
    assert exc.value.errors[0].field == "results['a'].seconds"
    q = parse_columnar([1, 0], costs={"output_tokens": [10, None], "usd": None})
    np.testing.assert_array_equal(q.costs.output_tokens, [10, np.nan])
    assert q.costs.usd is None
    for costs, field in (
        ({"usd": [0.1, -1]}, "costs.usd[1]"),
        ({"usd": [0.1]}, "costs.usd"),
        ({"output_tokens": [1.5, 2]}, "costs.output_tokens[0]"),
        ({"seconds": [float("nan"), 1]}, "costs.seconds[0]"),
    ):
        with pytest.raises(IngestError) as exc:
            parse_columnar([1, 0], costs=costs)
        assert exc.value.errors[0].field == field
