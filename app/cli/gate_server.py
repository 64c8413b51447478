"""``benchslice gate`` against a server (issue 34): create or resume a gate, then answer its
rounds from stored results (``--answers NAME=FILE``) until it has its outcome.

A gate found open for the same candidate, benchmarks, baselines, margins, rule and alpha is
resumed (a CI job that was killed mid-round picks up where the server stands: a round the server
already applied is answered as a replay and counted once). The document it prints is the one
``--offline`` prints, plus the gate's id.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.client import Client
from app.schemas.gates import GatePublic


def candidate_values(path: Path, model: str, name: str) -> dict[str, float]:
    """``{item_id: value}`` of ``model``'s row of an .npz matrix (items without a result left
    out). Raises ``ValueError`` naming what is wrong."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            models = [str(m) for m in data["models"]]
            matrix = np.asarray(data["correct"], dtype=np.float64)
            ids = [str(i) for i in data["item_ids"]] if "item_ids" in data else None
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"--answers {name}: cannot read {path}: {exc}") from None
    if ids is None:
        raise ValueError(f"--answers {name}: {path.name} has no item_ids (a server names items)")
    if model not in models:
        raise ValueError(f"--answers {name}: {path.name} has no row for {model!r}")
    row = matrix[models.index(model)]
    return {i: float(v) for i, v in zip(ids, row.tolist(), strict=True) if np.isfinite(v)}


def _refs(b) -> set[str]:
    return {b.benchmark, f"{b.benchmark.split('@')[0]}@v{b.benchmark_version}", str(b.version_id)}


def _budgets(body: dict[str, Any]) -> set[tuple[str, float | None]]:
    """The cost budgets a gate body asks for, as ``(unit, limit)``."""
    out: set[tuple[str, float | None]] = set()
    if body.get("max_cost") is not None:
        out.add((body.get("cost_unit", "usd"), float(body["max_cost"])))
    if body.get("max_tokens") is not None:
        out.add(("tokens", float(body["max_tokens"])))
    return out


def find_open(client: Client, body: dict[str, Any]) -> GatePublic | None:
    """The newest open gate asking the same question, if any."""
    page = client.list_gates(model=body["model"], outcome="open", limit=100)
    for summary in page.items:
        if len(summary.benchmarks) != len(body["benchmarks"]):
            continue
        gate = client.get_gate(summary.id)
        same = gate.state == "open" and gate.rule == body["rule"] and gate.alpha == body["alpha"]
        same = same and {(b.unit, b.limit) for b in gate.budgets} == _budgets(body)
        same = same and gate.allocation == body.get("allocation", "progress")
        for want, have in zip(body["benchmarks"], gate.benchmarks, strict=True):
            same = same and want["benchmark"] in _refs(have)
            same = same and want["margin"] == have.margin and want["baseline"] == have.baseline
        if same:
            return gate
    return None


def drive(client: Client, gate: GatePublic, answers: list[dict[str, float]], say) -> GatePublic:
    """Post every round's results from ``answers`` (one ``{item_id: value}`` per benchmark, in
    the gate's order) until the gate is closed."""
    index = {b.benchmark: j for j, b in enumerate(gate.benchmarks)}
    while gate.state == "open" and gate.next_round is not None:
        rnd = gate.next_round
        results = {}
        for key, items in rnd.items.items():
            values = answers[index[key]]
            missing = [it.item_id for it in items if it.item_id not in values]
            if missing:
                raise ValueError(f"--answers {key}: no result for item {missing[0]!r} "
                                 f"({len(missing)} of the round's {len(items)})")  # fmt: skip
            results[key] = {it.item_id: values[it.item_id] for it in items}
        gate = client.post_gate_results(gate.id, rnd.round, results)
        say(f"round {rnd.round}: {gate.items_used} items, {gate.outcome}")
    return gate


