"""Corpus-level metrics have no per-item score: refused on upload naming the metric (issue 35)."""

from __future__ import annotations

import json

import pytest

from app.ingest import IngestError, parse_lm_eval_samples
from app.ingest.corpus_metrics import CORPUS_METRICS, refuse_corpus_metric


def _jsonl(*records: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


@pytest.mark.parametrize("metric", ["bleu", "chrf", "ter"])
def test_a_corpus_metric_log_is_refused_naming_the_metric(metric):
    data = _jsonl(
        {"doc_id": 0, "doc_hash": "a", metric: ["the ref", "the pred"]},
        {"doc_id": 1, "doc_hash": "b", metric: ["ref 2", "pred 2"]},
    )
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(data, task="wmt16")
    message = str(exc.value)
    assert f"metric {metric!r} has no per-item score" in message
    assert "corpus" in message and "--metric" in message
    assert exc.value.errors[0].field == "metric"


def test_choosing_the_corpus_metric_next_to_a_per_item_one_is_refused():
    data = _jsonl(
        {"doc_id": 0, "doc_hash": "a", "bleu": ["r", "p"], "exact_match": 1.0},
        {"doc_id": 1, "doc_hash": "b", "bleu": ["r", "p"], "exact_match": 0.0},
    )
    with pytest.raises(IngestError, match="'bleu' has no per-item score"):
        parse_lm_eval_samples(data, task="t", metric="bleu")
    parsed = parse_lm_eval_samples(data, task="t")  # the per-item mean is accepted
    assert parsed.metric == "exact_match" and parsed.n_items == 2


def test_a_mean_of_per_item_scores_is_accepted():
    data = _jsonl(
        {"doc_id": 0, "doc_hash": "a", "f1": 0.5},
        {"doc_id": 1, "doc_hash": "b", "f1": 0.75},
    )
    parsed = parse_lm_eval_samples(data, task="squad")
    assert parsed.metric == "f1" and not parsed.binary
    for name in ("acc", "f1", "rouge1", "exact_match", None):
        refuse_corpus_metric(name)  # no error
    for name in CORPUS_METRICS:
        with pytest.raises(IngestError, match=name.upper()):
            refuse_corpus_metric(name.upper())
