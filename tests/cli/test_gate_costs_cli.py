"""`benchslice gate --max-cost/--max-tokens/--cost-unit` (issue 37): refused offline (only the
server keeps the stored models' per-item costs), reported in the summary and the text output."""

from __future__ import annotations

import pytest

from app.cli.gate_server import find_open
from app.cli.gates import gate_summary
from tests.cli.test_gate_offline import _gate, files  # noqa: F401 (the fixture)


@pytest.mark.parametrize(
    "args, hint",
    [
        (["--max-cost", "1.5"], "--max-cost"),
        (["--max-tokens", "1000"], "--max-tokens"),
        (["--max-cost", "0"], "--max-cost"),
        (["--max-cost", "1", "--cost-unit", "eur"], "--cost-unit"),
    ],
)
def test_cost_budgets_are_refused_offline_naming_the_option(files, args, hint) -> None:  # noqa: F811
    res = _gate(files, "--model", "cand", "--margin", "0.02", *args)
    assert res.exit_code == 2, res.stdout
    assert hint in res.stderr


def test_the_summary_says_what_a_budget_spent() -> None:
    doc = {
        "outcome": "inconclusive", "model": "org/new", "baseline": "org/old", "alpha": 0.05,
        "rule": "no_regression", "seed": 1, "items_used": 30, "items_total": 100,
        "regressed": [], "benchmarks": [],
        "budgets": [{"unit": "tokens", "limit": 1500.0, "spent": 1612.0, "exhausted": True,
                     "spent_source": "predicted from stored models"}],
    }  # fmt: skip
    text = gate_summary(doc)
    assert "Cost (tokens): spent 1,612 of 1,500 tokens, used up (predicted from stored models)" in (
        text
    )
    assert "Cost (" not in gate_summary({**doc, "budgets": []})


class _Page:
    items: list = []


class _Client:
    """A client whose only open gate has a tokens budget of 1,500."""

    def __init__(self, gate) -> None:
        self.gate = gate

    def list_gates(self, **_):
        page = _Page()
        page.items = [type("S", (), {"id": "g", "benchmarks": ["a"]})()]
        return page

    def get_gate(self, _):
        return self.gate


def test_resume_needs_the_same_budgets() -> None:
    budget = type("B", (), {"unit": "tokens", "limit": 1500.0})()
    have = type("H", (), {"benchmark": "a", "version_id": "v", "benchmark_version": 1,
                          "margin": 0.02, "baseline": "old"})()  # fmt: skip
    gate = type("G", (), {"state": "open", "rule": "no_regression", "alpha": 0.05,
                          "benchmarks": [have], "budgets": [budget],
                          "allocation": "progress"})()  # fmt: skip
    body = {"model": "new", "rule": "no_regression", "alpha": 0.05,
            "benchmarks": [{"benchmark": "a", "margin": 0.02, "baseline": "old"}]}  # fmt: skip
    client = _Client(gate)
    assert find_open(client, {**body, "max_tokens": 1500.0}) is gate  # type: ignore[arg-type]
    assert find_open(client, body) is None  # type: ignore[arg-type]
    assert find_open(client, {**body, "max_cost": 1500.0}) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args, hint",
    [(["--allocation", "cost"], "--allocation"), (["--allocation", "cheap"], "--allocation")],
)
def test_cost_allocation_is_refused_offline_naming_the_option(files, args, hint) -> None:  # noqa: F811
    res = _gate(files, "--model", "cand", "--margin", "0.02", *args)
    assert res.exit_code == 2, res.stdout
    assert hint in res.stderr


def test_the_summary_says_how_rounds_were_split() -> None:
    doc = {
        "outcome": "pass", "model": "org/new", "baseline": "org/old", "alpha": 0.05,
        "rule": "no_regression", "seed": 1, "items_used": 30, "items_total": 100,
        "regressed": [], "benchmarks": [], "allocation": "cost", "allocation_unit": "tokens",
        "allocation_costs": {"mmlu": 12.5, "gpqa": 1340.0},
    }  # fmt: skip
    text = gate_summary(doc)
    assert "Allocation: cost (progress per unit of predicted cost; tokens per item" in text
    assert "mmlu 12.5, gpqa 1,340" in text
    assert "Allocation" not in gate_summary({**doc, "allocation": "progress"})


def test_resume_needs_the_same_allocation() -> None:
    have = type("H", (), {"benchmark": "a", "version_id": "v", "benchmark_version": 1,
                          "margin": 0.02, "baseline": "old"})()  # fmt: skip
    gate = type("G", (), {"state": "open", "rule": "no_regression", "alpha": 0.05,
                          "benchmarks": [have], "budgets": [], "allocation": "cost"})()  # fmt: skip
    body = {"model": "new", "rule": "no_regression", "alpha": 0.05,
            "benchmarks": [{"benchmark": "a", "margin": 0.02, "baseline": "old"}]}  # fmt: skip
    client = _Client(gate)
    assert find_open(client, {**body, "allocation": "cost"}) is gate  # type: ignore[arg-type]
    assert find_open(client, body) is None  # type: ignore[arg-type]
