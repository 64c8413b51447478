"""The CI path through the CLI on a real service: subset → export → score → verdict → plan →
analyze. GPQA (real data) is pushed once, with one model held out to be scored."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.core.reliability.exact import pair_probability
from tests.cli.conftest import CLI, FIXTURES, HELD_OUT
from tests.cli.service import free_port

pytestmark = pytest.mark.integration

CLOSE = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct")  # 2.2 points
FAR = ("mistralai/Mistral-Large-Instruct-2411", "meta-llama/Meta-Llama-3-8B-Instruct")  # 15.0
SUBSET_ID = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture(scope="module")
def matrix(gpqa: dict[str, Any]) -> dict[str, Any]:
    with np.load(gpqa["path"]) as data:
        return {"correct": data["correct"], "models": [str(m) for m in data["models"]]}


@pytest.fixture(scope="module")
def subset(cli: CLI, gpqa: dict[str, Any]) -> str:
    run = cli(
        "subset",
        "create",
        "--benchmark",
        "gpqa",
        "--method",
        "random",
        "--size",
        "25",
        "--seed",
        "3",
    )
    assert run.code == 0, run
    subset_id = run.stdout.strip()
    assert SUBSET_ID.match(subset_id), run
    assert "subset of 25 items from gpqa v1 by random (seed 3" in run.stderr
    return subset_id


def test_same_request_same_subset(cli: CLI, subset: str) -> None:
    again = cli("subset", "create", "-b", "gpqa", "--method", "random", "-n", "25", "--seed", "3")
    assert again.code == 0 and again.stdout.strip() == subset
    other = cli("subset", "create", "-b", "gpqa", "--method", "random", "-n", "25", "--seed", "4")
    assert other.code == 0 and other.stdout.strip() != subset


def test_export_formats(cli: CLI, subset: str, tmp_path: Path) -> None:
    shown = cli("subset", "get", subset, "--format", "json")
    assert shown.code == 0, shown
    items = shown.json()["items"]
    assert len(items) == 25
    out = tmp_path / "ci" / "subset.json"
    run = cli("subset", "get", subset, "--format", "lm-eval", "-o", str(out))
    assert run.code == 0, run
    assert f"wrote {out} (lm-eval format)" in run.stderr
    assert json.loads(out.read_text()) == {"gpqa_main": sorted(i["doc_id"] for i in items)}
    ids = cli("subset", "get", subset, "--format", "ids")
    assert json.loads(ids.stdout) == [i["item_id"] for i in items]
    rows = list(csv.DictReader(io.StringIO(cli("subset", "get", subset, "-f", "csv").stdout)))
    assert [r["item_id"] for r in rows] == [i["item_id"] for i in items]
    table = cli("subset", "get", subset)
    assert table.code == 0 and len(table.stdout.splitlines()) == 2 + 2 + 25
    bad = cli("subset", "get", subset, "--format", "xml")
    assert bad.code == 2


def test_score_held_out_model_from_npz_and_csv(
    cli: CLI, subset: str, gpqa: dict[str, Any], matrix: dict[str, Any], tmp_path: Path
) -> None:
    items = cli("subset", "get", subset, "-f", "json").json()["items"]
    positions = [i["position"] for i in items]
    row = matrix["correct"][matrix["models"].index(HELD_OUT)]
    expected = float(row[positions].mean())
    baseline = CLOSE[1]

    run = cli(
        "score",
        subset,
        "--model",
        HELD_OUT,
        str(gpqa["path"]),
        "--baseline",
        baseline,
        "--json",
    )
    assert run.code == 0, run
    body = run.json()
    assert body["n_items"] == 25 and body["subset_accuracy"] == pytest.approx(expected)
    (est,) = [e for e in body["estimates"] if e["estimator"] == "mean"]
    assert est["value"] == pytest.approx(expected) and est["ci_low"] < expected < est["ci_high"]
    assert body["baseline"]["baseline"] == baseline
    assert 0 <= body["baseline"]["p_better"] <= 1

    # the same results as a CSV file (what a CI script would write), people's output
    path = tmp_path / "new.csv"
    path.write_text(
        "item_id,correct\n" + "".join(f"{i['item_id']},{int(row[i['position']])}\n" for i in items)
    )
    people = cli("score", subset, "--model", "org/new-model", str(path), "--baseline", baseline)
    assert people.code == 0, people
    assert (
        f"org/new-model on subset {subset[:12]}: 25 items, subset accuracy "
        f"{100 * expected:.1f}%" in people.stdout
    )
    assert f"vs {baseline} (full " in people.stdout


def test_score_lm_eval_run_on_the_exported_subset(cli: CLI, tmp_path: Path) -> None:
    """The whole CI loop on lm-eval files: benchmark from a sample log, subset, export for
    ``lm_eval --samples``, "evaluate" only those docs, score the new run against a baseline."""
    arc = FIXTURES / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"
    assert (
        cli(
            "push", "--create", "-b", "arc-ci-loop", "-m", "org/base", "--metric", "acc", str(arc)
        ).code
        == 0
    )
    subset_id = cli(
        "subset", "create", "-b", "arc-ci-loop", "-n", "3", "--seed", "1"
    ).stdout.strip()
    spec = tmp_path / "subset.json"
    assert cli("subset", "get", subset_id, "-f", "lm-eval", "-o", str(spec)).code == 0
    docs = set(json.loads(spec.read_text())["arc_easy"])
    assert len(docs) == 3
    out = tmp_path / "out" / "org__new"
    out.mkdir(parents=True)
    lines = [ln for ln in arc.read_text().splitlines() if json.loads(ln)["doc_id"] in docs]
    (out / arc.name).write_text("\n".join(lines) + "\n")
    expected = float(np.mean([json.loads(ln)["acc"] for ln in lines]))

    ambiguous = cli("score", subset_id, "--model", "org/new", str(tmp_path / "out"))
    assert ambiguous.code == 2 and "pass --metric with one of: acc, acc_norm" in ambiguous.stderr
    run = cli(
        "score",
        subset_id,
        "--model",
        "org/new",
        str(tmp_path / "out"),
        "--metric",
        "acc",
        "--baseline",
        "org/base",
        "--json",
    )
    assert run.code == 0, run
    body = run.json()
    assert body["subset_accuracy"] == pytest.approx(expected)
    assert body["baseline"]["n_shared"] == 3


def test_verdict_exit_codes(cli: CLI, gpqa: dict[str, Any], matrix: dict[str, Any]) -> None:
    models = matrix["models"]
    close = cli("verdict", "--benchmark", "gpqa", *CLOSE, "--size", "25")
    assert close.code == 1, close
    assert close.stdout.startswith("NOT distinguishable: " + CLOSE[0])
    far = cli("verdict", "--benchmark", "gpqa", *FAR, "--size", "25")
    assert far.code == 0, far
    assert far.stdout.startswith("DISTINGUISHABLE: " + FAR[0])

    as_json = cli("verdict", "-b", "gpqa", *FAR, "-n", "25", "--json")
    assert as_json.code == 0
    body = as_json.json()
    exact = pair_probability(matrix["correct"], models.index(FAR[0]), models.index(FAR[1]), 25)
    assert body["p_same_order"] == pytest.approx(float(exact.p_greater), abs=1e-9)
    assert body["distinguishable"] is True
    # a stricter threshold flips the answer (P = 0.89 < 0.95)
    assert cli("verdict", "-b", "gpqa", *FAR, "-n", "25", "--threshold", "0.95").code == 1

    unknown = cli("verdict", "-b", "gpqa", FAR[0], "nobody/none", "-n", "25")
    assert unknown.code == 2 and "404" in unknown.stderr and "query.model_b" in unknown.stderr
    assert cli("verdict", "-b", "no-such-bench", *FAR, "-n", "25").code == 2
    assert cli("verdict", "-b", "gpqa", *FAR, "-n", "0").code == 2  # bad args
    dead = cli(
        "verdict", "-b", "gpqa", *FAR, "-n", "25", "--url", f"http://127.0.0.1:{free_port()}"
    )
    assert dead.code == 2 and "Connection error" in dead.stderr


def test_plan(cli: CLI, gpqa: dict[str, Any]) -> None:
    run = cli("plan", "--benchmark", "gpqa", "--gap", "0.05", "--json")
    assert run.code == 0, run
    body = run.json()
    assert body["method"] == "random" and body["basis"] == "exact"
    people = cli("plan", "--benchmark", "gpqa", "--gap", "0.05")
    assert people.stdout.startswith(f"{body['size']} items: the smallest random subset")
    assert cli("plan", "--benchmark", "gpqa", "--gap", "2").code == 2


def _valid_svg(path: Path) -> None:
    root = ET.fromstring(path.read_bytes())
    assert root.tag.endswith("svg") and len(list(root.iter())) > 50


def test_analyze_prints_mdad_table_and_writes_plots(
    cli: CLI, gpqa: dict[str, Any], tmp_path: Path
) -> None:
    method = "subtask_stratified"
    # before any analysis, a non-random verdict needs one: 409 → exit 2
    before = cli("verdict", "-b", "gpqa", *FAR, "-n", "25", "--method", method)
    assert before.code == 2 and "409" in before.stderr, before

    plots = tmp_path / "plots"
    run = cli(
        "analyze",
        "--benchmark",
        "gpqa",
        "--methods",
        f"random,{method}",
        "--sizes",
        "10,25,50",
        "--runs",
        "3",
        "--sources",
        "150",
        "--targets",
        "30",
        "--seed",
        "5",
        "--plots",
        str(plots),
    )
    assert run.code == 0, run
    lines = run.stdout.splitlines()
    assert lines[0].startswith("MDAD on gpqa (robust mode, 3 runs, 150 sources, 30 targets, seed 5")
    table = [ln.split() for ln in lines if ln.split()[:1] in (["random"], [method])]
    assert [(r[0], r[1], r[2]) for r in table] == [
        (m, n, "seen") for m in ("random", method) for n in ("10", "25", "50")
    ]
    assert "analysis of gpqa (runs): succeeded 3/3" in run.stderr
    for name in ("mdad.svg", "agreement-random.svg", f"agreement-{method}.svg"):
        _valid_svg(plots / name)

    png = cli(
        "analyze",
        "-b",
        "gpqa",
        "--methods",
        "random",
        "--sizes",
        "10,25",
        "--runs",
        "2",
        "--sources",
        "100",
        "--targets",
        "20",
        "--seed",
        "6",
        "--plots",
        str(tmp_path / "p"),
        "--image-format",
        "png",
        "--json",
    )
    assert png.code == 0, png
    body = png.json()
    assert {c["n"] for c in body["analysis"]["result"]["mdad"]} == {10, 25}
    assert (tmp_path / "p" / "mdad.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    after = cli("verdict", "-b", "gpqa", *FAR, "-n", "25", "--method", method, "--json")
    assert after.code in (0, 1), after
    assert after.json()["method"] == method


def test_method_params_and_bad_params(cli: CLI, gpqa: dict[str, Any]) -> None:
    run = cli(
        "subset",
        "create",
        "-b",
        "gpqa",
        "--method",
        "subtask_stratified",
        "-n",
        "20",
        "--seed",
        "2",
        "--param",
        "allocation=proportional",
        "--json",
    )
    assert run.code == 0, run
    body = run.json()
    assert body["method"] == "subtask_stratified" and len(body["items"]) == 20
    assert body["provenance"]["params"]["allocation"] == "proportional"
    bad = cli(
        "subset", "create", "-b", "gpqa", "--method", "random", "-n", "20", "--param", "nonsense=1"
    )
    assert bad.code == 2 and "422" in bad.stderr and "params.nonsense" in bad.stderr
    assert cli("subset", "create", "-b", "gpqa", "-n", "5", "--param", "novalue").code == 2


def test_verdict_on_a_fixed_subset(cli: CLI, subset: str, matrix: dict[str, Any]) -> None:
    items = cli("subset", "get", subset, "-f", "json").json()["items"]
    positions = [i["position"] for i in items]
    correct, models = matrix["correct"], matrix["models"]
    for a, b in (CLOSE, FAR):
        ra, rb = correct[models.index(a)], correct[models.index(b)]
        full, sub = ra.mean() - rb.mean(), ra[positions].mean() - rb[positions].mean()
        same = bool(np.sign(full) == np.sign(sub) and sub != 0)
        run = cli("verdict", "--subset", subset, a, b, "--json")
        assert run.code == (0 if same else 1), run
        body = run.json()
        assert body["same_order"] is same
        assert body["subset_estimate_a"] == pytest.approx(ra[positions].mean())
    assert cli("verdict", "--subset", subset, "-b", "gpqa", *FAR).code == 2


def test_benchmarks_list_and_show(cli: CLI, gpqa: dict[str, Any], matrix: dict[str, Any]) -> None:
    listed = cli("benchmarks", "list", "--name", "gpqa", "--json")
    assert listed.code == 0, listed
    (version,) = listed.json()["items"]
    assert (version["n_items"], version["n_models"]) == (448, 419)  # one model held out
    shown = cli(
        "benchmarks", "show", "gpqa", "--match", "mistralai/*", "--match", "google/*", "--json"
    )
    assert shown.code == 0, shown
    models = {m["name"]: m["accuracy"] for m in shown.json()["models"]}
    names = matrix["models"]
    expected = {
        n: float(matrix["correct"][names.index(n)].mean())
        for n in names
        if n.startswith(("mistralai/", "google/"))
    }
    assert models == pytest.approx(expected)
    people = cli("benchmarks", "show", version["id"], "--match", "mistralai/Mistral-Large*")
    assert people.code == 0, people
    assert people.stdout.splitlines()[-1].split() == [
        "mistralai/Mistral-Large-Instruct-2411",
        "45.3%",
        "100.0%",
    ]
