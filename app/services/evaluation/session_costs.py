"""Cost budgets and cost-aware draws of evaluation sessions, and cost budgets of release gates
(issue 37).

A session may carry budgets (``max_cost`` in ``cost_unit``, ``max_tokens`` in input + output
tokens) and may draw cost-aware (``cost_aware``: allocation scores per unit of predicted cost,
:mod:`app.core.sequential.cost`). Both live in the engine state's ``"cost"`` part:

``units`` (B,), ``limits`` (B,) (NaN: tracked without a budget), ``predicted`` (B, N) (the stored
models' per-item median, NaN where no stored model reports the item), ``spent`` (B,),
``measured`` / ``guessed`` (B,) (items whose cost was posted by the candidate / taken from the
prediction), ``aware`` (0/1). The design's costs are ``predicted[0]`` with unreported items at the
median item, fixed when the session starts and stored with it, so every draw is predictable and a
session replays exactly.

A batch's cost is added when its results are applied: the candidate's own costs where the post
carries them (CSV cost columns, JSON cost fields: *measured*), else the prediction. Once
``spent >= limit`` the session takes no new batch and ends ``exhausted`` (undecided) with what it
spent: it overshoots by at most one batch (:func:`app.core.sequential.cost.worst_batch_cost`).

A release gate carries the same budgets (:func:`gate_start`, :func:`gate_spend`,
:func:`gate_budgets`) in its engine state's ``"cost"`` part: ``predicted`` becomes one array per
benchmark, ``predicted{j}`` (B, N_j), with an item no stored model reports set to the median of
the benchmark's reported items (a round posted as JSON carries no costs, so every item needs a
prediction); a benchmark with no reported item at all is a 422 naming the budget. A round's cost
is added when its results are applied (the costs a results-files upload carries: measured; else
the prediction); once ``spent >= limit`` the gate serves no new round and ends inconclusive
(``exhausted``) with what it spent, overshooting by at most one round's worst case.

A gate with ``allocation="cost"`` splits its rounds by progress per unit of predicted cost
(:func:`gate_allocation_costs`: each benchmark's mean predicted cost per item in ``cost_unit``,
fixed at creation and stored in the engine state, so the allocation stays predictable).
"""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from app.core.sequential.cost import (
    COST_GAMMA,
    budget_open,
    item_cost_summary,
    worst_batch_cost,
)
from app.db.models import BenchmarkVersion
from app.errors import FieldIssue, InvalidInput
from app.ingest import ParsedResults
from app.ingest.costs import COST_FIELDS, cost_matrix
from app.schemas.gates import GateCreate
from app.schemas.sessions import BudgetState, SessionCreate
from app.services.catalog.benchmarks import item_index, stored_costs

PREDICTED = "predicted from stored models (per-item median over the models that report it)"
MEASURED = "measured on this candidate"


def unit_costs(costs: np.ndarray, unit: str) -> np.ndarray:
    """(M, N) costs in ``unit`` from (M, 4, N) fields; ``tokens`` = input + output (NaN if both
    are unknown)."""
    if unit == "tokens":
        pair = costs[:, [COST_FIELDS.index("input_tokens"), COST_FIELDS.index("output_tokens")]]
        known = np.isfinite(pair).any(axis=1)
        return np.where(known, np.nansum(pair, axis=1), np.nan)
    return costs[:, COST_FIELDS.index(unit)]


def _limits(body: SessionCreate | GateCreate) -> list[tuple[str, float]]:
    """``(unit, limit)`` of each budget asked for (max_cost first)."""
    budgets = []
    if body.max_cost is not None:
        budgets.append((body.cost_unit, float(body.max_cost)))
    if body.max_tokens is not None:
        if body.max_cost is not None and body.cost_unit == "tokens":
            raise InvalidInput(
                "max_cost in tokens and max_tokens are the same budget; give one",
                field="max_tokens",
            )
        budgets.append(("tokens", float(body.max_tokens)))
    return budgets


