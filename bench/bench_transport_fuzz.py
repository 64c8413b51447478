"""Fuzz every upload format and the read routes' query parameters (issue 39): 0 answers >= 500.

Stack: the real service as the tests start it (tests/support/stack.py): two API processes
(``uvicorn --workers 2``), one Celery worker, a scratch database on the suite's Postgres, the
shared Redis under a private prefix, keys on. Data: a synthetic 40-item benchmark with 12
models (``tests.support.stack.seed``; labelled synthetic).

Each request is drawn from a seeded generator (``--seed``): a results upload in one of the
formats (``.npz`` matrix, parquet details, lm-eval JSONL, CSV, JSON, multipart of several
files; and the log formats: Inspect ``.eval`` archives and JSON logs, Every Eval Ever
sidecars, HELM runs, zips of logs, each from the fixtures under ``tests/fixtures``), first built
valid and then mutated (byte flips, truncation, crafted ``.npy`` headers and shapes, JSON leaves
and subtrees replaced or nested deep, archive members mutated, dropped or lying about their
sizes, extreme numbers, odd names, wrong media types), or a GET of a read
route with random query values (leaderboard, verdict, items, results, audit). Reported: the
status counts, every answer >= 500 (kind, status, body head; the inputs are saved under
``--save``), the requests per second. Target: 0 answers >= 500 in >= 10,000 requests.

Usage: .venv/bin/python bench/bench_transport_fuzz.py [--requests 10000] [--seed 0]
       [--concurrency 4] [--save /tmp/fuzz-500s]
Bounded: loopback only; every request times out after 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from numpy.lib import format as npy_format  # noqa: E402

from tests.support.procs import migrated_database  # noqa: E402
from tests.support.stack import Seeded, create_key, running_stack, seed  # noqa: E402

ADMIN_URL = os.environ.get(
    "TEST_ADMIN_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WEIRD_NUMBERS = [0, -1, 1, 2, 1e300, -1e300, 1e-320, 10**12, 2**63, float("nan"), 0.5, 3]
WEIRD_TEXT = ["", "..", "../x", "a\x00b", "x" * 400, "org/m", "é" * 50, " ", "${x}", "=1+1"]


def _mutate(rng: np.random.Generator, data: bytes) -> bytes:
    how = rng.integers(4)
    if how == 0 or not data:
        return data
    buf = bytearray(data)
    if how == 1:  # flip bytes
        for pos in rng.integers(0, len(buf), size=int(rng.integers(1, 8))):
            buf[pos] = int(rng.integers(256))
        return bytes(buf)
    if how == 2:  # truncate
        return bytes(buf[: int(rng.integers(0, len(buf)))])
    return bytes(buf) + bytes(rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8))


def _npz(rng: np.random.Generator, data: Seeded) -> bytes:
    m, n = int(rng.integers(1, 4)), len(data.item_ids)
    arrays: dict[str, Any] = {
        "correct": rng.random((m, n)).round() if rng.random() < 0.8 else rng.random((m, n + 1)),
        "models": np.array(
            [
                str(rng.choice(WEIRD_TEXT)) if rng.random() < 0.2 else f"fz/m{rng.integers(99)}"
                for _ in range(m)
            ]
        ),
    }
    if rng.random() < 0.3:
        arrays["params_b"] = np.array([float(rng.choice(WEIRD_NUMBERS)) for _ in range(m)])
    if rng.random() < 0.3:
        arrays["item_ids"] = np.array(data.item_ids)
    if rng.random() < 0.2:
        arrays["coverage"] = rng.random((m, n)) < 0.9
    buf = io.BytesIO()
    if rng.random() < 0.25:  # a crafted header: a shape its data does not hold
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
            shape = tuple(int(x) for x in rng.choice([1, 3, 40, 10**6, 10**7], size=2))
            with archive.open("correct.npy", "w") as f:
                npy_format.write_array_header_1_0(
                    f,
                    {
                        "descr": str(rng.choice(["<f8", "|u1", "|O", "<U5"])),
                        "fortran_order": bool(rng.random() < 0.3),
                        "shape": shape,
                    },
                )
                f.write(bytes(int(rng.integers(0, 200))))
            with archive.open("models.npy", "w") as f:
                npy_format.write_array(f, arrays["models"])
        return buf.getvalue()
    np.savez_compressed(buf, **arrays)
    return _mutate(rng, buf.getvalue()) if rng.random() < 0.4 else buf.getvalue()


def _records(rng: np.random.Generator, data: Seeded) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(data.item_ids[: int(rng.integers(1, len(data.item_ids) + 1))]):
        rec: dict[str, Any] = {"doc_id": i, "doc_hash": item, "acc": float(rng.random() < 0.5)}
        if rng.random() < 0.1:
            rec["acc"] = rng.choice(WEIRD_NUMBERS).item()
        if rng.random() < 0.05:
            rec["doc"] = "[" * int(rng.integers(10, 5000)) + "]"
        if rng.random() < 0.05:
            rec["filtered_resps"] = str(rng.choice(WEIRD_TEXT))
        out.append(rec)
    return out


def _jsonl(rng: np.random.Generator, data: Seeded) -> bytes:
    lines = [json.dumps(r) for r in _records(rng, data)]
    if rng.random() < 0.1:
        depth = int(rng.integers(100, 120_000))
        lines.append("[" * depth + "]" * depth)
    body = ("\n".join(lines) + "\n").encode()
    return _mutate(rng, body) if rng.random() < 0.3 else body


def _parquet(rng: np.random.Generator, data: Seeded) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = _records(rng, data)
    table = pa.table({"doc_hash": [r["doc_hash"] for r in recs], "acc": [r["acc"] for r in recs]})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression=str(rng.choice(["snappy", "zstd", "gzip", "none"])))
    return _mutate(rng, buf.getvalue()) if rng.random() < 0.4 else buf.getvalue()


def _csv(rng: np.random.Generator, data: Seeded) -> bytes:
    rows = ["item_id,correct"] + [
        f"{item},{rng.choice(WEIRD_NUMBERS) if rng.random() < 0.1 else int(rng.random() < 0.5)}"
        for item in data.item_ids
    ]
    body = ("\n".join(rows) + "\n").encode()
    return _mutate(rng, body) if rng.random() < 0.3 else body


def _json(rng: np.random.Generator, data: Seeded) -> bytes:
    body: dict[str, Any] = {
        "model": str(rng.choice(WEIRD_TEXT)) if rng.random() < 0.2 else f"fz/j{rng.integers(99)}",
        "correct": [float(rng.random() < 0.5) for _ in data.item_ids],
    }
    if rng.random() < 0.3:
        body["samples"] = rng.choice(WEIRD_NUMBERS).item()
    if rng.random() < 0.2:
        body["params_b"] = rng.choice(WEIRD_NUMBERS).item()
    if rng.random() < 0.2:
        body["tags"] = ["t"] * int(rng.integers(0, 20_000))
    if rng.random() < 0.1:
        body["correct"] = "yes"
    raw = json.dumps(body).encode()
    return _mutate(rng, raw) if rng.random() < 0.3 else raw


# --- the log formats (issue 36): Inspect .eval / JSON logs, Every Eval Ever sidecars, HELM runs --
FIXTURES = ROOT / "tests" / "fixtures"
INSPECT_EVAL = FIXTURES / "inspect" / "logs" / "eval" / "arith_alpha.eval"
INSPECT_JSON = FIXTURES / "inspect" / "logs" / "json" / "arith_alpha.json"
EEE_SIDECAR = next((FIXTURES / "eee" / "converted" / "graded").rglob("*_samples.jsonl"))
HELM_RUN = FIXTURES / "helm" / "runs" / "simple1:model=simple_model1"
WEIRD_JSON: list[Any] = [
    None,
    True,
    "",
    "x" * 5000,
    -1,
    10**30,
    1e308,
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {"c": 1}}},
    "NaN",
    "../x",
    "a\x00b",
]


def _json_mutate(rng: np.random.Generator, doc: Any) -> Any:
    """A few random leaves or subtrees of ``doc`` replaced, deleted or nested deep."""
    for _ in range(int(rng.integers(1, 4))):
        node, parent, key = doc, None, None
        for _depth in range(int(rng.integers(1, 8))):
            if isinstance(node, dict) and node:
                parent, key = node, list(node)[int(rng.integers(len(node)))]
            elif isinstance(node, list) and node:
                parent, key = node, int(rng.integers(len(node)))
            else:
                break
            node = parent[key]
        if parent is None:
            continue
        how = rng.integers(3)
        if how == 0 and isinstance(parent, dict):
            del parent[key]
        elif how == 1:
            depth = int(rng.integers(50, 3000))
            parent[key] = json.loads("[" * depth + "]" * depth)
        else:
            parent[key] = WEIRD_JSON[int(rng.integers(len(WEIRD_JSON)))]
    return doc


def _json_bytes_mutated(rng: np.random.Generator, raw: bytes) -> bytes:
    if rng.random() < 0.5:
        return _mutate(rng, raw)
    try:
        return json.dumps(_json_mutate(rng, json.loads(raw))).encode()
    except (ValueError, RecursionError):
        return _mutate(rng, raw)


def _zip_mutated(rng: np.random.Generator, raw: bytes) -> bytes:
    """A .eval archive: one member's JSON mutated and re-zipped, a member dropped or added, a
    lying zstd member (tests/support/inspect_logs.py: sizes it does not hold), or bytes."""
    how = rng.integers(4)
    if how == 0:
        return _mutate(rng, raw)
    if how == 3:
        from tests.support.inspect_logs import zip_bytes, zstd_member

        declared = int(rng.choice([0, 1, 10**6, 10**9, 2**32 - 1]))
        data = b"{" * int(rng.integers(1, 10**5))
        return zip_bytes([zstd_member("header.json", data, declared=declared)])
    from tests.support.inspect_logs import zip_bytes, zstd_member

    names = list(INSPECT_MEMBERS)
    target = names[int(rng.integers(len(names)))]
    members = []
    for name in names:
        member = INSPECT_MEMBERS[name]
        if name == target:
            if how == 2:
                continue  # a member missing
            member = _json_bytes_mutated(rng, member)
        members.append(zstd_member(name, member))
    if rng.random() < 0.2:
        members.append(zstd_member("samples/extra.json", b"\x00" * int(rng.integers(1, 4096))))
    return zip_bytes(members)


def _inspect_members() -> dict[str, bytes]:
    from app.ingest.logs.archive import BoundedZip

    archive = BoundedZip(INSPECT_EVAL.read_bytes())
    return {name: archive.read(name) for name in archive.names()}


INSPECT_MEMBERS = _inspect_members()


def _log_files(rng: np.random.Generator, kind: str) -> list[tuple[str, tuple[str, bytes, str]]]:
    octet = "application/octet-stream"
    if kind == "inspect_eval":
        data = INSPECT_EVAL.read_bytes()
        data = _zip_mutated(rng, data) if rng.random() < 0.8 else data
        return [("file", (INSPECT_EVAL.name, data, octet))]
    if kind == "inspect_json":
        data = _json_bytes_mutated(rng, INSPECT_JSON.read_bytes())
        return [("file", (INSPECT_JSON.name, data, "application/json"))]
    if kind == "eee":
        lines = EEE_SIDECAR.read_bytes().splitlines()
        rate = 0.0 if rng.random() < 0.4 else 0.1  # some sidecars intact
        lines = [_json_bytes_mutated(rng, line) if rng.random() < rate else line for line in lines]
        return [("file", (EEE_SIDECAR.name, b"\n".join(lines) + b"\n", octet))]
    if kind == "helm":
        files = []
        for name in ("per_instance_stats.json", "run_spec.json"):
            data = (HELM_RUN / name).read_bytes()
            if rng.random() < 0.4:
                data = _json_bytes_mutated(rng, data)
            if rng.random() < 0.9:  # sometimes half a run
                files.append(("file", (f"{HELM_RUN.name}/{name}", data, "application/json")))
        return files or [("file", (f"{HELM_RUN.name}/run_spec.json", b"{}", "application/json"))]
    # a zip of logs, as CI uploads a directory
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for _ in range(int(rng.integers(1, 4))):
            (_, (name, data, _media)), *_ = _log_files(rng, "inspect_eval")
            archive.writestr(f"logs/{rng.integers(99)}-{name}", data)
    data = _mutate(rng, out.getvalue()) if rng.random() < 0.3 else out.getvalue()
    return [("file", ("logs.zip", data, "application/zip"))]


LOG_KINDS = ["inspect_eval", "inspect_json", "eee", "helm", "logs_zip"]
LOG_BENCHMARK = {  # which seeded benchmark (its items) each log kind is uploaded to
    "inspect_eval": "inspect",
    "inspect_json": "inspect",
    "logs_zip": "inspect",
    "eee": "eee",
    "helm": "helm",
}
LOG_RIGHT_METRIC = {  # the metric that makes an intact log of the kind unambiguous
    "inspect_eval": "match",
    "inspect_json": "match",
    "logs_zip": "match",
    "eee": "closeness:mean",
    "helm": "max_prob",
}
LOG_METRICS = [None, "match", "closeness:mean", "partial:mean", "max_prob", "exact_match", "x"]


def seed_logs(client: httpx.Client, prefix: str = "fuzz") -> dict[str, str]:
    """The benchmarks the log kinds are uploaded to, each created from its own fixture log."""
    made = {}
    for name, files, query in (
        ("inspect", [("file", (INSPECT_EVAL.name, INSPECT_EVAL.read_bytes(), "x/y"))], {}),
        ("eee", [("file", (EEE_SIDECAR.name, EEE_SIDECAR.read_bytes(), "x/y"))], {}),
        (
            "helm",
            [
                ("file", (f"{HELM_RUN.name}/{n}", (HELM_RUN / n).read_bytes(), "application/json"))
                for n in ("per_instance_stats.json", "run_spec.json")
            ],
            {},
        ),
    ):
        r = client.post(
            "/v1/benchmarks/from-samples", params={"name": f"{prefix}-{name}", **query}, files=files
        )
        assert r.status_code == 201, r.text
        made[name] = r.json()["id"]
    return made


UPLOADS = {
    "npz": (_npz, "application/x-npz", "/results/matrix"),
    "jsonl": (_jsonl, "application/x-ndjson", "/results"),
    "parquet": (_parquet, "application/vnd.apache.parquet", "/results"),
    "csv": (_csv, "text/csv", "/results"),
    "json": (_json, "application/json", "/results"),
}


def _query_value(rng: np.random.Generator) -> str:
    return str(rng.choice([*map(str, WEIRD_NUMBERS), *WEIRD_TEXT, "true", "yes", "-0", "1e999"]))


def _reads() -> list[tuple[str, list[str]]]:
    """Every GET route of the API with its query parameters (from openapi/openapi.json)."""
    spec = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    return [
        (path, [p["name"] for p in ops["get"].get("parameters", []) if p["in"] == "query"])
        for path, ops in spec["paths"].items()
        if "get" in ops
    ]


READS = _reads()


def request_for(rng: np.random.Generator, data: Seeded) -> tuple[str, dict[str, Any]]:
    """``(kind, httpx.request keyword arguments)`` of one fuzzed request."""
    base = f"/v1/benchmarks/{data.benchmark_id}"
    if rng.random() < 0.3:  # a read of any GET route, each query parameter random
        path, names = READS[int(rng.integers(len(READS)))]
        path = (
            path.replace("{benchmark}", str(rng.choice([data.benchmark_id, "fuzz", "fuzz@v1"])))
            .replace("{subset_id}", data.subset_id)
            .replace("{analysis_id}", data.analysis_id)
            .replace("{job_id}", data.job_id)
            .replace("{session_id}", "00000000-0000-0000-0000-000000000000")
            .replace("{fmt}", str(rng.choice(["png", "svg", "pdf", "x"])))
        )
        params = {
            n: str(rng.choice(data.models)) if rng.random() < 0.3 else _query_value(rng)
            for n in names
            if rng.random() < 0.5
        }
        return "get", {"method": "GET", "url": path, "params": params}
    kind = str(rng.choice([*UPLOADS, "multipart", *LOG_KINDS]))
    if kind in LOG_KINDS:
        params = {"model": f"fz/{kind}{rng.integers(99)}"}
        metric = (
            LOG_RIGHT_METRIC[kind]
            if rng.random() < 0.5
            else LOG_METRICS[int(rng.integers(len(LOG_METRICS)))]
        )
        if metric is not None:
            params["metric"] = metric
        if rng.random() < 0.1:
            params["format"] = str(rng.choice(["inspect", "helm", "eee", "csv", "x"]))
        if rng.random() < 0.05:  # a new benchmark from a fuzzed log
            return kind, {
                "method": "POST",
                "url": "/v1/benchmarks/from-samples",
                "params": {"name": f"fz-new-{rng.integers(10**6)}"},
                "files": _log_files(rng, kind),
            }
        bid = data.extra["logs"][LOG_BENCHMARK[kind]]
        return kind, {
            "method": "POST",
            "url": f"/v1/benchmarks/{bid}/results",
            "params": params,
            "files": _log_files(rng, kind),
        }
    if kind == "multipart":
        files = []
        for _ in range(int(rng.integers(1, 4))):
            sub = str(rng.choice(["jsonl", "parquet", "csv", "json"]))
            make, media, _ = UPLOADS[sub]
            files.append(("file", (f"samples_t_2026-01-01T00-00-00.{sub}", make(rng, data), media)))
        return kind, {
            "method": "POST",
            "url": f"{base}/results",
            "params": {"model": f"fz/mp{rng.integers(99)}"},
            "files": files,
        }
    make, media, suffix = UPLOADS[kind]
    if rng.random() < 0.05:
        media = str(rng.choice(["text/plain", "application/octet-stream", "image/png", ""]))
    params: dict[str, str] = {}
    if kind != "json" and suffix == "/results":
        params["model"] = f"fz/{kind}{rng.integers(99)}"
    if rng.random() < 0.3:
        params["replace"] = str(rng.choice(["true", "false", "yes", "2"]))
    return kind, {
        "method": "POST",
        "url": base + suffix,
        "params": params,
        "content": make(rng, data),
        "headers": {"Content-Type": media} if media else {},
    }


async def run(url: str, key: str, data: Seeded, args: argparse.Namespace) -> dict[str, Any]:
    statuses: Counter[tuple[str, int]] = Counter()
    errors: list[dict[str, Any]] = []
    answered: dict[str, bool] = {}  # model named in the query -> some upload of it succeeded
    save = Path(args.save)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(args.requests):
        queue.put_nowait(i)

    async def client_loop() -> None:
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        ) as client:
            while not queue.empty():
                i = queue.get_nowait()
                rng = np.random.default_rng([args.seed, i])
                kind, req = request_for(rng, data)
                try:
                    r = await client.request(**req)
                    status = r.status_code
                except httpx.HTTPError as exc:
                    status, r = 0, None
                    errors.append({"i": i, "kind": kind, "status": 0, "error": repr(exc)})
                statuses[(kind, status)] += 1
                named = (req.get("params") or {}).get("model")
                if named is not None and kind != "get":  # the model this upload names
                    answered[named] = answered.get(named, False) or 200 <= status < 300
                if status >= 500:
                    save.mkdir(parents=True, exist_ok=True)
                    (save / f"{i}.json").write_text(
                        json.dumps({"kind": kind, "url": req["url"], "params": req.get("params")})
                    )
                    if "content" in req:
                        (save / f"{i}.body").write_bytes(req["content"])
                    for k, (_field, (fname, fdata, _media)) in enumerate(req.get("files", [])):
                        (save / f"{i}.{k}.{Path(fname).name}").write_bytes(fdata)
                    errors.append(
                        {"i": i, "kind": kind, "status": status, "body": r.text[:300] if r else ""}
                    )

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(args.concurrency)))
    took = time.perf_counter() - started
    return {"statuses": statuses, "errors": errors, "seconds": took, "answered": answered}


def half_written(db_url: str, answered: dict[str, bool]) -> dict[str, list[str]]:
    """What refused requests left behind: results of a model whose every upload was refused,
    and model rows that nothing (no result, archive or metadata row) refers to."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            stored = set(
                conn.scalars(
                    text(
                        "SELECT DISTINCT m.name FROM models m JOIN model_results r"
                        " ON r.model_id = m.id"
                    )
                )
            )
            orphans = list(
                conn.scalars(
                    text(
                        "SELECT m.name FROM models m WHERE NOT EXISTS (SELECT 1 FROM"
                        " model_results r WHERE r.model_id = m.id) AND NOT EXISTS (SELECT 1"
                        " FROM model_result_archive a WHERE a.model_id = m.id) AND NOT EXISTS"
                        " (SELECT 1 FROM model_metadata d WHERE d.model_id = m.id)"
                    )
                )
            )
    finally:
        engine.dispose()
    refused_only = sorted(n for n, ok in answered.items() if not ok and n in stored)
    return {"results_of_refused_models": refused_only, "orphan_models": sorted(orphans)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--save", default="/tmp/benchslice-fuzz-500s")
    args = parser.parse_args()
    tag = f"fuzz{os.getpid()}"
    with (
        migrated_database(ADMIN_URL, f"benchslice_bench_{tag}") as db,
        running_stack(
            db,
            REDIS_URL,
            queue=f"benchslice-bench-{tag}",
            key_prefix=f"benchslice-bench-{tag}:",
            workers=2,
            RATE_LIMIT_PER_SECOND="0",  # the fuzz measures answers, not the rate limits
            EXPENSIVE_QUEUE="16",  # concurrency <= 4: nothing shed for want of a place
        ) as stack,
    ):
        with stack.client(stack.admin_key) as client:
            data = seed(client, name="fuzz")
            data.extra["logs"] = seed_logs(client)
        key = create_key(db, ["write"], name="fuzzer")
        out = asyncio.run(run(stack.api.url, key, data, args))
        leftovers = half_written(db, out["answered"])
    total = sum(out["statuses"].values())
    by_status = Counter()
    for (_kind, status), count in out["statuses"].items():
        by_status[status] += count
    print(f"requests: {total} in {out['seconds']:.0f} s ({total / out['seconds']:.0f}/s)")
    print("statuses:", dict(sorted(by_status.items())))
    kinds = Counter()
    for (kind, _), count in out["statuses"].items():
        kinds[kind] += count
    print("kinds:", dict(sorted(kinds.items())))
    for kind in sorted(kinds):
        per = {st: c for (k, st), c in sorted(out["statuses"].items()) if k == kind}
        print(f"  {kind}: {per}")
    five = [e for e in out["errors"] if e["status"] >= 500 or e["status"] == 0]
    print(f"answers >= 500 or no answer: {len(five)}")
    for e in five[:20]:
        print("  ", e)
    refused = sum(not ok for ok in out["answered"].values())
    print(
        f"half-written: {len(leftovers['results_of_refused_models'])} stored results of the "
        f"{refused} query-named models whose every upload was refused; "
        f"{len(leftovers['orphan_models'])} model rows nothing refers to"
    )
    for name, rows in leftovers.items():
        if rows:
            print("  ", name, rows[:20])
    return 1 if five or any(leftovers.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
