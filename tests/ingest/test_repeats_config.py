"""Repeated samples (K per item) in every upload format, and the lm-eval evaluation config."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from app.ingest import (
    CONFIG_FIELDS,
    IngestError,
    config_fingerprint,
    parse_columnar,
    parse_csv,
    parse_keyed,
    parse_lm_eval_config,
    parse_lm_eval_samples,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
ARC = FIX / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
RESULTS = FIX / "results_2024-05-01T10-00-00.123456.json"


def _arc() -> list[dict]:
    return [json.loads(line) for line in ARC.read_text().splitlines() if line.strip()]


def _jsonl(records: list[dict]) -> str:
    return "\n".join(json.dumps(r) for r in records)


def _repeated_log(samples: dict[int, list[float]]) -> str:
    """One record per (doc, sample), interleaved like lm-eval writes repeats of several docs."""
    by_id = {r["doc_id"]: r for r in _arc()}
    out = []
    for s in range(max(len(v) for v in samples.values())):
        for doc_id, values in samples.items():
            if s < len(values):
                rec = copy.deepcopy(by_id[doc_id])
                rec["acc"] = values[s]
                out.append(rec)
    return _jsonl(out)


def test_repeated_doc_records_become_means_with_sample_variance() -> None:
    samples = {0: [1, 1, 0], 1: [0, 0, 0], 2: [1, 0, 1], 3: [1, 1, 1], 4: [0, 1, 0]}
    p = parse_lm_eval_samples(_repeated_log(samples), metric="acc")
    assert p.samples == 3 and p.k == 3 and not p.binary
    assert p.confidence is None and "3 samples per item: no confidence" in p.notes
    assert p.doc_ids.tolist() == [0, 1, 2, 3, 4]
    expected = [np.mean(samples[d]) for d in range(5)]
    np.testing.assert_allclose(p.correct, expected, rtol=1e-6)
    # ddof-1 variance of 3 Bernoulli draws with mean m: 3/2 m (1 - m)
    np.testing.assert_allclose(
        p.within_variance, [1.5 * m * (1 - m) for m in expected], rtol=1e-6, atol=1e-7
    )


def test_list_valued_metric_with_declared_repeats() -> None:
    recs = _arc()
    values = {0: [1, 0, 1, 1], 1: [0.5, 0, 0, 0], 2: [1, 1, 1, 1], 3: [0, 0, 0, 1], 4: [1, 1, 0, 0]}
    for r in recs:
        r["acc"] = values[r["doc_id"]]
        r["repeats"] = 4
    p = parse_lm_eval_samples(_jsonl(recs), metric="acc")
    assert p.samples == 4
    np.testing.assert_allclose(p.correct, [np.mean(values[d]) for d in range(5)], rtol=1e-6)
    np.testing.assert_allclose(
        p.within_variance, [np.var(values[d], ddof=1) for d in range(5)], rtol=1e-6
    )


def test_k_mismatch_names_the_field_and_the_line() -> None:
    samples = {0: [1, 1, 0], 1: [0, 0], 2: [1, 0, 1], 3: [1, 1, 1], 4: [0, 1, 0]}
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(_repeated_log(samples), metric="acc")
    (err,) = exc.value.errors
    assert err.field == "repeats" and err.line == 2  # doc 1's first record
    assert "has 2 sample(s), expected repeats = 3" in err.message
    # declared repeats = 5 but a doc carries 3 samples
    recs = _arc()
    for r in recs:
        r["acc"] = [1, 0, 1, 0, 1] if r["doc_id"] != 4 else [1, 0, 1]
        r["repeats"] = 5
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(_jsonl(recs), metric="acc")
    (err,) = exc.value.errors
    assert (err.field, err.line) == ("repeats", 3) and "has 3 sample(s)" in err.message
    # repeats <= 0, and records that disagree on repeats
    recs = _arc()
    recs[1]["repeats"] = 0
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(_jsonl(recs), metric="acc")
    assert (exc.value.errors[0].field, exc.value.errors[0].line) == ("repeats", 2)
    recs = _arc()
    for i, r in enumerate(recs):
        r["repeats"] = 2 if i else 3
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(_jsonl(recs), metric="acc")
    assert exc.value.errors[0].field == "repeats"


def test_sample_scores_outside_unit_interval_or_nan() -> None:
    recs = _arc()
    recs[2]["acc"] = [1, 1.5]
    recs[3]["acc"] = [0, float("nan")]
    with pytest.raises(IngestError) as exc:
        parse_lm_eval_samples(_jsonl(recs), metric="acc")
    assert {(e.line, e.field) for e in exc.value.errors} == {(3, "acc"), (4, "acc")}


def test_columnar_keyed_and_csv_fractions_with_k() -> None:
    p = parse_columnar([0.2, 0.4, 1.0], samples=5, within_variance=[0.2, 0.3, 0.0])
    assert p.samples == 5 and p.within_variance.dtype == np.float32
    np.testing.assert_allclose(p.correct, [0.2, 0.4, 1.0], rtol=1e-6)
    assert parse_columnar([1, 0], samples=1).samples is None  # K = 1: plain results
    assert parse_keyed({"a": 0.5, "b": 0.25}, samples=4).samples == 4
    for kwargs, field in (
        ({"samples": 0}, "samples"),
        ({"samples": -3}, "samples"),
        ({"samples": 2.5}, "samples"),
        ({"samples": float("nan")}, "samples"),
        ({"within_variance": [0.1, 0.1, 0.1]}, "within_variance"),  # without samples
        ({"samples": 5, "within_variance": [0.2, 0.3]}, "within_variance"),  # length
        ({"samples": 5, "within_variance": [0.2, -0.1, 0.0]}, "within_variance"),
        # the largest ddof-1 variance of 5 values in [0, 1] with mean 0.2: 5/4 * 0.16 = 0.2
        ({"samples": 5, "within_variance": [0.25, 0.3, 0.0]}, "within_variance"),
        ({"samples": 5, "within_variance": [0.2, float("nan"), 0.0]}, "within_variance"),
    ):
        with pytest.raises(IngestError) as exc:
            parse_columnar([0.2, 0.4, 1.0], **kwargs)
        assert exc.value.errors[0].field == field, kwargs
    with pytest.raises(IngestError) as exc:
        parse_columnar([0.2, 1.2], samples=5)
    assert exc.value.errors[0].field == "correct"

    p = parse_csv("item_id,correct,samples,within_variance\na,0.5,4,0.3333\nb,0.25,4,0.25\n")
    assert p.samples == 4 and p.within_variance.tolist() == pytest.approx([0.3333, 0.25])
    with pytest.raises(IngestError) as exc:
        parse_csv("item_id,correct,samples\na,0.5,4\nb,0.2,5\nc,1,0\n")
    got = [(e.line, e.field) for e in exc.value.errors]
    assert got == [(3, "samples"), (4, "samples")]


def test_lm_eval_config_fields_and_fingerprint() -> None:
    cfg = parse_lm_eval_config(RESULTS.read_bytes(), tasks=["arc_easy"], metric="acc")
    assert cfg == {
        "harness_version": "0.4.3",
        "task_version": 1.0,
        "task_hash": "6f1ca5b08e0a3a2f9d8f0a8c5c1e2b7d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b",
        "num_fewshot": 0,
        "metric": "acc",
        "repeats": 1,
        "chat_template_applied": False,
        "fewshot_as_multiturn": False,
        "model_args": {"dtype": "bfloat16", "trust_remote_code": "True"},
    }  # no filter_list in the task config: filter unknown, left out
    assert list(cfg) == [k for k in CONFIG_FIELDS if k in cfg]
    canon = json.dumps(cfg, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert config_fingerprint(cfg) == hashlib.sha256(canon.encode()).hexdigest()

    obj = json.loads(RESULTS.read_text())
    other = copy.deepcopy(obj)  # another model, another batch size and device: same config
    other["config"]["model_args"] = (
        "pretrained=other/model-13b,trust_remote_code=True,dtype=bfloat16"
    )
    other["config"]["batch_size"] = 8
    other["model_name"] = "other/model-13b"
    cfg2 = parse_lm_eval_config(json.dumps(other), tasks=["arc_easy"], metric="acc")
    assert cfg2 == cfg and config_fingerprint(cfg2) == config_fingerprint(cfg)
    shot = copy.deepcopy(obj)
    shot["n-shot"]["arc_easy"] = 5
    shot["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    cfg3 = parse_lm_eval_config(shot, tasks=["arc_easy"], metric="acc")
    assert cfg3["num_fewshot"] == 5 and cfg3["chat_template_applied"] is True
    sha = hashlib.sha256(shot["chat_template"].encode()).hexdigest()
    assert cfg3["chat_template_sha"] == sha
    assert config_fingerprint(cfg3) != config_fingerprint(cfg)
    assert config_fingerprint({}) is None and config_fingerprint(None) is None
    with pytest.raises(IngestError):
        parse_lm_eval_config(b'{"model": "m", "correct": [1]}')