def start(session: Session, version: BenchmarkVersion, body: SessionCreate) -> dict | None:
    """The ``"cost"`` part of a new session, or None without budgets and cost-aware draws."""
    budgets = _limits(body)
    if not budgets and not body.cost_aware:
        return None
    if body.cost_aware:  # the design's unit first (tracked without a budget if it has none)
        if not any(u == body.cost_unit for u, _ in budgets):
            budgets.append((body.cost_unit, np.nan))
        budgets.sort(key=lambda b: b[0] != body.cost_unit)
    n = item_index(version).n_items
    _, costs, _ = stored_costs(session, version.id, n)
    predicted = np.full((len(budgets), n), np.nan)
    for b, (unit, _) in enumerate(budgets):
        if costs.shape[0]:
            predicted[b] = item_cost_summary(unit_costs(costs, unit)).median
    if body.cost_aware and not np.isfinite(predicted[0]).any():
        raise InvalidInput(
            f"no stored model reports {budgets[0][0]} on this benchmark: cost-aware draws need "
            "predicted costs",
            field="cost_aware",
            message=f"upload results with {budgets[0][0]} costs first, or draw without costs",
        )
    return {
        "units": np.array([u for u, _ in budgets]),
        "limits": np.array([lim for _, lim in budgets], dtype=np.float64),
        "predicted": predicted,
        "spent": np.zeros(len(budgets)),
        "measured": np.zeros(len(budgets), dtype=np.int64),
        "guessed": np.zeros(len(budgets), dtype=np.int64),
        "aware": np.int64(bool(body.cost_aware)),
    }


def _filled(pred: np.ndarray) -> np.ndarray:
    known = np.isfinite(pred) & (pred > 0)
    fill = float(np.median(pred[known])) if known.any() else 1.0
    return np.where(known, pred, fill)


def design_costs(part: dict | None) -> np.ndarray | None:
    """Predicted per-item costs of a cost-aware session's design (None: the policy's own)."""
    if part is None or not int(part["aware"]):
        return None
    return _filled(np.asarray(part["predicted"], dtype=np.float64)[0])


def design_gamma(part: dict | None) -> float | None:
    """The floor of a cost-aware session's design (None: the policy's default)."""
    return COST_GAMMA if design_costs(part) is not None else None


def _measured(
    parsed: ParsedResults, version: BenchmarkVersion, batch: np.ndarray, unit: str
) -> np.ndarray:
    """The candidate's posted costs of the batch in ``unit``, in serving order (NaN: not posted)."""
    out = np.full(batch.size, np.nan)
    mat = cost_matrix(parsed.costs, parsed.n_items)
    if mat is None:
        return out
    per_item = unit_costs(mat[None, :, :], unit)[0]
    if parsed.item_ids is None:
        return per_item if per_item.size == batch.size else out
    index = item_index(version)
    full = np.full(index.n_items, np.nan)
    full[index.positions(np.asarray(parsed.item_ids, dtype=str))] = per_item
    return full[batch]


def spend(part: dict, parsed: ParsedResults, version: BenchmarkVersion, batch: np.ndarray) -> dict:
    """The part after paying for ``batch``: measured costs where posted, else predicted."""
    out = {k: np.array(v, copy=True) for k, v in part.items()}
    for b, unit in enumerate(out["units"].tolist()):
        got = _measured(parsed, version, batch, unit)
        pred = out["predicted"][b][batch]
        use = np.where(np.isfinite(got), got, pred)
        if not np.isfinite(use).all():
            raise InvalidInput(
                f"this session tracks {unit} and no stored model reports it for every item of "
                "the batch: post the batch with its costs",
                errors=[FieldIssue(("costs", unit), f"give {unit} per item (a cost column)")],
            )
        out["spent"][b] += float(use.sum())
        out["measured"][b] += int(np.isfinite(got).sum())
        out["guessed"][b] += int((~np.isfinite(got)).sum())
    return out


def exhausted(part: dict | None) -> bool:
    """Whether a budget is used up (no new batch)."""
    if part is None:
        return False
    limits = np.asarray(part["limits"], dtype=np.float64)
    spent = np.asarray(part["spent"], dtype=np.float64)
    has = np.isfinite(limits)
    return bool((~budget_open(spent[has], limits[has])).any())


def session_budgets(
    part: dict | None,
    *,
    goal: str,
    difference,
    seen: np.ndarray,
    items_used: int,
    is_open: bool,
) -> list[BudgetState]:
    """A session's budgets, with the rough cost-to-decision prediction of a ``decide`` goal
    (``difference``: its current interval for the difference)."""
    if part is None:
        return []
    half = gap = None
    if goal == "decide" and difference is not None:
        half = (difference.upper - difference.lower) / 2
        gap = abs((difference.upper + difference.lower) / 2)
    return public(part, seen=seen, items_used=items_used, is_open=is_open, half_width=half, gap=gap)


def spent_budgets(part: dict | None) -> list[str]:
    """Units of the budgets that are used up (``spent >= limit``), in the session's order."""
    if part is None:
        return []
    limits = np.asarray(part["limits"], dtype=np.float64)
    spent = np.asarray(part["spent"], dtype=np.float64)
    units = np.asarray(part["units"]).tolist()
    gone = np.isfinite(limits) & ~budget_open(spent, np.where(np.isfinite(limits), limits, np.inf))
    return [str(u) for u, g in zip(units, gone.tolist(), strict=True) if g]


