"""Ingestion benchmarks (issue 5): upload latency, lm-eval log parsing, matrix load, bulk upload.

All data is SYNTHETIC (seeded): a 2PL-style generator (abilities ~ N(0, 1), difficulties
~ N(0, 1.2)) shaped like the paper's MMLU-Pro matrix (12,032 items x 447 models).

Runs against a private Postgres database created for the run (migrated to head, dropped at the
end) through the real app: requests go through FastAPI's in-process TestClient (ASGI, no
sockets) by default, or a real uvicorn server on loopback with ``--uvicorn``.

Cases (targets from issue 5):
  upload_columnar   one 12,000-item result set, columnar JSON, correct + confidence (< 100 ms)
  upload_lm_eval    a 12,000-line lm-eval --log_samples JSONL, parsed and stored   (< 1 s)
  load_matrix       450 models x 12,000 items from Postgres into numpy             (< 300 ms)
  bulk_upload       450 models x 12,000 items, model by model through the API      (< 60 s)

Usage: .venv/bin/python bench/bench_ingest.py [--quick] [--uvicorn] [--models N] [--items N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import scratch_database, start_uvicorn  # noqa: E402


def synthetic(n_models: int, n_items: int, seed: int = 20261130):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, n_models)[:, None]
    b = rng.normal(0.0, 1.2, n_items)[None, :]
    p = 1.0 / (1.0 + np.exp(-(theta - b)))
    correct = (rng.random((n_models, n_items)) < p).astype(np.uint8)
    conf = np.clip(p + rng.normal(0, 0.1, p.shape), 0.0, 1.0).astype(np.float32)
    return correct, conf


def lm_eval_log(n_lines: int, seed: int = 7) -> tuple[bytes, list[str]]:
    """A 4-choice lm-eval sample log in the real field layout (string-encoded log-likelihoods)."""
    rng = np.random.default_rng(seed)
    lines, hashes = [], []
    subjects = ["abstract_algebra", "anatomy", "astronomy", "business_ethics", "virology"]
    for i in rng.permutation(n_lines):  # lm-eval writes docs out of order across ranks
        i = int(i)
        choices = [f"option {i}-{k} with some words of text" for k in range(4)]
        gold = i % 4
        doc = {
            "question": f"Question {i}: which statement about item {i} is correct? " * 2,
            "subject": subjects[i % 5],
            "choices": choices,
            "answer": gold,
        }
        ctx = f"The following are multiple choice questions.\n\n{doc['question']}\nAnswer:"
        ll = (-rng.gamma(2.0, 1.5, 4)).round(4)
        doc_hash = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
        rec = {
            "doc_id": i,
            "doc": doc,
            "target": gold,
            "arguments": {
                f"gen_args_{k}": {"arg_0": ctx, "arg_1": " " + c} for k, c in enumerate(choices)
            },
            "resps": [[[str(x), "False"]] for x in ll],
            "filtered_resps": [[str(x), "False"] for x in ll],
            "filter": "none",
            "metrics": ["acc", "acc_norm"],
            "doc_hash": doc_hash,
            "prompt_hash": hashlib.sha256(ctx.encode()).hexdigest(),
            "target_hash": hashlib.sha256(str(gold).encode()).hexdigest(),
            "acc": float(np.argmax(ll) == gold),
            "acc_norm": float(np.argmax(ll) == gold),
        }
        lines.append(json.dumps(rec))
        hashes.append(doc_hash)
    return ("\n".join(lines) + "\n").encode(), hashes


class Client:
    """POST/GET against the app: in-process TestClient or httpx to a uvicorn subprocess."""

    def __init__(self, database_url: str, uvicorn: bool) -> None:
        self.kind = "uvicorn (loopback, 1 process)" if uvicorn else "in-process TestClient"
        self._proc = None
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "AUTH_ENABLED": "false",
            "ENVIRONMENT": "test",
        }
        if uvicorn:
            import httpx

            self._proc, base = start_uvicorn(env)
            self.http = httpx.Client(base_url=base, timeout=120)
            deadline = time.monotonic() + 180
            while True:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"uvicorn exited with {self._proc.returncode}")
                try:
                    if self.http.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        else:
            os.environ.update(env)
            from fastapi.testclient import TestClient

            from app.main import create_app
            from app.settings import Settings

            self.app = create_app(Settings(database_url=database_url))
            self.http = TestClient(self.app)
            self.http.__enter__()

    def post(self, url: str, **kw):
        r = self.http.post(url, **kw)
        if r.status_code >= 300:
            raise RuntimeError(f"{url}: {r.status_code} {r.text[:500]}")
        return r

    def close(self) -> None:
        if self._proc is not None:
            self.http.close()
            self._proc.terminate()
            self._proc.wait(timeout=20)
        else:
            self.http.__exit__(None, None, None)


def timed(fn: Callable[[], object], cpu: list[float] | None = None) -> float:
    """Wall time of ``fn()``; its CPU time in this process is appended to ``cpu``.

    On a shared machine wall time is inflated by other work; the in-process CPU time (client +
    server for the TestClient, client + numpy for load_matrix) is the steadier figure.
    """
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(time.process_time() - c0)
    return wall


def row(
    case: str, shape: str, times: list[float], note: str = "", cpu: list[float] | None = None
) -> str:
    med, lo = statistics.median(times), min(times)
    extra = f"; in-process CPU median {statistics.median(cpu) * 1e3:.1f} ms" if cpu else ""
    return (
        f"| {case} | {shape} | {med * 1e3:.1f} ms | {lo * 1e3:.1f} ms | n={len(times)}"
        f"{'; ' + note if note else ''}{extra} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--uvicorn", action="store_true")
    ap.add_argument("--models", type=int, default=450)
    ap.add_argument("--items", type=int, default=12_000)
    args = ap.parse_args()
    n_models, n_items = (40, 2_000) if args.quick else (args.models, args.items)
    correct, conf = synthetic(n_models, n_items)
    rows: list[str] = []
    json_h = {"content-type": "application/json"}
    nd = {"content-type": "application/x-ndjson"}

    with scratch_database() as url:
        client = Client(url, args.uvicorn)

        def server_cpu(cpu: list[float]) -> list[float] | None:
            return None if args.uvicorn else cpu  # the server's CPU is in another process

        try:
            item_ids = [hashlib.sha256(f"item-{i}".encode()).hexdigest() for i in range(n_items)]
            items = [{"id": x, "subtask": f"s{i % 14}"} for i, x in enumerate(item_ids)]
            body = json.dumps({"name": "synthetic-mmlu-pro", "items": items}).encode()
            create_cpu: list[float] = []
            t = timed(
                lambda: client.post("/v1/benchmarks", content=body, headers=json_h),
                server_cpu(create_cpu),
            )
            bench_id = client.post("/v1/benchmarks", content=body, headers=json_h).json()["id"]
            rows.append(
                row(
                    "create_benchmark",
                    f"{n_items} items",
                    [t],
                    "JSON item list",
                    server_cpu(create_cpu),
                )
            )

            bodies = [
                json.dumps(
                    {
                        "model": {
                            "name": f"synthetic/model-{k:03d}",
                            "params_b": float(1 + k % 70),
                        },
                        "correct": correct[k].tolist(),
                        "confidence": np.round(conf[k], 6).tolist(),
                    }
                ).encode()
                for k in range(n_models)
            ]
            url_results = f"/v1/benchmarks/{bench_id}/results"
            per: list[float] = []
            per_cpu: list[float] = []
            t_bulk0, c_bulk0 = time.perf_counter(), time.process_time()
            for b in bodies:
                per.append(
                    timed(lambda b=b: client.post(url_results, content=b, headers=json_h), per_cpu)
                )
            bulk = time.perf_counter() - t_bulk0
            bulk_cpu = time.process_time() - c_bulk0
            size_kb = statistics.median(len(b) for b in bodies) / 1024
            rows.append(
                row(
                    "upload_columnar",
                    f"{n_items} items, correct+confidence, {size_kb:.0f} KB body",
                    per,
                    client.kind + ", request round trip",
                    server_cpu(per_cpu),
                )
            )
            rows.append(
                row(
                    "bulk_upload",
                    f"{n_models} x {n_items}",
                    [bulk],
                    f"{client.kind}, sequential, model by model",
                    server_cpu([bulk_cpu]),
                )
            )

            from app.db.session import make_engine, make_sessionmaker
            from app.services.catalog.results import load_matrix
            from app.settings import Settings

            engine = make_engine(Settings(database_url=url))
            factory = make_sessionmaker(engine)
            loads: list[float] = []
            loads_cpu: list[float] = []
            mats = []
            for _ in range(6):
                with factory() as session:
                    loads.append(
                        timed(lambda s=session: mats.append(load_matrix(s, bench_id)), loads_cpu)
                    )
            engine.dispose()
            mat = mats[-1]
            assert np.array_equal(mat.correct, correct)
            assert np.allclose(mat.confidence, conf, atol=1e-6)
            rows.append(
                row(
                    "load_matrix",
                    f"{n_models} x {n_items}, correct+confidence",
                    loads[1:],
                    "Postgres -> numpy float64, fresh session, first run "
                    f"{loads[0] * 1e3:.0f} ms; CPU excludes the Postgres server",
                    loads_cpu[1:],
                )
            )

            log, _ = lm_eval_log(n_items)
            from app.ingest import parse_lm_eval_samples

            parse_cpu: list[float] = []
            parse_t = [
                timed(lambda: parse_lm_eval_samples(log, metric="acc"), parse_cpu) for _ in range(3)
            ]
            mb = len(log) / 2**20
            rows.append(
                row(
                    "parse_lm_eval",
                    f"{n_items} lines, {mb:.1f} MB",
                    parse_t,
                    "parser only",
                    parse_cpu,
                )
            )
            lm_bench = client.post(
                "/v1/benchmarks/from-samples",
                params={"name": "synthetic-lm-eval", "task": "mmlu"},
                content=log,
                headers=nd,
            ).json()["id"]
            up_cpu: list[float] = []
            up = [
                timed(
                    lambda k=k: client.post(
                        f"/v1/benchmarks/{lm_bench}/results",
                        params={"model": f"lm/{k}", "metric": "acc"},
                        content=log,
                        headers=nd,
                    ),
                    up_cpu,
                )
                for k in range(3)
            ]
            rows.append(
                row(
                    "upload_lm_eval",
                    f"{n_items} lines, {mb:.1f} MB",
                    up,
                    client.kind + ", parsed + stored",
                    server_cpu(up_cpu),
                )
            )
        finally:
            client.close()

    print("| case | input (synthetic) | median | min | notes |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
