"""`benchslice push` of lighteval's output folder (several models, a zip, --format, a second
run of one model) and `subset get --format lighteval`, against a real service."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from app.ingest.logs.lighteval import doc_key
from tests.cli.conftest import CLI

pytestmark = pytest.mark.integration

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "lighteval" / "out"
MODELS = ("dummy-a", "dummy-b", "dummy-c")


def _truth(model: str) -> dict[str, float]:
    """Each doc's acc / em, read from the details with pyarrow."""
    out = {}
    for path in sorted((OUT / "details" / model).rglob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            doc, metric = row["doc"], row["metric"]
            key = doc_key(doc["query"], doc["choices"], doc["gold_index"])
            out[f"{doc['task_name']}/{key}"] = float(metric.get("acc", metric.get("em")))
    return out


def test_push_lighteval_output_folder_one_upload_per_model(cli: CLI, tmp_path: Path) -> None:
    ambiguous = cli("push", "--create", "-b", "lev", str(OUT))
    assert ambiguous.code == 2 and "acc, mrr" in ambiguous.stderr, ambiguous
    assert "nothing was created" in ambiguous.stderr
    run = cli("push", "--create", "-b", "lev", "--metric", "acc,em", str(OUT), "--json")
    assert run.code == 0, run
    body = run.json()
    assert body["benchmark_created"] and body["benchmark"]["n_items"] == 8 + 6
    results = {r["model"]["name"]: r for r in body["results"]}
    assert set(results) == set(MODELS)
    for model, r in results.items():
        truth = _truth(model)
        assert r["n_items"] == 14 and r["metric"] == "acc,em" and r["status"] == "created"
        assert r["accuracy"] == pytest.approx(sum(truth.values()) / len(truth))
    # the same folder zipped: nothing changes
    archive = tmp_path / "out.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in OUT.rglob("*"):
            if f.is_file():
                z.write(f, f.relative_to(OUT.parent))
    again = cli("push", "-b", "lev", "--metric", "acc,em", str(archive), "--json")
    assert again.code == 0, again
    assert all(r["replayed"] or r["status"] == "unchanged" for r in again.json()["results"])
    # a second, later run of one model: only the latest is read (said on stderr)
    folder = tmp_path / "two-runs"
    shutil.copytree(OUT / "details" / "dummy-a", folder / "details" / "dummy-a")
    (run_dir,) = (folder / "details" / "dummy-a").iterdir()
    later = run_dir.parent / "2099-01-01T00-00-00.000000"
    shutil.copytree(run_dir, later)
    for f in later.iterdir():
        f.rename(later / f.name.replace(run_dir.name, later.name))
    latest = cli("push", "-b", "lev", "--metric", "acc,em", str(folder), "--json")
    assert latest.code == 0, latest
    assert "the latest (2099-01-01T00-00-00.000000) read" in latest.stderr
    (only,) = latest.json()["results"]
    assert only["model"]["name"] == "dummy-a" and only["n_items"] == 14

    # one file, --format lighteval and --model (the file name alone names no model)
    one = tmp_path / "arith.parquet"
    shutil.copy(next((OUT / "details" / "dummy-b").rglob("details_arith*.parquet")), one)
    single = cli(
        "push", "-b", "lev", "--format", "lighteval", "--model", "solo", "--metric", "acc",
        str(one), "--json",
    )  # fmt: skip
    assert single.code == 0, single
    (r,) = single.json()["results"]
    assert r["model"]["name"] == "solo" and r["n_items"] == 8

    sid = cli("subset", "create", "-b", "lev", "--method", "random", "-n", "5", "--seed", "1")
    assert sid.code == 0, sid
    exported = cli("subset", "get", sid.stdout.strip(), "--format", "lighteval")
    assert exported.code == 0, exported
    keys = json.loads(exported.stdout)
    assert set(keys) <= {"arith|0", "echo|0"} and sum(map(len, keys.values())) == 5
    items = _truth("dummy-a")
    assert all(f"{task}/{k}" in items for task, ks in keys.items() for k in ks)


def test_push_broken_details_creates_nothing(cli: CLI, tmp_path: Path) -> None:
    run_dir = next((OUT / "details" / "dummy-c").iterdir())
    folder = tmp_path / "details" / "dummy-c" / run_dir.name
    shutil.copytree(run_dir, folder)
    arith = next(folder.glob("details_arith*.parquet"))
    arith.write_bytes(arith.read_bytes()[:2000])  # truncated
    run = cli("push", "--create", "-b", "lev-broken", "--metric", "acc,em", str(tmp_path))
    assert run.code != 0 and "nothing was created" in run.stderr, run
    assert arith.name in run.stderr
    missing = cli("push", "-b", "lev-broken", "--metric", "acc,em", str(tmp_path))
    assert missing.code != 0 and "no benchmark named 'lev-broken'" in missing.stderr, missing
    # the server refuses it too (a 422 naming the file), storing nothing
    good = cli(
        "push",
        "--create",
        "-b",
        "lev-broken",
        "--metric",
        "acc,em",
        str(OUT / "details" / "dummy-a"),
    )
    assert good.code == 0, good
    refused = cli("push", "-b", "lev-broken", "--metric", "acc,em", str(tmp_path))
    assert refused.code != 0 and "422" in refused.stderr and arith.name in refused.stderr, refused
    assert "truncated" in refused.stderr
    shown = cli("benchmarks", "show", "lev-broken", "--models", "--json")
    assert shown.code == 0 and "dummy-a" in shown.stdout and "dummy-c" not in shown.stdout, shown