def _source(measured: int, guessed: int) -> str:
    if guessed == 0 and measured:
        return MEASURED
    if measured == 0:
        return PREDICTED if guessed else "nothing spent yet"
    return f"{MEASURED} ({measured} items); {PREDICTED} ({guessed} items)"


def public(
    part: dict | None,
    *,
    seen: np.ndarray,
    items_used: int,
    is_open: bool,
    half_width: float | None,
    gap: float | None,
) -> list[BudgetState]:
    """The budgets as the API shows them.

    ``half_width`` and ``gap`` (current half-width of the deciding interval and the distance of
    its centre from the decision boundary) give the rough items-to-decision prediction
    ``t (h / gap)^2 - t`` (a half-width shrinking as ``1/sqrt(t)``).
    """
    if part is None:
        return []
    out = []
    left = np.ones(np.asarray(part["predicted"]).shape[1], dtype=bool)
    left[seen] = False
    aware = design_costs(part)
    for b, unit in enumerate(np.asarray(part["units"]).tolist()):
        pred = np.asarray(part["predicted"], dtype=np.float64)[b]
        per_item = None
        if np.isfinite(pred[left]).any():
            costs = _filled(pred)[left]
            if aware is not None:  # the cost-aware design's expected draw (floor included)
                w = 1.0 / np.sqrt(aware[left])
                pi = (1 - COST_GAMMA) * w / w.sum() + COST_GAMMA / left.sum()
                per_item = float((pi * costs).sum())
            else:
                per_item = float(costs.mean())
        to_go = None
        if is_open and per_item is not None and half_width and gap and gap > 0 and items_used:
            need = items_used * (half_width / gap) ** 2 - items_used
            to_go = per_item * float(np.clip(need, 0, left.sum()))
        limit = float(part["limits"][b])
        spent = float(part["spent"][b])
        out.append(
            BudgetState(
                unit=unit,
                limit=None if not np.isfinite(limit) else limit,
                spent=spent,
                spent_source=_source(int(part["measured"][b]), int(part["guessed"][b])),
                exhausted=bool(np.isfinite(limit) and spent >= limit),
                predicted_per_item=per_item,
                predicted_to_decision=to_go,
            )
        )
    return out


# --- release gates ------------------------------------------------------------------------------


def gate_start(
    session: Session,
    versions: list[BenchmarkVersion],
    keys: list[str],
    body: GateCreate,
    first_round: np.ndarray,
) -> dict | None:
    """The ``"cost"`` part of a new gate (None without budgets). ``first_round``: the items per
    benchmark of its first round (:func:`~app.core.sequential.gating.gates.gate_plan`). 422
    naming the budget when a benchmark has no stored costs in its unit or the budget is below
    one round's worst-case predicted cost."""
    budgets = _limits(body)
    if not budgets:
        return None
    fields = ["max_cost"] * (body.max_cost is not None) + ["max_tokens"] * (
        body.max_tokens is not None
    )
    stored = []
    for version in versions:
        n = item_index(version).n_items
        stored.append(stored_costs(session, version.id, n)[1])
    part: dict = {}
    errors = []
    for b, ((unit, limit), field) in enumerate(zip(budgets, fields, strict=True)):
        worst = 0.0
        for j, (costs, key) in enumerate(zip(stored, keys, strict=True)):
            n = costs.shape[2]
            pred = np.full(n, np.nan)
            if costs.shape[0]:
                pred = item_cost_summary(unit_costs(costs, unit)).median
            if not np.isfinite(pred).any():
                errors.append(
                    FieldIssue(
                        (field,),
                        f"no stored model reports {unit} on {key}: upload results with {unit} "
                        "costs first, or gate without a cost budget",
                    )
                )
                continue
            pred = _filled(pred)
            part.setdefault(f"predicted{j}", np.zeros((len(budgets), n)))[b] = pred
            if int(first_round[j]):
                worst += float(worst_batch_cost(pred[None, :], np.ones((1, n)), first_round[j])[0])
        if not errors and limit < worst:
            raise InvalidInput(
                f"a {field} of {limit:g} {unit} is below one round's worst-case predicted cost "
                f"({worst:.6g} {unit})",
                field=field,
                message=f"at least {worst:.6g} (one round's worst case)",
            )
    if errors:
        raise InvalidInput(
            "a cost budget needs predicted costs: the stored models' per-item costs", errors=errors
        )
    return {
        "units": np.array([u for u, _ in budgets]),
        "limits": np.array([lim for _, lim in budgets], dtype=np.float64),
        **part,
        "spent": np.zeros(len(budgets)),
        "measured": np.zeros(len(budgets), dtype=np.int64),
        "guessed": np.zeros(len(budgets), dtype=np.int64),
    }


