"""Release gates (issue 34): one candidate against a baseline on K benchmarks, one decision.

The engine is :mod:`app.core.sequential.gating.gates` (statistics-next §8): one-sided confidence
sequences per benchmark, non-inferiority at ``alpha`` (intersection-union: a wrong PASS needs a
miss on a benchmark that is really regressed), regression and ``better`` at ``alpha / K`` (a union
bound), so ``P(wrong PASS) <= alpha`` and ``P(wrong FAIL) <= alpha`` whatever ``K``. A round
serves the next items of every benchmark still open, split by :func:`~app.core.sequential.gating.
gates.allocate` (a function of the past only), and nothing to decided ones.

The service runs exactly the rounds :func:`~app.core.sequential.gating.gates.run_gates` runs (the
same serving orders from the seed, the same allocation and bets), one per request, so a gate on
the server and ``benchslice gate --offline`` on the same results and seed come to the same
outcome with the same items.

* The baselines' full results are copied at creation (a later upload cannot change a gate).
* Exactly once: a post names its round. The open round is applied; a resend of an answered
  round (same items, same values) changes nothing and is answered with the gate as it stands,
  marked replayed; other values for it are a 409 naming ``results``; a round not served yet is a
  409 naming ``round``; a closed gate's open round a 409 naming ``gate_id``. Racing posts are
  serialised on the row (``FOR UPDATE``) and its version counter (``step``).
* Cost budgets (``max_cost`` / ``max_tokens``, :mod:`~app.services.evaluation.session_costs`):
  a round's cost is added when it is applied; once one is spent the items budget ``left`` is
  set to 0, so the gate serves no new round and is inconclusive unless that round decided it.
  Stopping early is a stopping time like any other: both error bounds still hold.
* Lifecycle: an open gate idle past ``SESSION_IDLE_HOURS`` reads as ``abandoned``, as sessions do;
  ``abandon`` closes one at once (a cancelled CI job).

Services never commit; the request does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from app.core.sequential.fluid import ItemBank
from app.core.sequential.gating.gates import (
    BENCH_STATES,
    COMBINED,
    OUTCOMES,
    GateState,
    gate_apply,
    gate_orders,
    gate_plan,
    gate_records,
    gate_start,
)
from app.core.sequential.gating.one_sided import GridTrack, OrderedBaseline, track_bounds
from app.db.base import utcnow
from app.db.models import BenchmarkVersion, Gate, Job, Project
from app.db.repositories.gates import GateRepository
from app.errors import Conflict, FieldIssue, InvalidInput, NotFound
from app.ingest import ParsedResults
from app.schemas.gates import (
    GateBenchmark,
    GateBenchmarkResults,
    GateCreate,
    GateHistoryRow,
    GatePublic,
    GateResults,
    GateRound,
)
from app.services.access.access import check_role
from app.services.access.keys import Principal
from app.services.catalog import ownership
from app.services.catalog.benchmarks import get_version, item_index
from app.services.catalog.ownership import gate_not_found
from app.services.evaluation import gate_banks, gate_rounds, lifecycle, session_costs
from app.services.evaluation.batches import MAX_LISTED, batch_items
from app.services.evaluation.sessions import baseline_values, pack_state, unpack_state
from app.services.platform import jobs as job_service

MAX_PAGE = 100
CLOSED_STATE = {"pass": "decided", "fail": "decided", "inconclusive": "exhausted"}


def _project(session: Session, row: Gate) -> Project:
    project = session.get(Project, row.project_id)
    assert project is not None  # the foreign key cascades
    return project


# --- the engine state ---------------------------------------------------------------------------


@dataclass
class Engine:
    """A gate's engine, unpacked: the state, each benchmark's bound track and baseline."""

    state: GateState
    tracks: list[GridTrack]
    ordered: list[OrderedBaseline]
    baselines: list[np.ndarray]
    banks: list[ItemBank] | None = None  # the benchmarks' IRT item banks (``combined``)
    cost: dict | None = None  # the cost budgets' part (``session_costs.gate_start``)
    allocation_unit: str | None = None  # allocation="cost": the unit of ``state.costs``


def _baselines(row: Gate) -> list[np.ndarray]:
    flat = np.frombuffer(row.baseline_values, dtype="<f8")
    ends = np.cumsum([int(b["n_items"]) for b in row.benchmarks])
    return np.split(flat.astype(np.float64), ends[:-1])


def _engine(row: Gate, session: Session) -> Engine:
    parts = unpack_state(row.engine_state)
    gs = GateState.from_dict(parts["gate"])
    base = _baselines(row)
    tracks = [
        GridTrack(
            grid=np.asarray(parts[f"track{j}"]["grid"], np.float64),
            log_capital=np.asarray(parts[f"track{j}"]["log_capital"], np.float64),
            rejected=np.asarray(parts[f"track{j}"]["rejected"], bool),
        )
        for j in range(len(base))
    ]
    orders = gate_orders(int(row.seed), [b.size for b in base])
    ordered = [OrderedBaseline.build(b[None, :], o) for b, o in zip(base, orders, strict=True)]
    banks = None
    if row.prediction == COMBINED:
        banks = gate_banks.item_banks(session, [uuid.UUID(b["version_id"]) for b in row.benchmarks])
    unit = parts.get("allocation", {}).get("unit")  # allocation="cost": its costs' unit
    unit = None if unit is None else str(unit)
    return Engine(gs, tracks, ordered, base, banks, parts.get("cost"), unit)


def _pack(engine: Engine) -> bytes:
    parts: dict[str, dict[str, Any]] = {"gate": engine.state.to_dict()}
    for j, tr in enumerate(engine.tracks):
        parts[f"track{j}"] = {
            "grid": tr.grid,
            "log_capital": tr.log_capital,
            "rejected": tr.rejected,
        }
    if engine.cost is not None:
        parts["cost"] = engine.cost
    if engine.allocation_unit is not None:
        parts["allocation"] = {"unit": np.array(engine.allocation_unit)}
    return pack_state(parts)


def _plan(engine: Engine) -> tuple[np.ndarray, list]:
    """The next round's counts (K,) and records (a function of the state only)."""
    counts = gate_plan(engine.state)
    return counts, gate_records(engine.state, engine.ordered, counts, engine.banks)