def round_samples(gate: GatePublic) -> dict[str, list[int]]:
    """The open round for ``lm_eval --samples``: every benchmark's ``{task: [doc_id, ...]}``
    merged (a task two benchmarks share gets the union)."""
    assert gate.next_round is not None
    merged: dict[str, set[int]] = {}
    for per_task in gate.next_round.samples.values():
        for task, ids in per_task.items():
            merged.setdefault(task, set()).update(ids)
    return {task: sorted(ids) for task, ids in sorted(merged.items())}


def round_sample_ids(gate: GatePublic) -> str:
    """The open round for ``inspect eval --sample-id``: every benchmark's sample ids (an item
    ``{task}/{id}`` of a benchmark made from Inspect logs is sample ``id`` of ``task``), each
    once, comma-separated."""
    from app.cli.sessions import sample_ids

    assert gate.next_round is not None
    seen: dict[str, None] = {}
    for items in gate.next_round.items.values():
        seen.update(dict.fromkeys(sample_ids(items).split(",")))
    return ",".join(k for k in seen if k)


def run_rounds(client: Client, gate: GatePublic, command: str, workdir: Path, say) -> GatePublic:
    """Each round: write its samples file, run ``command`` once for every open benchmark
    (``{samples}``, ``{tasks}``, ``{sample_ids}``, ``{output}`` replaced), push the logs it
    wrote. A failing command raises ``RuntimeError``: the gate stays open at that round (rerun
    to resume)."""
    from app.cli.common import find_source
    from app.cli.sessions import stderr_fd

    while gate.state == "open" and gate.next_round is not None:
        number = gate.next_round.round
        samples = round_samples(gate)
        path = workdir / f"samples-{number:03d}.json"
        output = workdir / f"output-{number:03d}"
        path.write_text(json.dumps(samples))
        output.mkdir(exist_ok=True)
        cmd = (
            command.replace("{samples}", shlex.quote(str(path)))
            .replace("{tasks}", shlex.quote(",".join(samples)))
            .replace("{sample_ids}", shlex.quote(round_sample_ids(gate)))
            .replace("{output}", shlex.quote(str(output)))
        )
        sys.stdout.flush()
        done = subprocess.run(cmd, shell=True, check=False, stdout=stderr_fd())  # the user's
        if done.returncode != 0:
            raise RuntimeError(
                f"the command exited with {done.returncode} on round {number}: {cmd}"
            )
        source = find_source(output)
        gate = client.post_gate_result_files(gate.id, number, source.files, model=gate.model)
        say(f"round {number}: {gate.items_used} items, {gate.outcome}")
    return gate


def server_doc(gate: GatePublic) -> dict[str, Any]:
    """The document ``--json`` prints (the ``--offline`` one, plus ``gate``)."""
    rows = [
        {
            "benchmark": b.benchmark,
            "state": b.state,
            "delta": b.delta,
            "bound": b.bound,
            "upper": b.upper,
            "margin": b.margin,
            "items": b.items,
            "n_items": b.n_items,
        }
        for b in gate.benchmarks
    ]
    doc: dict[str, Any] = {
        "outcome": gate.outcome,
        "model": gate.model,
        "baseline": gate.benchmarks[0].baseline,
        "rule": gate.rule,
        "alpha": gate.alpha,
        "prediction": gate.prediction,
        "seed": gate.seed,
        "batch_size": gate.batch_size,
        "budget": gate.budget,
        "items_used": gate.items_used,
        "items_total": gate.items_total,
        "regressed": list(gate.regressed),
        "benchmarks": rows,
        "gate": str(gate.id),
        "offline": False,
    }
    if gate.budgets:
        doc["budgets"] = [b.model_dump(mode="json") for b in gate.budgets]
    if gate.allocation == "cost":  # as the offline document otherwise (progress)
        doc["allocation"], doc["allocation_unit"] = gate.allocation, gate.allocation_unit
        doc["allocation_costs"] = {b.benchmark: b.predicted_cost_per_item for b in gate.benchmarks}
    return doc


__all__ = [
    "candidate_values",
    "drive",
    "find_open",
    "round_sample_ids",
    "round_samples",
    "run_rounds",
    "server_doc",
]
