"""``benchslice leaderboard`` on a real service with GPQA pushed (one model held out), against
the engine on the same matrix."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import pytest

from app.core.ranking.leaderboard import leaderboard as core_leaderboard
from tests.cli.conftest import CLI, HELD_OUT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stored(gpqa: dict[str, Any]) -> dict[str, Any]:
    """The pushed matrix as the service ranks it: every model but the held-out one, by name."""
    with np.load(gpqa["path"]) as data:
        correct, models = data["correct"], [str(m) for m in data["models"]]
    keep = sorted((name, i) for i, name in enumerate(models) if name != HELD_OUT)
    return {
        "names": [n for n, _ in keep],
        "correct": correct[[i for _, i in keep]].astype(np.uint8),
    }


def test_full_leaderboard_json_equals_the_engine(cli: CLI, stored: dict[str, Any]) -> None:
    run = cli("leaderboard", "--benchmark", "gpqa", "--format", "json")
    assert run.code == 0, run
    body = run.json()
    engine = core_leaderboard(stored["correct"])
    names = np.asarray(stored["names"])
    assert body["n_models"] == len(stored["names"]) == 419 and body["n_items"] == 448
    assert body["n_tiers"] == engine.n_tiers
    assert [r["model"] for r in body["rows"]] == names[engine.rows.model].tolist()
    assert [r["tier"] for r in body["rows"]] == engine.rows.tier.tolist()
    assert [r["rank_low"] for r in body["rows"]] == engine.rows.rank_low.tolist()
    assert [r["rank_high"] for r in body["rows"]] == engine.rows.rank_high.tolist()
    assert all(r["rank_low"] <= r["rank"] <= r["rank_high"] for r in body["rows"])


def test_table_lists_rank_interval_tier_and_accuracy(cli: CLI, stored: dict[str, Any]) -> None:
    run = cli("leaderboard", "--benchmark", "gpqa", "--top", "12", "--match", "*")
    assert run.code == 0, run
    lines = run.stdout.splitlines()
    assert lines[0].startswith("gpqa@v1: 12 models on 448 items, ")
    assert lines[1].split()[:5] == ["rank", "rank", "interval", "tier", "model"]
    rows = lines[3:]
    assert len(rows) == 12
    acc = stored["correct"].mean(axis=1)
    best = int(np.argmax(acc))
    first = rows[0].split()
    assert first[0] == "1" and first[2] == "1" and first[3] == stored["names"][best]
    assert first[4] == f"{100 * acc[best]:.1f}%"
    assert "method: " in run.stderr and "McNemar" in run.stderr


def test_pairs_csv_and_markdown(cli: CLI, stored: dict[str, Any]) -> None:
    run = cli("leaderboard", "-b", "gpqa", "--top", "6", "--pairs", "--format", "csv")
    assert run.code == 0, run
    rows = list(csv.DictReader(io.StringIO(run.stdout)))
    assert len(rows) == 15
    idx = {n: i for i, n in enumerate(stored["names"])}
    y = stored["correct"].astype(int)
    for r in rows:
        a, b = idx[r["model_a"]], idx[r["model_b"]]
        assert int(r["n10"]) == int(np.sum(y[a] > y[b]))
        assert int(r["n01"]) == int(np.sum(y[a] < y[b]))
    md = cli(
        "leaderboard", "-b", "gpqa", "--top", "6", "--format", "markdown", "--correction", "bh"
    )
    assert md.code == 0, md
    table = [line for line in md.stdout.splitlines() if line.startswith("|")]
    assert len(table) == 2 + 6 and "bh correction" in md.stdout


def test_random_subset_of_100_items(cli: CLI, stored: dict[str, Any]) -> None:
    made = cli("subset", "create", "-b", "gpqa", "--method", "random", "-n", "100", "--seed", "14")
    assert made.code == 0, made
    sid = made.stdout.strip()
    got = cli("subset", "get", sid, "--format", "json")
    assert got.code == 0, got
    positions = np.array(sorted(item["position"] for item in got.json()["items"]))
    run = cli("leaderboard", "-b", "gpqa", "--subset", sid, "--json")
    assert run.code == 0, run
    body = run.json()
    # a uniform random subset: the exact finite-population test of the 448-item differences
    engine = core_leaderboard(
        stored["correct"][:, positions], population="benchmark", n_population=448
    )
    assert body["population"] == "benchmark" and body["n_items"] == 100
    assert body["n_tiers"] == engine.n_tiers
    assert [r["tier"] for r in body["rows"]] == engine.rows.tier.tolist()
    full = cli("leaderboard", "-b", "gpqa", "--json").json()
    assert body["n_tiers"] < full["n_tiers"]


def test_errors_exit_2_naming_the_field(cli: CLI, stored: dict[str, Any]) -> None:
    one = cli("leaderboard", "-b", "gpqa", "--models", stored["names"][0])
    assert one.code == 2 and "query.models" in one.stderr, one
    unknown = cli("leaderboard", "-b", "gpqa", "--models", f"{stored['names'][0]},nobody/none")
    assert unknown.code == 2 and "404" in unknown.stderr and "nobody/none" in unknown.stderr
    assert cli("leaderboard", "-b", "no-such-bench").code == 2
    assert cli("leaderboard", "-b", "gpqa", "--correction", "bonferroni").code == 2
    assert cli("leaderboard", "-b", "gpqa", "--format", "xml").code == 2
