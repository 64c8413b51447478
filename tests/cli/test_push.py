"""``benchslice push`` against a real service: lm-eval samples, directories, CSV, JSON, .npz."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from app.client import Client
from tests.cli.conftest import CLI, FIXTURES
from tests.cli.service import LiveService

pytestmark = pytest.mark.integration

ARC = FIXTURES / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"


def _mean(path: Path, metric: str) -> float:
    return float(np.mean([json.loads(line)[metric] for line in path.read_text().splitlines()]))


def test_ambiguous_metric_fails_in_ci_listing_the_choices(cli: CLI) -> None:
    run = cli("push", "--create", "--benchmark", "arc-ci", "--model", "org/a", str(ARC))
    assert run.code == 2, run
    assert "several metrics" in run.stderr and "--metric" in run.stderr
    assert "acc, acc_norm" in run.stderr


def test_push_samples_prints_items_coverage_accuracy_and_is_idempotent(
    cli: CLI, service: LiveService
) -> None:
    args = ["push", "--create", "--benchmark", "arc", "--model", "org/a", "--metric", "acc_norm"]
    first = cli(*args, str(ARC))
    assert first.code == 0, first
    assert "created benchmark arc v1 (5 items" in first.stderr
    row = first.stdout.splitlines()[-1].split()
    assert row[:4] == ["org/a", "5", "100.0%", f"{100 * _mean(ARC, 'acc_norm'):.1f}%"]
    assert row[-1] == "created"

    again = cli(*args, str(ARC), "--json")
    assert again.code == 0, again
    body = again.json()
    assert body["benchmark_created"] is False
    (result,) = body["results"]
    assert result["replayed"] is True and result["n_items"] == 5
    assert result["accuracy"] == _mean(ARC, "acc_norm") and result["metric"] == "acc_norm"
    with Client(service.url) as client:
        assert client.find_benchmark("arc").n_models == 1


def test_replayed_push_after_delete_stores_again(cli: CLI, service: LiveService) -> None:
    args = ["push", "--create", "--benchmark", "arc-del", "--model", "org/d", "--metric", "acc"]
    assert cli(*args, str(ARC)).code == 0
    with Client(service.url) as client:
        bench = client.find_benchmark("arc-del")
        client.delete_model_results(bench.id, "org/d")
        assert client.list_models(bench.id).items == []
        run = cli(*args, str(ARC), "--json")
        assert run.code == 0, run
        assert run.json()["results"][0]["status"] == "created"
        (stored,) = client.list_models(bench.id).items
    assert stored.model.name == "org/d" and stored.accuracy == _mean(ARC, "acc")


def test_lm_eval_output_directory_model_from_results_json(cli: CLI, tmp_path: Path) -> None:
    out = tmp_path / "out" / "org__b-7b"
    out.mkdir(parents=True)
    shutil.copy(ARC, out / ARC.name)
    # an older run of the same task: the newest file per task is pushed
    older = out / "samples_arc_easy_2024-01-01T00-00-00.000000.jsonl"
    older.write_text(ARC.read_text().replace('"acc_norm": 1.0', '"acc_norm": 0.0'))
    (out / "results_2024-05-01T10-00-00.123456.json").write_text(
        json.dumps({"model_name": "org/b-7b", "results": {}})
    )
    run = cli(
        "push",
        "--create",
        "--benchmark",
        "arc-dir",
        "--metric",
        "acc_norm",
        str(tmp_path / "out"),
        "--json",
    )
    assert run.code == 0, run
    body = run.json()
    assert body["files"] == [str(out / ARC.name)]
    assert body["results"][0]["model"]["name"] == "org/b-7b"
    assert body["results"][0]["accuracy"] == _mean(ARC, "acc_norm")


def test_missing_benchmark_without_create_is_exit_2(cli: CLI) -> None:
    run = cli("push", "--benchmark", "nope", "--model", "m", str(FIXTURES / "results.csv"))
    assert run.code == 2
    assert "404" in run.stderr and "no benchmark named 'nope'" in run.stderr
    assert "--create" in run.stderr


def test_csv_and_keyed_json(cli: CLI) -> None:
    csv_run = cli(
        "push",
        "--create",
        "--benchmark",
        "csvb",
        "--model",
        "org/c",
        str(FIXTURES / "results.csv"),
        "--json",
    )
    assert csv_run.code == 0, csv_run
    body = csv_run.json()
    assert body["benchmark"]["n_items"] == 3 and body["results"][0]["accuracy"] == 2 / 3
    json_run = cli("push", "--benchmark", "csvb", str(FIXTURES / "results_keyed.json"), "--json")
    assert json_run.code == 0, json_run
    assert json_run.json()["results"][0]["model"]["name"] == "org/tiny-7b"


def test_npz_push_with_model_filter(cli: CLI, gpqa_path: Path) -> None:
    data = np.load(gpqa_path)
    names = [str(m) for m in data["models"]]
    wanted = [n for n in names if n.startswith("mistralai/")]
    run = cli(
        "push",
        "--create",
        "--benchmark",
        "gpqa-mistral",
        str(gpqa_path),
        "--models",
        "mistralai/*",
        "--json",
    )
    assert run.code == 0, run
    body = run.json()
    assert body["benchmark"]["n_items"] == 448
    assert sorted(r["model"]["name"] for r in body["results"]) == sorted(wanted)
    expected = {n: float(data["correct"][names.index(n)].mean()) for n in wanted}
    assert {r["model"]["name"]: r["accuracy"] for r in body["results"]} == expected
    again = cli("push", "--benchmark", "gpqa-mistral", str(gpqa_path), "--models", "mistralai/*")
    assert again.code == 0, again
    summary = again.stdout.splitlines()[-1].split()
    assert summary[:5] == [str(len(wanted)), "0", str(len(wanted)), "0", str(len(wanted))]


def test_models_filter_only_for_npz(cli: CLI) -> None:
    run = cli(
        "push", "--benchmark", "x", "--models", "a*", "--model", "m", str(FIXTURES / "results.csv")
    )
    assert run.code == 2 and "only for .npz" in run.stderr


def test_ambiguous_metric_is_asked_on_a_terminal(service: LiveService) -> None:
    """With a terminal on stdin the CLI asks which metric to use instead of failing."""
    import os
    import pty
    import subprocess
    import time

    from tests.cli.conftest import BENCHSLICE

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BENCHSLICE), "push", "--create", "-b", "arc-tty", "-m", "org/t", str(ARC), "--json"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=service.client_env(),
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while b"which one gives correctness?" not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        seen += os.read(master, 1024)
    assert b"acc, acc_norm" in seen
    os.write(master, b"acc_norm\n")
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0, seen
    (result,) = json.loads(out)["results"]
    assert result["metric"] == "acc_norm" and result["accuracy"] == _mean(ARC, "acc_norm")


def test_leaderboard_details_parquet_and_jsonl_agree(cli: CLI, tmp_path: Path) -> None:
    """Open LLM Leaderboard details: the metric defaults from the task (no --metric needed);
    the parquet form (nested values as JSON strings) stores what the JSONL form stores."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = FIXTURES / "samples_leaderboard_mmlu_pro_2024-07-03T08-15-00.000001.jsonl"
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    rows = [
        {
            k: json.dumps(v) if k in ("doc", "filtered_resps", "resps", "arguments") else v
            for k, v in r.items()
        }
        for r in records
    ]
    details = tmp_path / "details"
    details.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), details / (jsonl.stem + ".parquet"))

    from_jsonl = cli("push", "--create", "-b", "mmlu-pro", "-m", "org/j", str(jsonl), "--json")
    assert from_jsonl.code == 0, from_jsonl
    from_parquet = cli("push", "-b", "mmlu-pro", "-m", "org/p", str(details), "--json")
    assert from_parquet.code == 0, from_parquet
    a, b = from_jsonl.json()["results"][0], from_parquet.json()["results"][0]
    assert from_parquet.json()["files"] == [str(details / (jsonl.stem + ".parquet"))]
    assert (a["n_items"], a["accuracy"], a["metric"]) == (b["n_items"], b["accuracy"], b["metric"])
    assert a["metric"] == "acc" and a["n_items"] == len(records)
