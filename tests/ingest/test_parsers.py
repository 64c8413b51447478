"""Parsers on hand-made files that follow the real lm-eval / leaderboard field layout."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.ingest import (
    AmbiguousChoiceError,
    IngestError,
    gold_indices,
    leaderboard_metric,
    parse_columnar,
    parse_csv,
    parse_keyed,
    parse_leaderboard_details,
    parse_lm_eval_samples,
    task_from_filename,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
ARC = FIX / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
MMLU_PRO = FIX / "samples_leaderboard_mmlu_pro_2024-07-03T08-15-00.000001.jsonl"
GSM8K = FIX / "samples_gsm8k_2024-06-10T09-30-00.000000.jsonl"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _reference_confidence(rec: dict, gold: int) -> float:
    """Slow reference: softmax of the log-likelihoods, one record at a time."""
    ll = np.array([float(r[0]) for r in rec["filtered_resps"]])
    p = np.exp(ll - ll.max())
    return float(p[gold] / p.sum())


def test_task_from_filename_and_leaderboard_metric():
    assert task_from_filename(ARC.name) == "arc_easy"
    assert task_from_filename("/x/" + MMLU_PRO.name) == "leaderboard_mmlu_pro"
    assert task_from_filename("results.jsonl") is None
    assert leaderboard_metric("leaderboard_mmlu_pro") == "acc"
    assert leaderboard_metric("leaderboard_bbh_navigate") == "acc_norm"
    assert leaderboard_metric("leaderboard_gpqa_main") == "acc_norm"
    assert leaderboard_metric("leaderboard_musr_murder_mysteries") == "acc_norm"
    assert leaderboard_metric("leaderboard_math_algebra_hard") == "exact_match"
    assert leaderboard_metric("hellaswag") is None


def test_multiple_choice_two_metrics_needs_a_choice():
    with pytest.raises(AmbiguousChoiceError) as exc:
        parse_lm_eval_samples(ARC.read_bytes(), filename=ARC.name)
    assert exc.value.choices == {"metric": ["acc", "acc_norm"]}
    assert exc.value.errors[0].field == "metric"


@pytest.mark.parametrize("metric", ["acc", "acc_norm"])
def test_multiple_choice_metric_confidence_and_doc_order(metric):
    recs = _records(ARC)
    parsed = parse_lm_eval_samples(ARC.read_bytes(), metric=metric, filename=ARC.name)
    by_id = {r["doc_id"]: r for r in recs}
    # the file is out of order (3, 0, 4, 1, 2); items come back sorted by doc_id
    assert parsed.doc_ids.tolist() == [0, 1, 2, 3, 4]
    assert parsed.item_ids.tolist() == [by_id[i]["doc_hash"] for i in range(5)]
    assert parsed.correct.dtype == np.uint8 and parsed.binary
    assert parsed.correct.tolist() == [int(by_id[i][metric]) for i in range(5)]
    expected = [_reference_confidence(by_id[i], by_id[i]["target"]) for i in range(5)]
    np.testing.assert_allclose(parsed.confidence, expected, rtol=1e-6)
    assert parsed.confidence.dtype == np.float32
    assert parsed.metric == metric and parsed.filter == "none"
    assert parsed.task == "arc_easy" and parsed.metrics_seen == ("acc", "acc_norm")
    assert parsed.subjects is None


def test_leaderboard_string_encoded_loglikelihoods_letter_targets():
    recs = _records(MMLU_PRO)
    parsed = parse_leaderboard_details(MMLU_PRO.read_bytes(), filename=MMLU_PRO.name)
    by_id = {r["doc_id"]: r for r in recs}
    assert parsed.metric == "acc"  # leaderboard default for MMLU-Pro
    assert parsed.filter is None and parsed.filters_seen == ()
    assert parsed.correct.tolist() == [int(by_id[i]["acc"]) for i in range(4)]
    # gold from the letter target matched against the " A".." E" continuations
    expected = [_reference_confidence(by_id[i], by_id[i]["doc"]["answer_index"]) for i in range(4)]
    np.testing.assert_allclose(parsed.confidence, expected, rtol=1e-6)
    assert parsed.subjects.tolist() == [by_id[i]["doc"]["category"] for i in range(4)]
    assert parsed.source_format == "leaderboard-jsonl"


def test_leaderboard_parquet_matches_jsonl(tmp_path):
    recs = _records(MMLU_PRO)
    # the details datasets store doc/arguments as nested values and resps as strings
    rows = [
        {
            **r,
            "doc": json.dumps(r["doc"]),
            "filtered_resps": json.dumps(r["filtered_resps"]),
            "resps": json.dumps(r["resps"]),
            "arguments": json.dumps(r["arguments"]),
        }
        for r in recs
    ]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    from_parquet = parse_leaderboard_details(
        buf.getvalue(), fmt="parquet", task="leaderboard_mmlu_pro"
    )
    from_jsonl = parse_leaderboard_details(MMLU_PRO.read_bytes(), filename=MMLU_PRO.name)
    assert from_parquet.item_ids.tolist() == from_jsonl.item_ids.tolist()
    np.testing.assert_array_equal(from_parquet.correct, from_jsonl.correct)
    np.testing.assert_allclose(from_parquet.confidence, from_jsonl.confidence)
    assert from_parquet.subjects.tolist() == from_jsonl.subjects.tolist()


def test_unreadable_parquet_is_a_clear_error():
    with pytest.raises(IngestError, match="parquet"):
        parse_leaderboard_details(b"not parquet", fmt="parquet")


def test_generative_two_filters():
    data = GSM8K.read_bytes()
    with pytest.raises(AmbiguousChoiceError) as exc:
        parse_lm_eval_samples(data, filename=GSM8K.name)
    assert exc.value.choices == {"filter": ["strict-match", "flexible-extract"]}
    strict = parse_lm_eval_samples(data, filter="strict-match")
    flex = parse_lm_eval_samples(data, filter="flexible-extract")
    assert strict.metric == flex.metric == "exact_match"
    assert strict.item_ids.tolist() == flex.item_ids.tolist()
    assert strict.doc_ids.tolist() == [0, 1, 2, 3]
    assert strict.correct.tolist() == [0, 1, 0, 1]
    assert flex.correct.tolist() == [1, 1, 0, 1]
    assert strict.confidence is None  # generative: no per-choice log-likelihoods
    with pytest.raises(IngestError, match="unknown filter"):
        parse_lm_eval_samples(data, filter="nope")


def test_unknown_metric_lists_the_choices():
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(ARC.read_bytes(), metric="f1")
    assert exc.value.errors[0].field == "metric"
    assert "acc, acc_norm" in exc.value.errors[0].message


def test_malformed_line_and_bad_values_report_line_numbers():
    lines = ARC.read_text().splitlines()
    out_of_range, not_finite = json.loads(lines[3]), json.loads(lines[4])
    out_of_range["acc"], not_finite["acc"] = 1.5, float("nan")
    bad = [lines[0], "{not json", lines[2], json.dumps(out_of_range), json.dumps(not_finite)]
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples("\n".join(bad), metric="acc")
    errs = {(e.line, e.field) for e in exc.value.errors}
    assert (2, None) in errs
    assert any(e.line == 2 and "malformed JSON" in e.message for e in exc.value.errors)
    full = parse_lm_eval_samples("\n".join(bad[:1] + bad[2:]), metric="acc", strict=False)
    assert {(e.line, e.field) for e in full.errors} == {(3, "acc"), (4, "acc")}
    assert [e.message for e in full.errors] == ["value 1.5 is outside [0, 1]", "NaN or infinite"]
    assert full.n_items == 2


def test_duplicate_doc_hash_and_missing_metric():
    lines = ARC.read_text().splitlines()
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples("\n".join([lines[0], lines[1], lines[0]]), metric="acc")
    assert exc.value.errors[0].line == 3 and exc.value.errors[0].field == "doc_hash"
    assert "first on line 1" in exc.value.errors[0].message
    rec = json.loads(lines[1])
    del rec["acc_norm"]
    rec["metrics"] = ["acc"]
    del rec["acc"]
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples("\n".join([lines[0], json.dumps(rec)]), metric="acc")
    assert (exc.value.errors[0].line, exc.value.errors[0].field) == (2, "acc")


def test_empty_upload():
    with pytest.raises(IngestError, match="empty"):
        parse_lm_eval_samples(b"\n\n")


def test_doc_id_key_and_subject_field():
    parsed = parse_lm_eval_samples(
        MMLU_PRO.read_bytes(), item_key="doc_id", subject_field="src", metric="acc"
    )
    assert parsed.item_ids.tolist() == ["0", "1", "2", "3"]
    assert parsed.subjects.tolist() == ["ori_mmlu"] * 4


@pytest.mark.parametrize(
    ("target", "doc", "arguments", "n", "expected"),
    [
        (2, {}, None, 4, [2]),
        ("1", {}, None, 4, [1]),
        ("Mars", {"choices": ["Venus", "Mars", "Earth"]}, None, 3, [1]),
        ("Mars", {"choices": {"text": ["Venus", "Mars"], "label": ["A", "B"]}}, None, 2, [1]),
        ("B", {}, [["q", " A"], ["q", " B"]], 2, [1]),
        ([0, 2], {}, None, 3, [0, 2]),
        (7, {}, None, 3, None),
        ("Pluto", {"choices": ["Venus", "Mars"]}, None, 2, None),
    ],
)
def test_gold_indices(target, doc, arguments, n, expected):
    assert gold_indices(target, doc, arguments, n) == expected


def test_confidence_is_stable_for_extreme_loglikelihoods():
    rec = json.loads(ARC.read_text().splitlines()[0])
    rec["filtered_resps"] = [
        ["-1000.0", "False"],
        ["-1e5", "False"],
        ["-1000.5", "True"],
        ["-2000", "False"],
    ]
    rec["target"] = 0
    parsed = parse_lm_eval_samples(json.dumps(rec), metric="acc")
    np.testing.assert_allclose(parsed.confidence, [1 / (1 + np.exp(-0.5))], rtol=1e-6)


def test_csv_with_and_without_header():
    parsed = parse_csv((FIX / "results.csv").read_bytes())
    assert parsed.item_ids.tolist() == ["q1", "q2", "q3"]
    assert parsed.correct.tolist() == [1, 0, 1] and parsed.binary
    np.testing.assert_allclose(parsed.confidence, [0.91, 0.12, 0.66], rtol=1e-6)
    scores = parse_csv((FIX / "results_scores_noheader.csv").read_text())
    assert scores.correct.dtype == np.float32 and scores.confidence is None
    np.testing.assert_allclose(scores.correct, [0.5, 0.25, 1.0])
    reordered = parse_csv("correct,item_id\n1,a\n0,b\n")
    assert reordered.item_ids.tolist() == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "line", "field", "fragment"),
    [
        ("item_id,correct\na,1\nb,2\n", 3, "correct", "outside [0, 1]"),
        ("item_id,correct\na,1\na,0\n", 3, "item_id", "duplicate"),
        ("item_id,correct\na,nan\n", 2, "correct", "NaN"),
        ("item_id,correct\na,yes\n", 2, "correct", "not a number"),
        ("item_id,correct,confidence\na,1,0.5\nb,1\n", 3, None, "columns"),
        ("item_id\na\n", 1, "correct", "header"),
        ("item_id,correct\n", None, None, "empty"),
    ],
)
def test_csv_errors_name_line_and_field(text, line, field, fragment):
    with pytest.raises(IngestError) as exc:
        parse_csv(text)
    err = exc.value.errors[0]
    assert (err.line, err.field) == (line, field)
    assert fragment in err.message


def test_keyed_json():
    body = json.loads((FIX / "results_keyed.json").read_text())
    parsed = parse_keyed(body["results"])
    assert parsed.item_ids.tolist() == ["q1", "q2", "q3"]
    np.testing.assert_allclose(parsed.confidence, [0.91, 0.12, 0.66], rtol=1e-6)
    plain = parse_keyed({"a": 1, "b": 0.5})
    assert plain.correct.dtype == np.float32 and plain.confidence is None


@pytest.mark.parametrize(
    ("results", "field"),
    [
        ({"a": 2}, "results['a']"),
        ({"a": float("nan")}, "results['a']"),
        ({"a": "1"}, "results['a']"),
        ({"a": {"correct": 1, "confidence": 1.2}}, "results['a'].confidence"),
        ({"a": {"confidence": 0.2}}, "results['a']"),
        ({"a": {"correct": 1, "confidence": 0.2}, "b": {"correct": 0}}, "confidence"),
        ({}, "results"),
    ],
)
def test_keyed_json_errors(results, field):
    with pytest.raises(IngestError) as exc:
        parse_keyed(results)
    assert exc.value.errors[0].field == field


def test_columnar():
    parsed = parse_columnar([1, 0, 1], [0.9, 0.1, 0.7], ["a", "b", "c"])
    assert parsed.item_ids.tolist() == ["a", "b", "c"] and parsed.binary
    aligned = parse_columnar([0.5, 1.0])
    assert aligned.item_ids is None and aligned.correct.dtype == np.float32


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"correct": [1, 0], "confidence": [0.5]}, "confidence", "length"),
        ({"correct": [1, 0], "item_ids": ["a"]}, "item_ids", "length"),
        ({"correct": [1, 0], "item_ids": ["a", "a"]}, "item_ids", "duplicate"),
        ({"correct": [1, "x"]}, "correct", "correct[1]"),
        ({"correct": [1, 3]}, "correct", "correct[1]"),
        ({"correct": [1, float("inf")]}, "correct", "infinite"),
        ({"correct": [1, 0], "confidence": [0.5, -0.1]}, "confidence", "confidence[1]"),
        ({"correct": []}, "correct", "empty"),
        ({"correct": [[1, 0]]}, "correct", "flat"),
    ],
)
def test_columnar_errors(kwargs, field, fragment):
    with pytest.raises(IngestError) as exc:
        parse_columnar(**kwargs)
    assert exc.value.errors[0].field == field
    assert fragment in exc.value.errors[0].message


@pytest.mark.parametrize(
    "encoded",
    [
        [["-1.5", "False"], ["-0.2", "True"], ["-3.0", "False"]],
        ["(-1.5, False)", "(-0.2, True)", "(-3.0, False)"],
        "[[-1.5, false], [-0.2, true], [-3.0, false]]",
        "[('-1.5', 'False'), ('-0.2', 'True'), ('-3.0', 'False')]",
    ],
)
def test_filtered_resps_encodings(encoded):
    rec = {
        "doc_id": 0,
        "doc_hash": "h0",
        "target": 1,
        "acc": 1.0,
        "filtered_resps": encoded,
        "doc": {"choices": ["a", "b", "c"]},
    }
    parsed = parse_lm_eval_samples(json.dumps(rec))
    ll = np.array([-1.5, -0.2, -3.0])
    np.testing.assert_allclose(parsed.confidence, [np.exp(ll[1]) / np.exp(ll).sum()], rtol=1e-6)


def test_nan_literal_in_a_log_line_is_reported_not_malformed():
    rec = json.dumps({"doc_id": 0, "doc_hash": "h0", "target": 0, "acc": float("nan")})
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(rec)
    assert (exc.value.errors[0].line, exc.value.errors[0].field) == (1, "acc")
    assert "NaN" in exc.value.errors[0].message