def _open_positions(counts: np.ndarray, records: list) -> list[np.ndarray]:
    out = []
    for j, rec in enumerate(records):
        c = int(counts[0, j])
        out.append(np.zeros(0, np.int64) if rec is None else rec[2].items[0, :c].astype(np.int64))
    return out


def _set_open_round(row: Gate, engine: Engine) -> None:
    counts, records = _plan(engine)
    positions = _open_positions(counts, records)
    row.open_counts = [int(c) for c in counts[0]]
    row.open_items = np.concatenate(positions).astype("<i4").tobytes() if counts.any() else b""


def _open_round(row: Gate) -> list[np.ndarray]:
    flat = np.frombuffer(row.open_items, dtype="<i4").astype(np.int64)
    ends = np.cumsum(row.open_counts or [0] * len(row.benchmarks))
    return np.split(flat, ends[:-1])


# --- creating a gate ----------------------------------------------------------------------------


def _keys(versions: list[BenchmarkVersion]) -> list[str]:
    """How the gate names its benchmarks: the name, or ``name@vN`` when two share one."""
    names = [v.benchmark.name for v in versions]
    return [
        f"{n}@v{v.version}" if names.count(n) > 1 else n
        for n, v in zip(names, versions, strict=True)
    ]


def create_gate(
    session: Session, principal: Principal, body: GateCreate
) -> tuple[Gate | None, Job | None, list[Job]]:
    """``(gate, None, [])``: a new gate with its first round served (flush only); or, for
    ``prediction="combined"`` before every benchmark has its IRT fit, ``(None, a fit job, the
    fit jobs created)`` (the caller enqueues those after commit; nothing else is written). 422
    naming ``benchmarks[i]...`` for an unknown or unreadable benchmark (the same words: no
    existence leak), a duplicate, a missing or unknown baseline or margin; 403 without ``write``
    on the first benchmark's project (the gate's)."""
    versions: list[BenchmarkVersion] = []
    errors: list[FieldIssue] = []
    for i, entry in enumerate(body.benchmarks):
        try:
            version = ownership.readable_version(session, principal, entry.benchmark)
        except NotFound as exc:
            errors.append(FieldIssue(("benchmarks", i, "benchmark"), exc.detail))
            continue
        if any(v.id == version.id for v in versions):
            errors.append(FieldIssue(("benchmarks", i, "benchmark"), "given twice"))
            continue
        versions.append(version)
    if errors:
        raise InvalidInput("invalid gate: unknown or repeated benchmarks", errors=errors)
    project = ownership.version_project(versions[0])
    check_role(principal, project, "write")
    baselines, margins = [], []
    for i, entry in enumerate(body.benchmarks):
        baseline = entry.baseline or body.baseline
        margin = entry.margin if entry.margin is not None else body.margin
        if baseline is None:
            errors.append(
                FieldIssue(
                    ("benchmarks", i, "baseline"),
                    "no baseline (give one here or the gate's baseline)",
                )
            )
        elif baseline == body.model:
            errors.append(FieldIssue(("benchmarks", i, "baseline"), "must differ from model"))
        if margin is None:
            errors.append(
                FieldIssue(
                    ("benchmarks", i, "margin"),
                    "no margin (give one here or the gate's margin; 0.02 = 2 points)",
                )
            )
        baselines.append(baseline)
        margins.append(margin)
    if errors:
        raise InvalidInput("invalid gate", errors=errors)
    values = []
    for i, (version, baseline) in enumerate(zip(versions, baselines, strict=True)):
        try:
            values.append(baseline_values(session, version, str(baseline)))
        except InvalidInput as exc:
            issue = exc.errors[0] if exc.errors else None
            text = issue.message if isinstance(issue, FieldIssue) else exc.detail
            errors.append(FieldIssue(("benchmarks", i, "baseline"), f"{exc.detail} ({text})"))
    if errors:
        raise InvalidInput("invalid gate: baselines without full results", errors=errors)
    sizes = [v.size for v in values]
    total = int(sum(sizes))
    budget = total if body.budget is None else int(body.budget)
    if budget < body.batch_size:
        raise InvalidInput(
            f"a budget of {budget} items is below one batch ({body.batch_size})",
            field="budget",
            message=f"at least batch_size ({body.batch_size})",
        )
    keys = _keys(versions)
    per_item = session_costs.gate_allocation_costs(session, versions, keys, body)
    gs = gate_start(
        [np.array([v.mean()]) for v in values],
        sizes,
        margins,
        alpha=body.alpha,
        rule=body.rule,
        batch_size=body.batch_size,
        budget=budget,
        prediction=body.prediction,
        allocation=body.allocation,
        costs=per_item,
    )
    cost = session_costs.gate_start(session, versions, keys, body, gate_plan(gs)[0])
    banks = None
    if body.prediction == COMBINED:
        missing = gate_banks.missing_fits(session, versions)
        if missing is not None:
            return None, *missing
        banks = gate_banks.item_banks(session, [v.id for v in versions])
    seed = job_service.new_seed() if body.seed is None else int(body.seed)
    tracks = [
        GridTrack.start(st, np.arange(n + 1) / n) for st, n in zip(gs.tests, sizes, strict=True)
    ]
    orders = gate_orders(seed, sizes)
    ordered = [OrderedBaseline.build(v[None, :], o) for v, o in zip(values, orders, strict=True)]
    unit = body.cost_unit if per_item is not None else None
    engine = Engine(gs, tracks, ordered, values, banks, cost, unit)
    row = Gate(
        project_id=project.id,
        model_name=body.model,
        rule=body.rule,
        prediction=body.prediction,
        alpha=body.alpha,
        batch_size=body.batch_size,
        budget=budget,
        seed=seed,
        state="open",
        outcome="open",
        benchmarks=[
            {
                "key": key,
                "version_id": str(v.id),
                "benchmark": v.benchmark.name,
                "version": v.version,
                "baseline": b,
                "margin": float(m),
                "n_items": int(n),
            }
            for key, v, b, m, n in zip(keys, versions, baselines, margins, sizes, strict=True)
        ],
        items_used=0,
        items_total=total,
        baseline_values=np.concatenate(values).astype("<f8").tobytes(),
        engine_state=_pack(engine),
        values=b"",
        history=[],
    )
    _set_open_round(row, engine)
    GateRepository(session).add(row)
    return row, None, []


