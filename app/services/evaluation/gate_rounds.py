"""Which round a gate's results post answers, and its values in serving order (issue 34).

A post names its round (``round``). The open round is applied; an answered one may be resent
(same items and values: a replay); a later one, or the open round of a closed gate, is a 409.
Every benchmark the round served must be given with exactly its items (any order; 422 naming the
entry otherwise).
"""

from __future__ import annotations

import numpy as np

from app.db.models import Gate
from app.errors import Conflict, FieldIssue, InvalidInput
from app.schemas.gates import GateResults
from app.services.catalog.benchmarks import item_index
from app.services.evaluation.batches import MAX_LISTED


def posted_values(
    row: Gate, body: GateResults, positions: list[np.ndarray], versions
) -> list[np.ndarray]:
    """The body's values per benchmark in the round's serving order (422 naming the entry)."""
    keys = [b["key"] for b in row.benchmarks]
    given: dict[int, int] = {}
    errors: list[FieldIssue] = []
    for i, entry in enumerate(body.results):
        if entry.benchmark not in keys:
            errors.append(
                FieldIssue(
                    ("results", i, "benchmark"), f"not a benchmark of this gate ({', '.join(keys)})"
                )
            )
        elif keys.index(entry.benchmark) in given:
            errors.append(FieldIssue(("results", i, "benchmark"), "given twice"))
        else:
            given[keys.index(entry.benchmark)] = i
        if len(entry.item_ids) != len(entry.correct):
            errors.append(
                FieldIssue(
                    ("results", i, "correct"),
                    f"{len(entry.correct)} values for {len(entry.item_ids)} item ids",
                )
            )
        elif any(not (0.0 <= v <= 1.0) for v in entry.correct):
            errors.append(FieldIssue(("results", i, "correct"), "values must lie in [0, 1]"))
    for j, pos in enumerate(positions):
        if pos.size and j not in given:
            errors.append(
                FieldIssue(
                    ("results",), f"no results for {keys[j]!r} ({pos.size} items this round)"
                )
            )
    if errors:
        raise InvalidInput("invalid round results", errors=errors)
    out = []
    for j, pos in enumerate(positions):
        if j not in given:
            out.append(np.zeros(0))
            continue
        i = given[j]
        entry = body.results[i]
        index = item_index(versions[j])
        got = index.positions(np.asarray(entry.item_ids, dtype=str), field=f"results.{i}.item_ids")
        expected = set(pos.tolist())
        if got.size != pos.size or set(got.tolist()) != expected or np.unique(got).size != got.size:
            extra = [str(index.item_ids[p]) for p in got.tolist() if p not in expected]
            missing = sorted(expected - set(got.tolist()))
            detail = (
                f"{keys[j]!r}: the round serves {pos.size} items; "
                f"{len(missing)} missing, {len(extra)} not served this round"
            )
            issues = [
                FieldIssue(("results", i, "item_ids"), f"not served this round: {e!r}")
                for e in extra[:MAX_LISTED]
            ]
            issues += [
                FieldIssue(("results", i, "item_ids"), f"missing: {str(index.item_ids[m])!r}")
                for m in missing[:MAX_LISTED]
            ]
            raise InvalidInput(
                detail,
                errors=issues or [FieldIssue(("results", i, "item_ids"), "an item id given twice")],
            )
        slot = {p: k for k, p in enumerate(pos.tolist())}
        aligned = np.empty(pos.size)
        aligned[[slot[p] for p in got.tolist()]] = np.asarray(entry.correct, dtype=np.float64)
        out.append(aligned)
    return out


def round_slices(row: Gate, number: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """An answered round's positions and stored values per benchmark."""
    hist = row.history[number - 1]
    keys = [b["key"] for b in row.benchmarks]
    before = sum(sum(h["counts"].get(k, 0) for k in keys) for h in row.history[: number - 1])
    flat = np.frombuffer(row.values, dtype="<f8")
    positions, values = [], []
    at = before
    for k in keys:
        pos = np.asarray(hist["items"].get(k, []), dtype=np.int64)
        positions.append(pos)
        values.append(flat[at : at + pos.size])
        at += pos.size
    return positions, values


def check_round(row: Gate, number: int, state: str) -> None:
    applied = len(row.history or [])
    if number <= applied:
        return
    open_now = state == "open" and any(row.open_counts or [])
    if number == applied + 1 and open_now:
        return
    if number == applied + 1:
        raise Conflict(
            f"gate {row.id} is {state}; it takes no more results",
            field="gate_id",
            message=f"gate is {state}",
        )
    raise Conflict(
        f"round {number} has not been served (the open round is {applied + 1})"
        if open_now
        else f"round {number} has not been served (the gate is {state})",
        field="round",
        message=f"at most {applied + (1 if open_now else 0)}",
    )


__all__ = ["check_round", "posted_values", "round_slices"]
