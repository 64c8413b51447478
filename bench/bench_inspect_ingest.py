"""Inspect AI log ingestion (issue 36): a 10,000-sample x 3-epoch ``.eval`` parsed and stored.

The log is SYNTHETIC (seeded) but laid out as inspect-ai 0.3.285 writes it: zstd members
``header.json``, ``summaries.json`` (30,000 sample summaries with scores, model_usage and
working time) and one ``samples/{id}_epoch_{n}.json`` member per sample. Those per-sample
members hold bytes that are NOT zstd: had the fast path opened a single one, the parse would
fail, so a passing run shows it reads no per-sample file.

Cases:
  parse    ``parse_inspect_log`` alone (median of --repeats)
  upload   POST /v1/benchmarks/{id}/results with the .eval as a multipart file, through the
           real app (in-process TestClient) on a private Postgres database: detect, parse,
           validate, store (``?replace=true``, two logs alternating so every upload stores)
Target: parse + store <= 2 s.

Usage: .venv/bin/python bench/bench_inspect_ingest.py [--samples 10000] [--epochs 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database  # noqa: E402
from bench.bench_ingest import Client  # noqa: E402
from tests.support.inspect_logs import zip_bytes, zstd_member  # noqa: E402


def synthetic_eval(n: int, epochs: int, seed: int) -> bytes:
    """An Inspect .eval of ``n`` samples x ``epochs`` (SYNTHETIC: P(correct) ~ Beta(2, 2) per
    sample), with undecodable per-sample members."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 2.0, n)
    right = rng.random((epochs, n)) < p
    ids = [f"s{i}" for i in range(n)]
    header = {
        "version": 2,
        "status": "success",
        "eval": {
            "task": "synth",
            "model": "mockllm/synth",
            "config": {"epochs": epochs},
            "dataset": {"samples": n, "sample_ids": ids},
            "scorers": [{"name": "match"}],
        },
    }
    summaries = [
        {
            "id": ids[i],
            "epoch": e + 1,
            "input": f"What is {i} + {e}?",
            "target": str(i + e),
            "scores": {"match": {"value": "C" if right[e, i] else "I", "answer": "x"}},
            "model_usage": {
                "mockllm/synth": {
                    "input_tokens": 12,
                    "output_tokens": 3,
                    "total_tokens": 15,
                    "total_cost": 1.8e-05,
                }
            },
            "total_time": 0.5,
            "working_time": 0.4,
            "completed": True,
        }
        for e in range(epochs)
        for i in range(n)
    ]
    members = [
        zstd_member("header.json", orjson.dumps(header)),
        zstd_member("summaries.json", orjson.dumps(summaries)),
    ]
    poison = b"not zstd: the fast path must never open this"
    members += [
        (f"samples/{ids[i]}_epoch_{e + 1}.json", poison, 93, 0, 1 << 12)
        for e in range(epochs)
        for i in range(n)
    ]
    return zip_bytes(members)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from app.ingest.logs.inspect import parse_inspect_log

    logs = [synthetic_eval(args.samples, args.epochs, seed) for seed in (1, 2)]
    print(f"log: {args.samples} samples x {args.epochs} epochs, {len(logs[0]) / 1e6:.1f} MB")
    parse_ms, parse_cpu = [], []
    for _ in range(args.repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        parsed = parse_inspect_log(logs[0])
        parse_ms.append(1000 * (time.perf_counter() - t0))
        parse_cpu.append(1000 * (time.process_time() - c0))
    assert parsed.n_items == args.samples and parsed.samples == args.epochs
    print(
        f"parse: median {statistics.median(parse_ms):.0f} ms wall, "
        f"{statistics.median(parse_cpu):.0f} ms CPU (runs {[round(x) for x in parse_ms]})"
    )
    with scratch_database() as url:
        client = Client(url, uvicorn=False)
        try:
            items = [{"id": f"synth/s{i}", "subtask": "synth"} for i in range(args.samples)]
            body = json.dumps({"name": "inspect-bench", "items": items})
            bench = client.post(
                "/v1/benchmarks", content=body, headers={"content-type": "application/json"}
            ).json()
            url_results = f"/v1/benchmarks/{bench['id']}/results"
            upload_ms, cpu_ms = [], []
            for k in range(args.repeats):
                data = logs[k % 2]
                c0, t0 = time.process_time(), time.perf_counter()
                r = client.post(
                    url_results,
                    params={"replace": "true"},
                    files=[("file", ("synth.eval", data, "application/octet-stream"))],
                )
                upload_ms.append(1000 * (time.perf_counter() - t0))
                cpu_ms.append(1000 * (time.process_time() - c0))
                assert r.json()["n_items"] == args.samples, r.text
                assert r.json()["status"] in ("created", "replaced"), r.json()["status"]
        finally:
            client.close()
    med = statistics.median(upload_ms)
    print(
        f"upload (parse + store): median {med:.0f} ms wall, {statistics.median(cpu_ms):.0f} ms "
        f"CPU (runs {[round(x) for x in upload_ms]}); target <= 2000 ms: "
        f"{'met' if med <= 2000 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