# --- reading a gate -----------------------------------------------------------------------------


def get_row(session: Session, gate_id: uuid.UUID, *, for_update: bool = False) -> Gate:
    repo = GateRepository(session)
    row = repo.get_locked(gate_id) if for_update else repo.get(gate_id)
    if row is None:
        raise gate_not_found(gate_id)
    return row


def _rows(row: Gate, engine: Engine, versions: list[BenchmarkVersion]) -> list[GateBenchmark]:
    gs = engine.state
    codes, _, _ = gs.status()
    out = []
    for j, (meta, st, tr, base) in enumerate(
        zip(row.benchmarks, gs.tests, engine.tracks, engine.baselines, strict=True)
    ):
        seen = gs.seen[j][0]
        delta = None if seen[0] == 0 else float((seen[1] - seen[2]) / seen[0])
        bounds = track_bounds(st, tr)[0] - float(base.mean())
        out.append(
            GateBenchmark(
                benchmark=meta["key"],
                version_id=versions[j].id,
                benchmark_version=int(meta["version"]),
                baseline=meta["baseline"],
                baseline_accuracy=float(base.mean()),
                margin=float(meta["margin"]),
                state=BENCH_STATES[int(codes[0, j])],  # type: ignore[arg-type]
                delta=delta,
                bound=float(bounds[0]),
                upper=float(bounds[1]),
                items=int(st.t[0]),
                n_items=int(meta["n_items"]),
                predicted_cost_per_item=None if gs.costs is None else float(gs.costs[j]),
            )
        )
    return out


