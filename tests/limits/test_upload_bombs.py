"""Compressed uploads against the real service (issue 39, "Medium-High — a compressed bomb" and
the npz / lm-eval lower findings): a ~1000:1 ``.npz`` answers 422 before it is inflated, with
each API process's RSS growing <= 100 MB; crafted headers and values answer 4xx, never 500."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import httpx
import numpy as np
import pytest
from numpy.lib import format as npy_format

from tests.support.stack import Stack, create_key

pytestmark = pytest.mark.integration

N_ITEMS = 40
NPZ = {"Content-Type": "application/x-npz"}


def _member(archive: zipfile.ZipFile, name: str, descr: str, shape: tuple, data) -> None:
    with archive.open(f"{name}.npy", "w", force_zip64=True) as f:
        npy_format.write_array_header_1_0(
            f, {"descr": descr, "fortran_order": False, "shape": shape}
        )
        for chunk in data:
            f.write(chunk)


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """``correct`` of 10,000 x 50,000 zeros (500 MB inflated) deflated to well under 1 MB."""
    path: Path = tmp_path_factory.mktemp("bomb") / "bomb.npz"
    rows, cols = 10_000, 50_000
    zeros = bytes(16 * 1024 * 1024)
    left = rows * cols
    chunks = []
    while left:
        chunks.append(zeros[: min(left, len(zeros))])
        left -= len(chunks[-1])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        _member(archive, "correct", "|u1", (rows, cols), iter(chunks))
        names = np.array([f"bomb/m{i}" for i in range(rows)])
        with archive.open("models.npy", "w") as f:
            npy_format.write_array(f, names)
    data = path.read_bytes()
    assert len(data) < 2_000_000 and rows * cols / len(data) > 500  # a real bomb
    return data


def _api_pids(stack: Stack) -> list[int]:
    """The API processes: the children of uvicorn's supervisor (``--workers 2``)."""
    assert stack.api.proc is not None
    parent = stack.api.proc.pid
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cmdline = (stat.parent / "cmdline").read_bytes()
        if int(fields[1]) == parent and b"resource_tracker" not in cmdline:
            found.append(int(stat.parent.name))
    return found


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture(scope="module")
def writer(two_process_stack: Stack) -> tuple[httpx.Client, str]:
    key = create_key(two_process_stack.database_url, ["write"], name="bomb-writer")
    client = two_process_stack.client(key)
    items = [{"id": f"q{i:03d}"} for i in range(N_ITEMS)]
    r = client.post("/v1/benchmarks", json={"name": "bombs", "items": items})
    assert r.status_code in (200, 201), r.text
    return client, r.json()["id"]


def _assert_4xx(r: httpx.Response, field: str | None = None) -> None:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    if field is not None:
        assert field in json.dumps(r.json()), r.text[:500]


def test_the_bomb_is_refused_before_it_is_inflated(
    two_process_stack: Stack, writer: tuple[httpx.Client, str], bomb: bytes
) -> None:
    client, bid = writer
    pids = _api_pids(two_process_stack)
    assert len(pids) == 2, pids
    before = {pid: _rss_mb(pid) for pid in pids}
    for _ in range(6):  # on fresh connections: both processes get some
        with httpx.Client(base_url=client.base_url, headers=client.headers, timeout=60) as c:
            r = c.post(f"/v1/benchmarks/{bid}/results/matrix", content=bomb, headers=NPZ)
        assert r.status_code == 422, r.text[:500]
        assert "inflates to" in r.text, r.text[:500]
    growth = {pid: _rss_mb(pid) - before[pid] for pid in pids}
    assert max(growth.values()) <= 100, growth


def test_a_header_claiming_ten_to_the_13_values_is_a_422(
    writer: tuple[httpx.Client, str],
) -> None:
    client, bid = writer
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        _member(archive, "correct", "<f8", (10**6, 10**7), iter([bytes(64)]))
        with archive.open("models.npy", "w") as f:
            npy_format.write_array(f, np.array(["a"]))
    r = client.post(f"/v1/benchmarks/{bid}/results/matrix", content=buf.getvalue(), headers=NPZ)
    _assert_4xx(r, "correct")


@pytest.mark.parametrize(
    ("arrays", "field"),
    [
        ({"models": np.array([".."]), "correct": np.ones((1, N_ITEMS))}, "models"),
        (
            {
                "models": np.array(["org/huge"]),
                "correct": np.ones((1, N_ITEMS)),
                "params_b": np.array([1e300]),
            },
            "params_b",
        ),
    ],
    ids=["model-named-dotdot", "params_b-1e300"],
)
def test_crafted_npz_values_are_4xx(
    writer: tuple[httpx.Client, str], arrays: dict, field: str
) -> None:
    client, bid = writer
    r = client.post(f"/v1/benchmarks/{bid}/results/matrix", content=_npz(arrays), headers=NPZ)
    _assert_4xx(r, field)


def test_samples_ten_to_the_12_is_a_422(writer: tuple[httpx.Client, str]) -> None:
    client, bid = writer
    r = client.post(
        f"/v1/benchmarks/{bid}/results",
        json={"model": "org/k", "correct": [0.5] * N_ITEMS, "samples": 10**12},
    )
    _assert_4xx(r, "samples")


DEEP = 100_000


@pytest.mark.parametrize(
    "line",
    [
        "[" * DEEP + "]" * DEEP,  # the line itself
        json.dumps(  # a string-encoded field (lm-eval writes some so)
            {"doc_id": 0, "doc_hash": "h0", "doc": "[" * DEEP + "]" * DEEP, "acc": 1.0}
        ),
    ],
    ids=["nested-line", "nested-string-field"],
)
def test_lm_eval_jsonl_nested_100k_deep_is_4xx(writer: tuple[httpx.Client, str], line: str) -> None:
    client, bid = writer
    r = client.post(
        f"/v1/benchmarks/{bid}/results",
        params={"model": "org/deep"},
        content=(line + "\n").encode(),
        headers={"Content-Type": "application/x-ndjson"},
    )
    _assert_4xx(r)
