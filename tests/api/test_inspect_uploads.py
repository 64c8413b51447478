"""Inspect AI logs through the real API: stored values against inspect-ai's own reader, and 50+
hostile or broken logs that each get one 4xx naming the member and field, storing nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import BenchmarkVersion, LanguageModel, ModelResult
from app.ingest.logs.archive import BoundedZip
from tests.support.inspect_logs import zip_bytes, zstd_member

inspect_log = pytest.importorskip("inspect_ai.log")
inspect_scorer = pytest.importorskip("inspect_ai.scorer")

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "inspect" / "logs"
ARITH = LOGS / "eval" / "arith_alpha.eval"
ARITH_JSON = LOGS / "json" / "arith_alpha.json"


def _count(session: Session, model: type = ModelResult) -> int:
    return session.scalar(select(func.count()).select_from(model))


def _files(*named: tuple[str, bytes]) -> list:
    return [("file", (name, data, "application/octet-stream")) for name, data in named]


def _create(client: TestClient, name: str, *paths: Path) -> dict:
    r = client.post(
        "/v1/benchmarks/from-samples",
        params={"name": name},
        files=_files(*((p.name, p.read_bytes()) for p in paths)),
    )
    assert r.status_code == 201, r.text
    return r.json()


def _matrix(client: TestClient, bench_id: str) -> dict[str, np.ndarray]:
    r = client.get(f"/v1/benchmarks/{bench_id}/matrix")
    assert r.status_code == 200, r.text
    with np.load(io.BytesIO(r.content), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _reader_means(path: Path, scorer: str) -> dict[str, float]:
    """Per item, inspect-ai's reader: the mean mapped score over epochs that neither errored nor
    hit a limit."""
    log = inspect_log.read_eval_log(str(path))
    to_float = inspect_scorer.value_to_float()
    values: dict[str, list[float]] = {}
    for s in log.samples:
        if s.error is None and s.limit is None:
            values.setdefault(f"{log.eval.task}/{s.id}", []).append(
                to_float(s.scores[scorer].value)
            )
    return {k: float(np.mean(v)) for k, v in values.items()}


def test_eval_and_json_logs_store_what_inspects_reader_reads(client: TestClient) -> None:
    bench = _create(client, "insp-arith", ARITH)
    assert bench["n_items"] == 8
    url = f"/v1/benchmarks/{bench['id']}/results"
    stored = {}
    for model in ("alpha", "beta", "gamma"):
        path = LOGS / "eval" / f"arith_{model}.eval"
        r = client.post(url, files=_files((path.name, path.read_bytes())))
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["model"]["name"] == f"mockllm/{model}" and body["n_items"] == 8
        stored[f"mockllm/{model}"] = _reader_means(path, "match")
    # the JSON log of alpha is another run with the same answers: the same scores, other
    # costs (working time), so it differs from what is stored (409) and replaces it on request
    r = client.post(url, files=_files((ARITH_JSON.name, ARITH_JSON.read_bytes())))
    assert r.status_code == 409, r.text
    r = client.post(
        url, params={"replace": "true"}, files=_files((ARITH_JSON.name, ARITH_JSON.read_bytes()))
    )
    assert r.status_code == 200 and r.json()["status"] == "replaced", r.text
    assert r.json()["accuracy"] == pytest.approx(np.mean(list(stored["mockllm/alpha"].values())))
    m = _matrix(client, bench["id"])
    assert m["item_ids"].tolist() == [f"arith/q{k}" for k in range(8)]
    assert set(m["subtasks"].tolist()) == {"arith"}
    for row, name in enumerate(m["models"].tolist()):
        expected = [stored[name][i] for i in m["item_ids"].tolist()]
        np.testing.assert_array_equal(m["correct"][row], expected)


def test_several_tasks_scorer_choice_epochs_and_model_override(client: TestClient) -> None:
    graded = LOGS / "eval" / "graded_gamma.eval"
    bench = _create(client, "insp-two", ARITH, graded)
    assert bench["n_items"] == 16
    url = f"/v1/benchmarks/{bench['id']}/results"
    files = _files(
        *((p.name, p.read_bytes()) for p in (LOGS / "eval" / "arith_gamma.eval", graded))
    )
    ambiguous = client.post(url, files=files)
    assert ambiguous.status_code == 422
    err = ambiguous.json()["errors"][0]
    assert err["loc"] == ["query", "metric"] and "partial, closeness" in err["message"]
    # one scorer per log: a comma-separated list, each log taking the one it has
    r = client.post(url, files=files, params={"metric": "match,closeness", "model": "team/renamed"})
    assert r.status_code == 201, r.text
    assert r.json()["model"]["name"] == "team/renamed" and not r.json()["binary"]
    m = _matrix(client, bench["id"])
    expected = _reader_means(LOGS / "eval" / "arith_gamma.eval", "match") | _reader_means(
        graded, "closeness"
    )
    np.testing.assert_allclose(
        m["correct"][0], [expected[i] for i in m["item_ids"].tolist()], rtol=1e-6
    )
    # three epochs: the mean of the epochs that neither errored nor hit a limit
    three = LOGS / "eval" / "arith3_beta.eval"
    b3 = _create(client, "insp-three", three)
    r = client.post(
        f"/v1/benchmarks/{b3['id']}/results", files=_files((three.name, three.read_bytes()))
    )
    assert r.status_code == 201, r.text
    means = _reader_means(three, "match")
    assert r.json()["accuracy"] == pytest.approx(float(np.mean(list(means.values()))), abs=1e-6)


def test_format_override_reads_a_log_with_no_telling_name(client: TestClient) -> None:
    bench = _create(client, "insp-fmt", ARITH)
    url = f"/v1/benchmarks/{bench['id']}/results"
    data = ARITH_JSON.read_bytes()
    r = client.post(url, params={"format": "inspect"}, files=_files(("log.txt", data)))
    assert r.status_code == 201, r.text
    r = client.post(url, params={"format": "csv", "model": "x/y"}, files=_files(("log.json", data)))
    assert r.status_code == 422  # read as CSV, it is not one


# --- hostile and broken logs ---------------------------------------------------------------


def _members(path: Path = ARITH) -> dict[str, bytes]:
    z = BoundedZip(path.read_bytes())
    return {n: z.read(n) for n in z.names()}


def _eval(members: dict[str, bytes]) -> bytes:
    return zip_bytes([zstd_member(n, d) for n, d in members.items()])


def _edit(member: str, change: Callable[[object], object], path: Path = ARITH) -> bytes:
    members = _members(path)
    members[member] = orjson.dumps(change(orjson.loads(members[member])))
    return _eval(members)


def _summary(index: int, **fields) -> Callable[[list], list]:
    def change(rows: list) -> list:
        rows[index].update(fields)
        return rows

    return change


def _drop_score(index: int) -> Callable[[list], list]:
    def change(rows: list) -> list:
        rows[index]["scores"].pop("match")
        return rows

    return change


def _json_edit(change: Callable[[dict], object]) -> bytes:
    log = json.loads(ARITH_JSON.read_text())
    out = change(log)
    return json.dumps(log if out is None else out).encode()


def _json_sample(index: int, **fields) -> Callable[[dict], None]:
    def change(log: dict) -> None:
        log["samples"][index].update(fields)

    return change


def _score(value) -> dict:
    return {"match": {"value": value}}


def _raw_member(name: str, payload: bytes, method: int = 93, crc: int = 0, size: int = 10):
    import zlib

    members = _members()
    entries = [zstd_member(n, d) for n, d in members.items() if n != name]
    data = members[name]
    return zip_bytes(
        [*entries, (name, payload, method, crc or zlib.crc32(data), size or len(data))]
    )


def _wrong_method(method: int) -> bytes:
    import zstandard

    data = _members()["header.json"]
    return _raw_member(
        "header.json", zstandard.ZstdCompressor().compress(data), method, size=len(data)
    )


def _bomb(streamed: bool) -> bytes:
    import zstandard

    big = b" " * (200 << 20)  # 200 MiB of spaces, a few KiB compressed
    frame = zstandard.ZstdCompressor(write_content_size=not streamed).compress(big)
    members = _members()
    entries = [zstd_member(n, d) for n, d in members.items() if n != "summaries.json"]
    return zip_bytes([*entries, zstd_member("summaries.json", big[:10], declared=10, frame=frame)])


def _truncated(fraction: float) -> bytes:
    data = ARITH.read_bytes()
    return data[: int(len(data) * fraction)]


def _without(*names: str) -> bytes:
    return _eval(
        {
            n: d
            for n, d in _members().items()
            if n not in names and not any(n.startswith(p) for p in names if p.endswith("/"))
        }
    )


SUMMARIES = "summaries.json"
HEADER = "header.json"


def _zip_of_logs(*paths: Path) -> bytes:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for p in paths or (ARITH,):
            z.write(p, f"logs/{p.name}")
    return out.getvalue()


# (case id, upload parts, query, expected status, text the problem must name)
CASES: list[tuple[str, Callable[[], list[tuple[str, bytes]]], dict, int, str]] = [
    ("truncated-half", lambda: [("a.eval", _truncated(0.5))], {}, 422, "file"),
    ("truncated-head", lambda: [("a.eval", ARITH.read_bytes()[:30])], {}, 422, "file"),
    ("truncated-tail", lambda: [("a.eval", ARITH.read_bytes()[:-12])], {}, 422, "file"),
    ("deflate-label-on-zstd", lambda: [("a.eval", _wrong_method(8))], {}, 422, HEADER),
    ("bzip2-method", lambda: [("a.eval", _wrong_method(12))], {}, 422, HEADER),
    ("stored-label-on-zstd", lambda: [("a.eval", _wrong_method(0))], {}, 422, HEADER),
    (
        "crc-mismatch",
        lambda: [
            (
                "a.eval",
                _raw_member(
                    HEADER,
                    __import__("zstandard").ZstdCompressor().compress(_members()[HEADER]),
                    crc=1,
                    size=0,
                ),
            )
        ],
        {},
        422,
        HEADER,
    ),
    (
        "not-zstd-payload",
        lambda: [("a.eval", _raw_member(HEADER, b"garbage!" * 8, size=0))],
        {},
        422,
        HEADER,
    ),
    ("no-header-no-start", lambda: [("a.eval", _without(HEADER, "_journal/"))], {}, 422, HEADER),
    (
        "no-summaries-no-samples",
        lambda: [("a.eval", _without(SUMMARIES, "_journal/", "samples/"))],
        {},
        422,
        "samples",
    ),
    ("empty-zip", lambda: [("a.eval", zip_bytes([]))], {}, 422, HEADER),
    (
        "header-not-json",
        lambda: [("a.eval", _eval(_members() | {HEADER: b"{not json"}))],
        {},
        422,
        HEADER,
    ),
    ("header-a-list", lambda: [("a.eval", _edit(HEADER, lambda h: [h]))], {}, 422, HEADER),
    (
        "header-no-eval",
        lambda: [("a.eval", _edit(HEADER, lambda h: {**h, "eval": None}))],
        {},
        422,
        "header.json:eval",
    ),
    (
        "header-no-task",
        lambda: [("a.eval", _edit(HEADER, lambda h: {**h, "eval": {**h["eval"], "task": None}}))],
        {},
        422,
        "eval.task",
    ),
    (
        "header-empty-model",
        lambda: [("a.eval", _edit(HEADER, lambda h: {**h, "eval": {**h["eval"], "model": " "}}))],
        {},
        422,
        "eval.model",
    ),
    (
        "header-bad-model-name",
        lambda: [
            ("a.eval", _edit(HEADER, lambda h: {**h, "eval": {**h["eval"], "model": "a\x00b"}}))
        ],
        {},
        422,
        "model",
    ),
    (
        "summaries-not-json",
        lambda: [("a.eval", _eval(_members() | {SUMMARIES: b"[{"}))],
        {},
        422,
        SUMMARIES,
    ),
    (
        "summaries-an-object",
        lambda: [("a.eval", _edit(SUMMARIES, lambda r: {"rows": r}))],
        {},
        422,
        SUMMARIES,
    ),
    ("summaries-empty", lambda: [("a.eval", _edit(SUMMARIES, lambda r: []))], {}, 422, "samples"),
    (
        "summary-not-object",
        lambda: [("a.eval", _edit(SUMMARIES, lambda r: [*r[:3], 5, *r[4:]]))],
        {},
        422,
        "summaries.json[3]",
    ),
    (
        "summary-no-id",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, id=None)))],
        {},
        422,
        "summaries.json[2].id",
    ),
    (
        "summary-bool-id",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, id=True)))],
        {},
        422,
        "summaries.json[2].id",
    ),
    (
        "summary-float-id",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(4, id=1.5)))],
        {},
        422,
        "summaries.json[4].id",
    ),
    (
        "epoch-zero",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(1, epoch=0)))],
        {},
        422,
        "summaries.json[1].epoch",
    ),
    (
        "epoch-string",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(1, epoch="2")))],
        {},
        422,
        "summaries.json[1].epoch",
    ),
    (
        "epoch-past-declared",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(5, epoch=4)))],
        {},
        422,
        "summaries.json[5].epoch",
    ),
    (
        "duplicated-sample-id",
        lambda: [("a.eval", _edit(SUMMARIES, lambda r: [*r, r[3]]))],
        {},
        422,
        "summaries.json[8].id",
    ),
    (
        "same-id-int-and-str",
        lambda: [("a.eval", _edit(SUMMARIES, lambda r: [*r[:1], {**r[1], "id": "q0"}, *r[2:]]))],
        {},
        422,
        "summaries.json[1].id",
    ),
    (
        "scorer-absent-from-a-sample",
        lambda: [("a.eval", _edit(SUMMARIES, _drop_score(6)))],
        {},
        422,
        "summaries.json[6].scores.match.value",
    ),
    (
        "scores-null",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(0, scores=None)))],
        {},
        422,
        "summaries.json[0].scores.match.value",
    ),
    (
        "score-nan-string",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(1, scores=_score("nan"))))],
        {},
        422,
        "summaries.json[1].scores.match.value",
    ),
    (
        "score-inf-string",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(1, scores=_score("inf"))))],
        {},
        422,
        "summaries.json[1].scores.match.value",
    ),
    (
        "score-nan-literal",
        lambda: [
            (
                "a.eval",
                _eval(
                    _members()
                    | {SUMMARIES: _members()[SUMMARIES].replace(b'"value":"C"', b'"value":NaN', 1)}
                ),
            )
        ],
        {},
        422,
        SUMMARIES,
    ),
    (
        "score-above-one",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score(2.0))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "score-negative",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score(-1))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "score-a-list",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score([1, 0]))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "score-a-dict",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score({"a": 1}))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "score-unknown-word",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score("maybe"))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "score-null",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(2, scores=_score(None))))],
        {},
        422,
        "summaries.json[2].scores.match.value",
    ),
    (
        "usage-not-object",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(3, model_usage=[1])))],
        {},
        422,
        "summaries.json[3].model_usage",
    ),
    (
        "usage-negative-tokens",
        lambda: [
            ("a.eval", _edit(SUMMARIES, _summary(3, model_usage={"m": {"input_tokens": -5}})))
        ],
        {},
        422,
        "summaries.json[3].model_usage.m.input_tokens",
    ),
    (
        "usage-cost-text",
        lambda: [
            ("a.eval", _edit(SUMMARIES, _summary(3, model_usage={"m": {"total_cost": "abc"}})))
        ],
        {},
        422,
        "summaries.json[3].model_usage.m.total_cost",
    ),
    (
        "working-time-negative",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(4, working_time=-1.0)))],
        {},
        422,
        "summaries.json[4].working_time",
    ),
    (
        "working-time-text",
        lambda: [("a.eval", _edit(SUMMARIES, _summary(4, working_time="1s")))],
        {},
        422,
        "summaries.json[4].working_time",
    ),
    (
        "every-sample-errored",
        lambda: [("a.eval", _edit(SUMMARIES, lambda r: [{**x, "error": "boom"} for x in r]))],
        {},
        422,
        "samples",
    ),
    (
        "unknown-scorer-asked",
        lambda: [("a.eval", ARITH.read_bytes())],
        {"metric": "acc"},
        422,
        "metric",
    ),
    (
        "several-scorers-unchosen",
        lambda: [("g.eval", (LOGS / "eval" / "graded_alpha.eval").read_bytes())],
        {},
        422,
        "metric",
    ),
    ("huge-member-declared", lambda: [("a.eval", _bomb(streamed=False))], {}, 422, SUMMARIES),
    ("huge-member-streamed", lambda: [("a.eval", _bomb(streamed=True))], {}, 422, SUMMARIES),
    (
        "mixed-models",
        lambda: [(p.name, p.read_bytes()) for p in (ARITH, LOGS / "eval" / "arith_beta.eval")],
        {},
        422,
        "eval.model",
    ),
    (
        "same-log-twice",
        lambda: [("a.eval", ARITH.read_bytes()), ("b.json", ARITH_JSON.read_bytes())],
        {},
        422,
        "item_ids",
    ),
    (
        "json-truncated",
        lambda: [("a.json", ARITH_JSON.read_bytes()[:5000])],
        {"format": "inspect"},
        422,
        "file",
    ),
    (
        "json-no-samples",
        lambda: [("a.json", _json_edit(lambda log: log.pop("samples") and None))],
        {},
        422,
        "samples",
    ),
    (
        "json-samples-object",
        lambda: [("a.json", _json_edit(lambda log: {**log, "samples": {}}))],
        {},
        422,
        "samples",
    ),
    (
        "json-no-model",
        lambda: [("a.json", _json_edit(lambda log: log["eval"].pop("model") and None))],
        {},
        422,
        "eval.model",
    ),
    (
        "json-duplicate-sample",
        lambda: [
            (
                "a.json",
                _json_edit(lambda log: {**log, "samples": [*log["samples"], log["samples"][0]]}),
            )
        ],
        {},
        422,
        "samples[8].id",
    ),
    (
        "json-score-nan",
        lambda: [("a.json", _json_edit(_json_sample(2, scores=_score("NaN"))))],
        {},
        422,
        "samples[2].scores.match.value",
    ),
    (
        "json-scorer-absent",
        lambda: [("a.json", _json_edit(_json_sample(5, scores={})))],
        {},
        422,
        "samples[5].scores.match.value",
    ),
    (
        "another-tasks-log",
        lambda: [("g.eval", (LOGS / "eval" / "graded_alpha.eval").read_bytes())],
        {"metric": "partial"},
        422,
        "item",
    ),
]


def test_there_are_at_least_fifty_hostile_logs() -> None:
    assert len(CASES) >= 50 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("case", "parts", "query", "status", "names"), CASES, ids=[c[0] for c in CASES]
)
def test_hostile_log_is_one_4xx_naming_member_and_field_and_stores_nothing(
    client: TestClient, db_session: Session, case, parts, query, status, names
) -> None:
    bench = _create(client, f"hostile-{case}", ARITH)
    before = (
        _count(db_session),
        _count(db_session, LanguageModel),
        _count(db_session, BenchmarkVersion),
    )
    r = client.post(f"/v1/benchmarks/{bench['id']}/results", params=query, files=_files(*parts()))
    assert r.status_code == status, r.text
    problem = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert names in json.dumps(problem["errors"]) or names in problem["detail"], problem
    db_session.expire_all()
    after = (
        _count(db_session),
        _count(db_session, LanguageModel),
        _count(db_session, BenchmarkVersion),
    )
    assert after == before


EEE = Path(__file__).resolve().parents[1] / "fixtures" / "eee"


def test_every_eval_ever_sidecar_through_the_api(client: TestClient) -> None:
    expected = json.loads((EEE / "expected.json").read_text())
    (name,) = [n for n in expected if "/graded/" in n]
    sidecar = EEE / name
    bench = _create(client, "eee-graded", sidecar)
    assert bench["n_items"] == 8
    url = f"/v1/benchmarks/{bench['id']}/results"
    ambiguous = client.post(url, files=_files((sidecar.name, sidecar.read_bytes())))
    assert ambiguous.status_code == 422
    assert "partial:mean, closeness:mean" in ambiguous.json()["errors"][0]["message"]
    r = client.post(
        url, params={"metric": "closeness:mean"}, files=_files((sidecar.name, sidecar.read_bytes()))
    )
    assert r.status_code == 201, r.text
    assert r.json()["model"]["name"] == "mockllm/mockllm"
    rows = [x for x in expected[name] if x["evaluation_result_id"] == "closeness:mean"]
    m = _matrix(client, bench["id"])
    want = {f"graded/{x['sample_id']}": x["score"] for x in rows}
    np.testing.assert_allclose(
        m["correct"][0], [want[i] for i in m["item_ids"].tolist()], rtol=1e-6
    )


def test_a_zip_of_logs_uploads_like_its_files(client: TestClient) -> None:
    graded = LOGS / "eval" / "graded_gamma.eval"
    arith = LOGS / "eval" / "arith_gamma.eval"
    bench = _create(client, "zip-two", arith, graded)
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results",
        params={"metric": "match,partial"},
        files=[("file", ("logs.zip", _zip_of_logs(arith, graded), "application/zip"))],
    )
    assert r.status_code == 201, r.text
    assert r.json()["n_items"] == 16 and r.json()["model"]["name"] == "mockllm/gamma"


HELM_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "helm" / "runs"


def test_helm_run_through_the_api(client: TestClient) -> None:
    run = HELM_RUNS / "simple1:model=simple_model1"
    files = [
        ("file", (f"{run.name}/{n}", (run / n).read_bytes(), "application/json"))
        for n in ("per_instance_stats.json", "run_spec.json")
    ]
    r = client.post("/v1/benchmarks/from-samples", params={"name": "helm-simple1"}, files=files)
    assert r.status_code == 201, r.text
    bench = r.json()
    assert bench["n_items"] == 10
    url = f"/v1/benchmarks/{bench['id']}/results"
    ambiguous = client.post(url, files=files)
    assert ambiguous.status_code == 422 and "max_prob" in ambiguous.json()["errors"][0]["message"]
    r = client.post(url, params={"metric": "max_prob"}, files=files)
    assert r.status_code == 201, r.text
    assert r.json()["model"]["name"] == "simple/model1"
    want = json.loads((HELM_RUNS.parent / "expected.json").read_text())[run.name]["entries"]
    mean = float(np.mean([e["means"]["max_prob"] for e in want]))  # 10 items x 3 trials
    assert r.json()["accuracy"] == pytest.approx(mean, abs=1e-6)


def test_helm_perturbation_run_through_the_api(client: TestClient) -> None:
    """helm-run's data_augmentation=extra_space run: each perturbed copy is an item of its own."""
    run = (
        HELM_RUNS
        / "simple1:model=simple_model1,max_eval_instances=2,data_augmentation=extra_space2"
    )
    files = [
        ("file", (f"{run.name}/{n}", (run / n).read_bytes(), "application/json"))
        for n in ("per_instance_stats.json", "run_spec.json")
    ]
    r = client.post("/v1/benchmarks/from-samples", params={"name": "helm-space"}, files=files)
    assert r.status_code == 201, r.text
    bench = r.json()
    assert bench["n_items"] == 4
    r = client.post(
        f"/v1/benchmarks/{bench['id']}/results", params={"metric": "max_prob"}, files=files
    )
    assert r.status_code == 201, r.text
    assert r.json()["model"]["name"] == "simple/model1" and r.json()["n_items"] == 4
    want = json.loads((HELM_RUNS.parent / "expected.json").read_text())[run.name]
    task = "simple1:max_eval_instances=2,data_augmentation=extra_space2"
    means: dict[str, list[float]] = {}
    for e in want["entries"]:
        key = f"{task}/{e['instance_id']}" + (f"@{e['perturbation']}" if e["perturbation"] else "")
        means.setdefault(key, []).append(e["means"]["max_prob"])
    m = _matrix(client, bench["id"])
    assert sorted(m["item_ids"].tolist()) == sorted(means)
    assert sum("@extra_space" in i for i in m["item_ids"].tolist()) == 2
    np.testing.assert_allclose(
        m["correct"][0], [np.mean(means[i]) for i in m["item_ids"].tolist()], rtol=1e-6
    )