def _next_round(row: Gate, versions: list[BenchmarkVersion], state: str) -> GateRound | None:
    if state != "open" or not any(row.open_counts or []):
        return None
    items, samples = {}, {}
    for meta, version, pos in zip(row.benchmarks, versions, _open_round(row), strict=True):
        if pos.size:
            items[meta["key"]], samples[meta["key"]] = batch_items(version, pos)
    return GateRound(round=len(row.history or []) + 1, items=items, samples=samples)


def to_public(
    session: Session, row: Gate, *, idle_hours: float | None = None, engine: Engine | None = None
) -> GatePublic:
    engine = engine or _engine(row, session)
    versions = [get_version(session, uuid.UUID(b["version_id"])) for b in row.benchmarks]
    state = lifecycle.state_of(row, idle_hours)  # type: ignore[arg-type]
    rows = _rows(row, engine, versions)
    outcome = "inconclusive" if state == lifecycle.ABANDONED else row.outcome
    return GatePublic(
        id=row.id,
        project=_project(session, row).name,
        model=row.model_name,
        rule=row.rule,  # type: ignore[arg-type]
        prediction=row.prediction,  # type: ignore[arg-type]
        alpha=row.alpha,
        batch_size=row.batch_size,
        budget=row.budget,
        seed=int(row.seed),
        state=state,  # type: ignore[arg-type]
        outcome=outcome,  # type: ignore[arg-type]
        regressed=[r.benchmark for r in rows if r.state in ("regressed", "on_margin")],
        round=len(row.history or []),
        items_used=row.items_used,
        items_total=row.items_total,
        estimand_text="benchmark accuracy, per benchmark: the mean over its N items (exact "
        "once all are seen); each benchmark's bounds are about its own items.",
        benchmarks=rows,
        next_round=(nxt := _next_round(row, versions, state)),
        history=[GateHistoryRow.model_validate(h) for h in row.history or []],
        created_at=row.created_at,
        updated_at=row.updated_at,
        budgets=session_costs.gate_budgets(engine.cost, _open_round(row) if nxt else None),
        allocation=engine.state.allocation,  # type: ignore[arg-type]
        allocation_unit=engine.allocation_unit,  # type: ignore[arg-type]
    )