def gate_allocation_costs(
    session: Session, versions: list[BenchmarkVersion], keys: list[str], body: GateCreate
) -> np.ndarray | None:
    """Each benchmark's mean predicted cost per item in ``cost_unit`` for ``allocation="cost"``
    (None otherwise): the stored models' per-item medians, an unreported item at the median of
    the reported ones. 422 naming ``allocation`` for every benchmark without stored costs."""
    if body.allocation != "cost":
        return None
    unit, out, errors = body.cost_unit, [], []
    for version, key in zip(versions, keys, strict=True):
        costs = stored_costs(session, version.id, item_index(version).n_items)[1]
        pred = item_cost_summary(unit_costs(costs, unit)).median if costs.shape[0] else None
        if pred is None or not (np.isfinite(pred) & (pred > 0)).any():
            errors.append(
                FieldIssue(
                    ("allocation",),
                    f"no stored model reports {unit} on {key}: upload results with {unit} costs "
                    "first, choose the cost_unit they report, or allocate by progress",
                )
            )
            continue
        out.append(float(_filled(pred).mean()))
    if errors:
        raise InvalidInput(
            "allocation 'cost' needs predicted costs: the stored models' per-item costs",
            errors=errors,
        )
    return np.asarray(out)


def gate_posted_costs(
    parsed: ParsedResults, versions: list[BenchmarkVersion], positions: list[np.ndarray]
) -> list[np.ndarray] | None:
    """The candidate's posted costs of a round per benchmark, (4, c_j) fields in the round's
    serving order (NaN: not posted); None when the upload carries no costs."""
    mat = cost_matrix(parsed.costs, parsed.n_items)
    if mat is None or parsed.item_ids is None:
        return None
    ids = np.asarray(parsed.item_ids, dtype=str)
    out = []
    for version, pos in zip(versions, positions, strict=True):
        index = item_index(version)
        full = np.full((mat.shape[0], index.n_items), np.nan)
        mine = np.isin(ids, index.item_ids[pos])
        full[:, index.positions(ids[mine])] = mat[:, mine]
        out.append(full[:, pos])
    return out


def gate_spend(part: dict, positions: list[np.ndarray], posted: list[np.ndarray] | None) -> dict:
    """The part after paying for a round (``positions`` per benchmark): the posted costs where
    given (measured), else the predicted ones."""
    out = {k: np.array(v, copy=True) for k, v in part.items()}
    for b, unit in enumerate(out["units"].tolist()):
        for j, pos in enumerate(positions):
            if not pos.size:
                continue
            pred = out[f"predicted{j}"][b][pos]
            got = np.full(pos.size, np.nan)
            if posted is not None:
                got = unit_costs(posted[j][None, :, :], unit)[0]
            out["spent"][b] += float(np.where(np.isfinite(got), got, pred).sum())
            out["measured"][b] += int(np.isfinite(got).sum())
            out["guessed"][b] += int((~np.isfinite(got)).sum())
    return out


def gate_budgets(part: dict | None, open_round: list[np.ndarray] | None) -> list[BudgetState]:
    """A gate's budgets as the API shows them; ``predicted_per_item``: the mean predicted cost
    of the open round's items (``open_round``: their positions per benchmark; None once
    closed). No prediction to a decision (a gate's rounds are split across benchmarks)."""
    if part is None:
        return []
    out = []
    for b, unit in enumerate(np.asarray(part["units"]).tolist()):
        per_item = None
        if open_round is not None and sum(p.size for p in open_round):
            pred = [part[f"predicted{j}"][b][p] for j, p in enumerate(open_round)]
            per_item = float(np.concatenate(pred).mean())
        limit, spent = float(part["limits"][b]), float(part["spent"][b])
        out.append(
            BudgetState(
                unit=unit,
                limit=limit,
                spent=spent,
                spent_source=_source(int(part["measured"][b]), int(part["guessed"][b])),
                exhausted=spent >= limit,
                predicted_per_item=per_item,
                predicted_to_decision=None,
            )
        )
    return out


__all__ = [
    "MEASURED",
    "PREDICTED",
    "design_costs",
    "design_gamma",
    "exhausted",
    "gate_allocation_costs",
    "gate_budgets",
    "gate_posted_costs",
    "gate_spend",
    "gate_start",
    "public",
    "session_budgets",
    "spend",
    "spent_budgets",
    "start",
    "unit_costs",
]
