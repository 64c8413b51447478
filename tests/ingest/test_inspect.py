"""Inspect AI logs written by inspect-ai itself, checked against inspect-ai's own reader."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import zstandard

from app.ingest.logs.archive import BoundedZip
from app.ingest.logs.inspect import parse_inspect_log, score_to_float
from app.ingest.types import AmbiguousChoiceError, IngestError
from tests.support.inspect_logs import zip_bytes, zstd_member

inspect_log = pytest.importorskip("inspect_ai.log")
inspect_scorer = pytest.importorskip("inspect_ai.scorer")

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "inspect" / "logs"
EVAL_LOGS = sorted((LOGS / "eval").glob("*.eval"))
JSON_LOGS = sorted((LOGS / "json").glob("*.json"))
SCORERS = {"arith": ["match"], "arith3": ["match"], "graded": ["partial", "closeness"]}


def _expected(path: Path, scorer: str) -> dict:
    """What inspect-ai's reader says: per item (task/id), the mapped score of every epoch that
    neither errored nor hit a limit, and the summed usage of all its samples."""
    log = inspect_log.read_eval_log(str(path))
    to_float = inspect_scorer.value_to_float()
    task, k = log.eval.task, log.eval.config.epochs or 1
    items: dict[str, dict] = {}
    for s in log.samples:
        item = items.setdefault(
            f"{task}/{s.id}", {"values": [], "tin": 0.0, "tout": 0.0, "usd": 0.0, "sec": 0.0}
        )
        for u in s.model_usage.values():
            item["tin"] += u.input_tokens
            item["tout"] += u.output_tokens
            item["usd"] += u.total_cost
        item["sec"] += s.working_time
        if s.error is None and s.limit is None:
            item["values"].append(to_float(s.scores[scorer].value))
    return {"task": task, "model": log.eval.model, "k": k, "items": items}


def _check(parsed, expected) -> None:
    items = {i: v for i, v in expected["items"].items() if v["values"]}
    assert parsed.model == expected["model"] and parsed.task == expected["task"]
    assert parsed.item_ids.tolist() == list(items)
    means = [float(np.mean(v["values"])) for v in items.values()]
    np.testing.assert_allclose(parsed.correct.astype(float), means, rtol=1e-6)
    counts = [len(v["values"]) for v in items.values()]
    k = expected["k"]
    assert parsed.k == k
    if k == 1:
        assert parsed.sample_counts is None and parsed.within_variance is None
    else:
        assert parsed.sample_counts.tolist() == counts
        var = [float(np.var(v["values"], ddof=1)) for v in items.values()]
        np.testing.assert_allclose(parsed.within_variance, var, rtol=1e-5, atol=1e-7)
    costs = parsed.costs
    for name, key in (("input_tokens", "tin"), ("output_tokens", "tout"), ("usd", "usd")):
        np.testing.assert_allclose(getattr(costs, name), [v[key] for v in items.values()])
    np.testing.assert_allclose(costs.seconds, [v["sec"] for v in items.values()], rtol=1e-9)
    assert "inspect model_usage" in costs.source


@pytest.mark.parametrize("path", EVAL_LOGS + JSON_LOGS, ids=lambda p: p.name)
def test_every_value_matches_inspects_reader(path):
    task = path.stem.rsplit("_", 1)[0]
    for scorer in SCORERS[task]:
        metric = scorer if len(SCORERS[task]) > 1 else None
        parsed = parse_inspect_log(path.read_bytes(), metric=metric, filename=path.name)
        _check(parsed, _expected(path, scorer))
        assert parsed.metric == scorer and parsed.source_format == "inspect"


def test_fixtures_cover_what_the_issue_asks():
    models = {p.stem.rsplit("_", 1)[1] for p in EVAL_LOGS}
    assert models == {"alpha", "beta", "gamma"} and JSON_LOGS
    graded = parse_inspect_log((LOGS / "eval" / "graded_beta.eval").read_bytes(), metric="partial")
    assert 0.5 in graded.correct.tolist() and not graded.binary  # a P score is 0.5
    arith3 = parse_inspect_log((LOGS / "eval" / "arith3_alpha.eval").read_bytes())
    # q2 errored once, q5 hit a limit once: 2 samples behind each, not a 0 among 3
    assert arith3.sample_counts.tolist() == [3, 3, 2, 3, 3, 2, 3, 3]
    assert arith3.samples == 3 and any(n.startswith("2 sample(s) errored") for n in arith3.notes)


def test_several_scorers_need_a_choice_listing_them():
    with pytest.raises(AmbiguousChoiceError) as exc:
        parse_inspect_log((LOGS / "eval" / "graded_alpha.eval").read_bytes())
    assert exc.value.choices == {"metric": ["partial", "closeness"]}
    with pytest.raises(IngestError, match=r"no scorer .acc.*partial, closeness"):
        parse_inspect_log((LOGS / "eval" / "graded_alpha.eval").read_bytes(), metric="acc")


def _rewrite(path: Path, drop=(), keep_only=None) -> bytes:
    """The archive with some members left out (recompressed with zstd as Inspect does)."""
    src = BoundedZip(path.read_bytes())
    return zip_bytes(
        [
            zstd_member(name, src.read(name))
            for name in src.names()
            if name not in drop and (keep_only is None or keep_only(name))
        ]
    )


@pytest.mark.parametrize("path", EVAL_LOGS[:4], ids=lambda p: p.name)
def test_fast_path_reads_no_sample_member_and_full_path_agrees(path):
    full = parse_inspect_log(path.read_bytes(), metric=None)
    no_samples = _rewrite(path, keep_only=lambda n: not n.startswith("samples/"))
    fast = parse_inspect_log(no_samples)
    no_summaries = _rewrite(
        path, keep_only=lambda n: n != "summaries.json" and not n.startswith("_journal/summ")
    )
    slow = parse_inspect_log(no_summaries)
    journal_only = _rewrite(path, drop=("summaries.json", "header.json"))
    journal = parse_inspect_log(journal_only)
    for other in (fast, slow, journal):
        assert other.item_ids.tolist() == full.item_ids.tolist()
        np.testing.assert_array_equal(other.correct, full.correct)
        np.testing.assert_allclose(other.costs.usd, full.costs.usd)


def test_score_mapping_is_inspects_value_to_float():
    to_float = inspect_scorer.value_to_float()
    for value in ["C", "I", "P", "N", True, False, 0, 1, 0.25, "yes", "No", "TRUE", "0.75", "1"]:
        assert score_to_float(value) == to_float(value), value
    # where Inspect warns and returns 0, benchslice refuses (None), never a silent 0
    for value in ["maybe", [1, 0], {"a": 1}, None, "nan", "inf"]:
        assert score_to_float(value) is None, value


def test_zstd_bomb_is_refused_from_the_headers_before_inflating():
    data = zip_bytes([zstd_member("header.json", b" " * (8 << 20))])  # 8 MiB of spaces
    assert len(data) < 4096
    with pytest.raises(IngestError, match="declares 8388608 bytes") as exc:
        BoundedZip(data, max_member_bytes=1 << 20).read("header.json")
    assert exc.value.errors[0].field == "header.json"


def test_lying_headers_are_stopped_by_the_streaming_cap():
    big = b" " * (8 << 20)
    # the central directory says 100 bytes; the frame header says 8 MiB
    lying = zip_bytes([zstd_member("header.json", big, declared=100)])
    with pytest.raises(IngestError, match="zstd frame declares 8388608"):
        BoundedZip(lying, max_member_bytes=1 << 20).read("header.json")
    # a streamed frame declares no size at all: only the streaming cap can stop it
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(big)
    assert zstandard.frame_content_size(streamed) == -1
    sneaky = zip_bytes([zstd_member("header.json", big, declared=100, frame=streamed)])
    with pytest.raises(IngestError, match="past the limit of 1048576") as exc:
        BoundedZip(sneaky, max_member_bytes=1 << 20).read("header.json")
    assert exc.value.errors[0].field == "header.json"
    # and the per-upload total holds across members
    many = zip_bytes([zstd_member(f"m{i}", b"x" * 600_000) for i in range(3)])
    archive = BoundedZip(many, max_member_bytes=1 << 20, max_total_bytes=1 << 20)
    archive.read("m0")
    with pytest.raises(IngestError, match="limit is 448576") as exc:
        archive.read("m1")
    assert exc.value.errors[0].field == "m1"


def test_nan_free_costs():
    parsed = parse_inspect_log((LOGS / "json" / "arith3_alpha.json").read_bytes())
    assert all(math.isfinite(x) for x in parsed.costs.usd)


def test_fast_path_opens_no_sample_member() -> None:
    """Every samples/… member replaced by bytes that are not zstd: had the fast path opened
    one, the parse would fail."""
    path = LOGS / "eval" / "arith3_gamma.eval"
    src = BoundedZip(path.read_bytes())
    members = [
        (n, b"poison", 93, 0, 64) if n.startswith("samples/") else zstd_member(n, src.read(n))
        for n in src.names()
    ]
    assert sum(m[1] == b"poison" for m in members) == 24
    poisoned = parse_inspect_log(zip_bytes(members))
    np.testing.assert_array_equal(poisoned.correct, parse_inspect_log(path.read_bytes()).correct)