def model_name(session: Session, gate_id: uuid.UUID) -> str:
    """The candidate a gate evaluates (404 when the gate does not exist)."""
    name = GateRepository(session).model_name(gate_id)
    if name is None:
        raise gate_not_found(gate_id)
    return name


def get_gate_public(
    session: Session, gate_id: uuid.UUID, *, idle_hours: float | None = None
) -> GatePublic:
    return to_public(session, get_row(session, gate_id), idle_hours=idle_hours)


# --- posting a round ----------------------------------------------------------------------------


def post_round(
    session: Session,
    gate_id: uuid.UUID,
    body: GateResults,
    *,
    idle_hours: float | None = None,
    parsed: ParsedResults | None = None,
) -> tuple[GatePublic, bool]:
    """Apply round ``body.round``; ``(reply, replayed)`` (see the module docstring); ``parsed``:
    the upload it came from (its costs are the round's measured costs). Flush only."""
    row = get_row(session, gate_id, for_update=True)
    state = lifecycle.state_of(row, idle_hours)  # type: ignore[arg-type]
    gate_rounds.check_round(row, body.round, state)
    versions = [get_version(session, uuid.UUID(b["version_id"])) for b in row.benchmarks]
    applied = len(row.history or [])
    if body.round <= applied:
        positions, stored = gate_rounds.round_slices(row, body.round)
        try:
            posted = gate_rounds.posted_values(row, body, positions, versions)
        except InvalidInput as exc:
            raise Conflict(
                f"round {body.round} was answered with other items: {exc.detail}", errors=exc.errors
            ) from None
        differ = [
            (row.benchmarks[j]["key"], int(np.flatnonzero(p != s)[0]))
            for j, (p, s) in enumerate(zip(posted, stored, strict=True))
            if p.size and np.any(p != s)
        ]
        if differ:
            raise Conflict(
                f"round {body.round} was answered with other values; a resend must repeat it "
                "exactly",
                errors=[
                    FieldIssue(("results",), f"{k!r}: item {i + 1} of the round differs")
                    for k, i in differ
                ],
            )
        return to_public(session, row, idle_hours=idle_hours), True
    positions = _open_round(row)
    posted = gate_rounds.posted_values(row, body, positions, versions)
    engine = _engine(row, session)
    counts, records = _plan(engine)
    if [int(c) for c in counts[0]] != list(row.open_counts):  # the state serves what it served
        raise RuntimeError(f"gate {row.id}: the engine's round differs from the one served")
    cand, base = [], []
    for j, rec in enumerate(records):
        if rec is None:
            cand.append(None)
            base.append(None)
            continue
        items = rec[2].items
        a = np.zeros(items.shape)
        a[0, : posted[j].size] = posted[j]
        cand.append(a)
        base.append(engine.baselines[j][items])
    gate_apply(engine.state, counts, records, cand, base, engine.tracks)
    if engine.cost is not None:
        posted_costs = None if parsed is None else session_costs.gate_posted_costs(
            parsed, versions, positions
        )  # fmt: skip
        engine.cost = session_costs.gate_spend(engine.cost, positions, posted_costs)
        if session_costs.exhausted(engine.cost):
            engine.state.left[:] = 0  # a budget is spent: no new round (an early stop)
    codes, _, outcome = engine.state.status()
    row.outcome = OUTCOMES[int(outcome[0])]
    row.state = CLOSED_STATE.get(row.outcome, "open")
    keys = [b["key"] for b in row.benchmarks]
    row.items_used += int(counts.sum())
    row.values = row.values + np.concatenate(posted).astype("<f8").tobytes()
    row.engine_state = _pack(engine)
    now = utcnow()
    row.updated_at = now
    row.history = [
        *(row.history or []),
        {
            "round": applied + 1,
            "items_used": row.items_used,
            "counts": {k: int(c) for k, c in zip(keys, counts[0], strict=True) if c},
            "items": {k: p.tolist() for k, p in zip(keys, positions, strict=True) if p.size},
            "outcome": row.outcome,
            "states": {k: BENCH_STATES[int(c)] for k, c in zip(keys, codes[0], strict=True)},
            "applied_at": now.isoformat(),
        },
    ]
    if row.state == "open":
        _set_open_round(row, engine)
    else:
        row.open_counts, row.open_items = [0] * len(keys), b""
    try:
        session.flush()
    except StaleDataError:
        raise Conflict(
            "the gate changed while this round was applied; fetch it and retry", field="gate_id"
        ) from None
    return to_public(session, row, idle_hours=idle_hours, engine=engine), False


