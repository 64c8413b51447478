"""Every Eval Ever instance sidecars written by every_eval_ever's own converter, checked
against what its own reader read from them (tests/fixtures/eee/expected.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.ingest.logs.eee import is_eee_instances, parse_eee_instances
from app.ingest.types import AmbiguousChoiceError, IngestError

EEE = Path(__file__).resolve().parents[1] / "fixtures" / "eee"
EXPECTED = json.loads((EEE / "expected.json").read_text())


def _by_result(rows: list[dict]) -> dict[str, list[dict]]:
    """Lines per evaluation result; a line joined to none (the converter leaves an errored
    epoch's line without one) belongs to no result: benchslice skips it."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r["evaluation_result_id"] is not None:
            out.setdefault(r["evaluation_result_id"], []).append(r)
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=lambda n: n.split("/")[1])
def test_every_value_matches_every_eval_evers_reader(name: str) -> None:
    data = (EEE / name).read_bytes()
    assert is_eee_instances(data)
    results = _by_result(EXPECTED[name])
    if len(results) > 1:
        with pytest.raises(AmbiguousChoiceError) as exc:
            parse_eee_instances(data)
        assert exc.value.choices == {"metric": list(results)}
    for result, rows in results.items():
        parsed = parse_eee_instances(data, metric=result if len(results) > 1 else None)
        items: dict[str, list[dict]] = {}
        for r in rows:
            items.setdefault(f"{r['evaluation_name']}/{r['sample_id']}", []).append(r)
        scored = {k: [r["score"] for r in v if r["error"] is None] for k, v in items.items()}
        scored = {k: v for k, v in scored.items() if v}
        assert parsed.model == rows[0]["model_id"] and parsed.metric == result
        assert parsed.item_ids.tolist() == list(scored)
        np.testing.assert_allclose(parsed.correct, [np.mean(v) for v in scored.values()], rtol=1e-6)
        k = max(len(v) for v in items.values())
        assert parsed.k == k and parsed.within_variance is None
        counts = [len(v) for v in scored.values()]
        if k > 1 and min(counts) < k:
            assert parsed.sample_counts.tolist() == counts
        else:
            assert parsed.sample_counts is None
        tin = [sum(r["input_tokens"] for r in items[i]) for i in scored]
        sec = [sum(r["latency_ms"] for r in items[i]) / 1000 for i in scored]
        np.testing.assert_allclose(parsed.costs.input_tokens, tin)
        np.testing.assert_allclose(parsed.costs.seconds, sec)


def _lines(name_part: str) -> list[dict]:
    (name,) = [n for n in EXPECTED if f"/{name_part}/" in n]
    return [json.loads(line) for line in (EEE / name).read_text().splitlines()]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.mark.parametrize(
    ("change", "line", "field"),
    [
        (lambda rows: rows[2].update(model_id="other/model"), 3, "model_id"),
        (lambda rows: rows[1]["evaluation"].update(score="high"), 2, "evaluation.score"),
        (lambda rows: rows[4]["evaluation"].update(score=3.0), 5, "evaluation.score"),
        (lambda rows: rows[0].pop("sample_id"), 1, "sample_id"),
        (lambda rows: rows[3]["token_usage"].update(input_tokens=-1), 4, "token_usage"),
        (lambda rows: rows.append({**rows[0], "sample_hash": "x"}), 9, "sample_hash"),
    ],
)
def test_broken_lines_name_line_and_field(change, line, field) -> None:
    rows = _lines("arith")
    change(rows)
    with pytest.raises(IngestError) as exc:
        parse_eee_instances(_jsonl(rows))
    assert (exc.value.errors[0].line, exc.value.errors[0].field) == (line, field)


def test_errored_lines_are_missing_not_zero() -> None:
    rows = _lines("arith")
    for r in rows:
        r["error"] = "boom"
    with pytest.raises(IngestError, match="every record has an error"):
        parse_eee_instances(_jsonl(rows))