def post_round_parsed(
    session: Session,
    gate_id: uuid.UUID,
    round_number: int,
    model_name: str,
    parsed: ParsedResults,
    *,
    idle_hours: float | None = None,
) -> tuple[GatePublic, bool]:
    """:func:`post_round` for an upload in any results format (lm-eval sample logs of every
    task the round served, …): each result goes to the benchmark whose round holds its item."""
    row = get_row(session, gate_id)
    if model_name != row.model_name:
        raise InvalidInput(
            f"this gate evaluates {row.model_name!r}, not {model_name!r}", field="model"
        )
    if parsed.item_ids is None:
        raise InvalidInput(
            "a gate's results name their items (a gate serves several benchmarks)",
            field="file",
            message="values without item ids",
        )
    gate_rounds.check_round(row, round_number, lifecycle.state_of(row, idle_hours))  # type: ignore[arg-type]
    if round_number <= len(row.history or []):
        positions, _ = gate_rounds.round_slices(row, round_number)
    else:
        positions = _open_round(row)
    ids = np.asarray(parsed.item_ids, dtype=str)
    values = np.asarray(parsed.correct, dtype=np.float64)
    used = np.zeros(ids.size, dtype=bool)
    results = []
    for meta, pos in zip(row.benchmarks, positions, strict=True):
        if not pos.size:
            continue
        version = get_version(session, uuid.UUID(meta["version_id"]))
        mine = np.isin(ids, item_index(version).item_ids[pos])
        used |= mine
        results.append(
            GateBenchmarkResults(
                benchmark=meta["key"], item_ids=ids[mine].tolist(), correct=values[mine].tolist()
            )
        )
    if not used.all():
        stray = ids[~used]
        raise InvalidInput(
            f"{stray.size} result(s) are for items round {round_number} did not serve",
            errors=[
                FieldIssue(("item_ids",), f"not served this round: {str(i)!r}")
                for i in stray[:MAX_LISTED]
            ],
        )
    body = GateResults(round=round_number, results=results)
    return post_round(session, gate_id, body, idle_hours=idle_hours, parsed=parsed)


def abandon(session: Session, gate_id: uuid.UUID, *, idle_hours: float | None = None) -> GatePublic:
    """Close an open gate now (outcome inconclusive); a closed one is a 409 naming ``gate_id``."""
    row = get_row(session, gate_id, for_update=True)
    state = lifecycle.state_of(row, idle_hours)  # type: ignore[arg-type]
    if state != "open":
        raise Conflict(
            f"gate {row.id} is {state} already", field="gate_id", message=f"gate is {state}"
        )
    row.state, row.outcome = lifecycle.ABANDONED, "inconclusive"
    row.open_counts, row.open_items = [0] * len(row.benchmarks), b""
    row.updated_at = utcnow()
    session.flush()
    return to_public(session, row, idle_hours=idle_hours)


__all__ = [
    "abandon",
    "create_gate",
    "get_gate_public",
    "get_row",
    "model_name",
    "post_round",
    "post_round_parsed",
    "to_public",
]
