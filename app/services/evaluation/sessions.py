"""Evaluation sessions (issues 12, 23): evaluate a model in batches until its question is answered.

A session serves items in batches, takes the model's results on the open batch (any format a
results upload accepts; repeated samples arrive as item means), updates the engine, checks the
goal, and serves the next batch. How items are drawn and how the interval is computed is
:mod:`app.services.evaluation.session_policies`: every policy (``random``, ``assisted``,
``neyman``, ``fluid``; :mod:`app.core.sequential.policies`) decides with the design-based
confidence sequence for the model's mean (the baseline's full results are stored with the session,
so its mean is a known constant and the interval for ``Delta`` is the CS shifted by it), so every
decision is wrong with probability at most ``alpha`` (``basis: "design"``). The IRT policies need
the benchmark's IRT fit (:mod:`app.services.catalog.irt_fits`) for their predictions and draws.
Sessions created before issue 23 keep their engine (:mod:`app.services.evaluation.legacy_engines`).

* Goals: ``decide`` (:func:`app.core.sequential.confidence_sequences.decide` on ``Delta``),
  ``precision`` (half-width of ``Delta``'s interval with a baseline, else of the accuracy's).
  ``max_items`` reached first: ``exhausted``.
* Exactly once (:mod:`app.services.evaluation.batches`): a post names the batch it answers
  (``?batch=N`` or its item ids); a resend of an answered batch gets that batch's reply and
  changes nothing, a different body for it is a 409. The row is locked before it is read
  (``FOR UPDATE``; a first write on SQLite) and carries a version counter (``step``).
* Lifecycle (:mod:`app.services.evaluation.lifecycle`): an open session idle past
  ``SESSION_IDLE_HOURS`` reads as ``abandoned`` and takes no more batches.
* Not done: subtask-stratified orders.

Services never commit; the request does.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import numpy as np
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from app.core.sequential.confidence_sequences import decide, decision_names, precision_met
from app.core.sequential.population import GENERALIZED, estimand_sentence
from app.db.base import utcnow
from app.db.models import BenchmarkVersion, EvaluationSession, Job
from app.db.repositories.sessions import EvaluationSessionRepository
from app.errors import Conflict, FieldIssue, InvalidInput, NotFound
from app.ingest import ParsedResults
from app.schemas.results import ModelCreate
from app.schemas.sessions import (
    HistoryRow,
    Interval,
    OneSidedBounds,
    SessionCreate,
    SessionPublic,
)
from app.services.catalog import irt_fits
from app.services.catalog.benchmarks import get_version, item_index
from app.services.catalog.matrices import full_matrix
from app.services.catalog.names import did_you_mean
from app.services.catalog.results import load_matrix, store_results
from app.services.evaluation import (
    batches,
    legacy_engines,
    lifecycle,
    session_costs,
    session_policies,
)
from app.services.platform import jobs as job_service

STATES = ("open", "decided", "exhausted", "abandoned")


# --- engine state packing -----------------------------------------------------------------------


STATE_MAGIC = b"BSS1"  # engine state: magic, u32 header length, JSON header, raw arrays


def pack_state(parts: dict[str, dict[str, Any]]) -> bytes:
    """``{"acc": CSState.to_dict(), ...}`` as bytes: ``STATE_MAGIC``, a little-endian ``u32``
    header length, a JSON header (per array: key ``part__field``, dtype, shape, byte offset) and
    the arrays' raw bytes. A step reads and writes it once; ``.npz`` (the first format, still
    read) cost about 1 ms of zip and header parsing per step."""
    header, chunks, offset = [], [], 0
    for p, d in parts.items():
        for k, v in d.items():
            arr = np.asarray(v)
            if arr.dtype.hasobject:
                raise TypeError(f"engine state field {p}.{k} is not a plain array")
            header.append([f"{p}__{k}", arr.dtype.str, list(arr.shape), offset])
            chunks.append(arr.tobytes(order="C"))
            offset += arr.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([STATE_MAGIC, len(head).to_bytes(4, "little"), head, *chunks])


def unpack_state(blob: bytes) -> dict[str, dict[str, Any]]:
    """Inverse of :func:`pack_state` (writable copies); also reads the ``.npz`` of old rows."""
    out: dict[str, dict[str, Any]] = {}
    if not blob.startswith(STATE_MAGIC):
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            for key in npz.files:
                part, name = key.split("__", 1)
                arr = npz[key]
                out.setdefault(part, {})[name] = arr.item() if arr.ndim == 0 else arr
        return out
    n = int.from_bytes(blob[4:8], "little")
    data = memoryview(blob)[8 + n :]
    for key, dtype, shape, offset in json.loads(blob[8 : 8 + n]):
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        arr = np.frombuffer(data, dtype=dt, count=count, offset=offset).reshape(shape).copy()
        part, name = key.split("__", 1)
        out.setdefault(part, {})[name] = arr.item() if arr.ndim == 0 else arr
    return out


# --- reading a session --------------------------------------------------------------------------


def get_row(session: Session, sid: uuid.UUID, *, for_update: bool = False) -> EvaluationSession:
    repo = EvaluationSessionRepository(session)
    row = repo.get_locked(sid) if for_update else repo.get(sid)
    if row is None:
        raise NotFound(f"evaluation session {sid} does not exist")
    return row


def model_name(session: Session, sid: uuid.UUID) -> str:
    """The model a session evaluates (one small query; 404 when the session does not exist)."""
    name = EvaluationSessionRepository(session).model_name(sid)
    if name is None:
        raise NotFound(f"evaluation session {sid} does not exist")
    return name


def _order(row: EvaluationSession) -> np.ndarray:
    return np.frombuffer(row.order, dtype="<i4").astype(np.int64)


def _values(row: EvaluationSession) -> np.ndarray:
    return np.frombuffer(row.values, dtype="<f8")


def _baseline(row: EvaluationSession) -> np.ndarray | None:
    return None if row.baseline_values is None else np.frombuffer(row.baseline_values, "<f8")


def open_batch(row: EvaluationSession) -> np.ndarray:
    return _order(row)[row.items_used : row.items_used + row.open_size]


def _interval(value, lo, hi, basis: str, estimand: str = "benchmark") -> Interval:
    v = None if value is None else float(value)
    return Interval(value=v, lower=float(lo), upper=float(hi), basis=basis, estimand=estimand)  # type: ignore[arg-type]


def _estimates(
    session: Session, row: EvaluationSession, parts: dict
) -> tuple[Interval, Interval | None]:
    """Current accuracy and difference intervals from the engine state."""
    base = _baseline(row)
    bank = _bank(session, row) if row.policy != "random" else None
    if session_policies.is_generalized(parts):  # issue 38: items like these, paired with B
        est, dif = session_policies.population_intervals(parts)
        gen = None if dif is None else _interval(*dif, "design", GENERALIZED)
        return _interval(*est, "design", GENERALIZED), gen
    if legacy_engines.is_legacy(parts):
        est, dif, basis = legacy_engines.intervals(
            row.policy, parts, base=base, bank=bank, alpha=row.alpha
        )
    else:
        est, basis = session_policies.mean_interval(parts, bank), "design"
        acc_b = None if base is None else float(base.mean())
        dif = None if acc_b is None else tuple(None if v is None else v - acc_b for v in est)
    diff = None if dif is None else _interval(*dif, basis)  # type: ignore[misc]
    return _interval(*est, basis), diff


def _bank(session: Session, row: EvaluationSession):
    fit = irt_fits.get_fit(session, row.benchmark_version_id)
    assert fit is not None  # an IRT-policy session is created after its version's fit
    return irt_fits.item_bank(fit)


ONE_SIDED_GOALS = ("noninferior", "superior")


def _judge(
    row: EvaluationSession, est: Interval, diff: Interval | None, parts: dict | None = None
) -> tuple[str, str]:
    """``(state, decision)`` after a batch."""
    if row.goal in ONE_SIDED_GOALS:  # the goal's own one-sided tests (all of alpha on a side)
        assert parts is not None
        decision = session_policies.one_sided_reading(parts, row.goal)[0]
        done = decision != "undecided"
    elif row.goal == "decide":
        assert diff is not None
        code = decide(diff.lower, diff.upper, margin=row.margin)
        decision = str(decision_names(code))
        done = decision != "undecided"
    else:
        target = diff if diff is not None else est
        done = bool(precision_met(target.lower, target.upper, float(row.precision or 0.0)))
        decision = "precise" if done else "undecided"
    if done:
        return "decided", decision
    if row.items_used >= row.max_items:
        return "exhausted", decision
    return "open", decision


def _one_sided_bounds(row: EvaluationSession, base) -> OneSidedBounds | None:
    if row.goal not in ONE_SIDED_GOALS or base is None:
        return None
    parts = unpack_state(row.engine_state)
    lo, hi, thr = session_policies.one_sided_difference(parts, row.goal, base.mean(), row.margin)
    return OneSidedBounds(lower=lo, upper=hi, threshold=thr)


def to_public(
    session: Session,
    row: EvaluationSession,
    version: BenchmarkVersion | None = None,
    *,
    idle_hours: float | None = None,
):
    """The session as the API shows it (``idle_hours``: ``SESSION_IDLE_HOURS``, after which an
    open session reads as ``abandoned``; None: never)."""
    version = version or get_version(session, row.benchmark_version_id)
    items, samples = batches.batch_items(version, open_batch(row))
    history = [HistoryRow.model_validate(h) for h in row.history or []]
    parts = unpack_state(row.engine_state)
    if history:
        est, diff = history[-1].estimate, history[-1].difference
    else:
        est, diff = _estimates(session, row, parts)
    base = _baseline(row)
    state = lifecycle.state_of(row, idle_hours)
    cost_part = parts.get("cost")
    spent = session_costs.spent_budgets(cost_part) if state == "exhausted" else []
    return SessionPublic(
        id=row.id,
        version_id=version.id,
        benchmark=version.benchmark.name,
        benchmark_version=version.version,
        model=row.model_name,
        baseline=row.baseline_name,
        goal=row.goal,  # type: ignore[arg-type]
        policy=row.policy,  # type: ignore[arg-type]
        estimand=row.estimand,  # type: ignore[arg-type]
        estimand_text=estimand_sentence(row.estimand, row.n_items),
        alpha=row.alpha,
        margin=row.margin,
        precision=row.precision,
        batch_size=row.batch_size,
        max_items=row.max_items,
        seed=int(row.seed),
        n_items=row.n_items,
        state=state,  # type: ignore[arg-type]
        outcome=lifecycle.outcome_of(state),  # type: ignore[arg-type]
        stopped_by=lifecycle.stopped_by(state, spent),  # type: ignore[arg-type]
        conclusion=lifecycle.conclusion(row, state, spent_budgets=spent),
        decision=row.decision,  # type: ignore[arg-type]
        step=len(row.history or []),
        items_used=row.items_used,
        estimate=est,
        difference=diff,
        baseline_accuracy=None if base is None else float(base.mean()),
        one_sided=_one_sided_bounds(row, base),
        next_items=items,
        samples=samples,
        history=history,
        stored_result=row.stored_result,
        created_at=row.created_at,
        updated_at=row.updated_at,
        cost_aware=session_costs.design_costs(cost_part) is not None,
        predictions=session_policies.prediction_report(parts),
        budgets=session_costs.session_budgets(
            cost_part,
            goal=row.goal,
            difference=diff,
            seen=_order(row)[: row.items_used],
            items_used=row.items_used,
            is_open=row.state == "open",
        ),
    )


def get_session_public(
    session: Session, sid: uuid.UUID, *, idle_hours: float | None = None
) -> SessionPublic:
    return to_public(session, get_row(session, sid), idle_hours=idle_hours)


# --- creating a session -------------------------------------------------------------------------


def baseline_values(session: Session, version: BenchmarkVersion, name: str) -> np.ndarray:
    try:
        mat = load_matrix(session, version.id, [name])
    except NotFound:
        fm = full_matrix(session, version.id)
        hint = did_you_mean(name, [*fm.rows, *fm.unusable])
        raise InvalidInput(
            f"model {name!r} has no results on this benchmark{hint}",
            field="baseline",
            message=f"unknown model{hint}",
        ) from None
    if not mat.coverage.all():
        raise InvalidInput(
            f"model {name!r} has partial results on this benchmark; a baseline needs results on "
            "every item",
            field="baseline",
            message="partial coverage",
        )
    return mat.correct[0].astype(np.float64)


def _check(body: SessionCreate, n_items: int) -> int:
    """Cross-field checks (ranges are the schema's); returns ``max_items``."""
    errors: list[FieldIssue] = []
    if body.baseline is not None and body.baseline == body.model:
        errors.append(FieldIssue(("baseline",), "must differ from model"))
    if body.goal == "decide" and body.baseline is None:
        errors.append(FieldIssue(("baseline",), "goal 'decide' compares with a baseline"))
    if body.goal == "precision" and body.precision is None:
        errors.append(FieldIssue(("precision",), "goal 'precision' needs a target half-width"))
    if body.goal in ONE_SIDED_GOALS and body.baseline is None:
        errors.append(FieldIssue(("baseline",), f"goal {body.goal!r} compares with a baseline"))
    if body.goal == "noninferior" and body.margin is None:
        errors.append(FieldIssue(("margin",), "goal 'noninferior' needs a margin (0.02 = 2 pts)"))
    if body.goal == "precision" and body.margin is not None:
        errors.append(FieldIssue(("margin",), "not with goal 'precision'"))
    if body.goal != "precision" and body.precision is not None:
        errors.append(FieldIssue(("precision",), "only with goal 'precision'"))
    max_items = n_items if body.max_items is None else body.max_items
    if max_items > n_items:
        errors.append(FieldIssue(("max_items",), f"at most the {n_items} items of the benchmark"))
    elif body.batch_size > max_items:
        errors.append(FieldIssue(("batch_size",), f"at most max_items ({max_items})"))
    if errors:
        raise InvalidInput("invalid session", errors=errors)
    return max_items


def _estimand(body: SessionCreate) -> str:
    """Default: ``generalized`` with a baseline and a uniform order (omitted or ``random``
    policy: a verdict's and a leaderboard's question, so the surfaces agree on a pair), else
    ``benchmark`` (the IRT policies' draws depend on the items, so they answer for these N)."""
    uniform = body.policy in (None, "random") and not body.cost_aware
    one_sided = body.goal in ONE_SIDED_GOALS  # its tests are about these N items (issue 34)
    estimand = body.estimand or (
        GENERALIZED if body.baseline is not None and uniform and not one_sided else "benchmark"
    )
    if estimand == GENERALIZED and one_sided:
        raise InvalidInput(
            f"goal {body.goal!r} decides with one-sided tests on benchmark accuracy (these N "
            "items); estimand 'generalized' is not available for it yet",
            field="estimand",
            message="not with a one-sided goal",
        )
    if estimand == GENERALIZED and body.cost_aware:
        raise InvalidInput(
            "cost-aware draws weigh items by their cost; estimand 'generalized' serves items in a "
            "uniformly random order",
            field="cost_aware",
            message="generalized needs uniform draws",
        )
    if estimand == GENERALIZED and not uniform:
        raise InvalidInput(
            f"policy {body.policy!r} estimates benchmark accuracy; estimand 'generalized' serves "
            "items in a uniformly random order (policy random)",
            field="policy",
            message="generalized needs policy random",
        )
    return estimand


def _default_policy(session: Session, version: BenchmarkVersion) -> str:
    """``assisted`` when the version has (or can have) an IRT fit, else ``random``."""
    if irt_fits.get_fit(session, version.id) is not None:
        return "assisted"
    names, _ = irt_fits.full_models(session, version.id)
    return "assisted" if names.size >= irt_fits.MIN_FIT_MODELS else "random"


def create_session(
    session: Session, version: BenchmarkVersion, body: SessionCreate
) -> tuple[EvaluationSession | None, Job | None, bool]:
    """``(session row, None, False)``, or for an IRT policy before the benchmark's IRT fit exists
    ``(None, fit job, created)`` (the caller enqueues a created job after commit)."""
    n = item_index(version).n_items
    max_items = _check(body, n)
    base = None if body.baseline is None else baseline_values(session, version, body.baseline)
    seed = job_service.new_seed() if body.seed is None else int(body.seed)
    k = min(body.batch_size, max_items)
    estimand = _estimand(body)
    policy = body.policy or ("random" if estimand == GENERALIZED else None)
    policy = policy or _default_policy(session, version)
    bank = None
    if policy != "random":
        fit = irt_fits.get_fit(session, version.id)
        if fit is None:
            job, created = irt_fits.request_fit(session, version.id)
            return None, job, created
        bank = irt_fits.item_bank(fit)
    cost_part = session_costs.start(session, version, body)
    parts, order = session_policies.start(
        policy,
        n,
        bank=bank,
        alpha=body.alpha,
        seed=seed,
        k=k,
        costs=session_costs.design_costs(cost_part),
        gamma=session_costs.design_gamma(cost_part),
        estimand=estimand,
        paired=base is not None,
    )
    if cost_part is not None:
        parts["cost"] = cost_part
    if body.goal in ONE_SIDED_GOALS:
        assert base is not None
        parts = session_policies.start_one_sided(
            parts, body.goal, n, baseline_mean=float(base.mean()), margin=body.margin,
            alpha=body.alpha,
        )  # fmt: skip
    row = EvaluationSession(
        benchmark_version_id=version.id,
        model_name=body.model,
        baseline_name=body.baseline,
        goal=body.goal,
        policy=policy,
        estimand=estimand,
        alpha=body.alpha,
        margin=body.margin,
        precision=body.precision,
        batch_size=body.batch_size,
        max_items=max_items,
        seed=seed,
        store_results=body.store_results,
        state="open",
        decision="undecided",
        n_items=n,
        items_used=0,
        open_size=k,
        order=np.asarray(order, dtype="<i4").tobytes(),
        values=b"",
        binary=True,
        baseline_values=None if base is None else base.astype("<f8").tobytes(),
        engine_state=pack_state(parts),
        history=[],
    )
    EvaluationSessionRepository(session).add(row)
    return row, None, False


# --- posting results ----------------------------------------------------------------------------


def _apply(session, row, parts, x, prev, batch):
    """Feed the open batch, judge, and append the next batch to ``order`` (``items_used``
    already counts the batch)."""
    bank = _bank(session, row) if row.policy != "random" else None
    fluid_state = None
    if legacy_engines.is_legacy(parts):
        seen_before = _order(row)[: row.items_used - batch.size]
        parts, fluid_state = legacy_engines.feed(
            row.policy,
            parts,
            x=x,
            prev=prev,
            seen_before=seen_before,
            batch=batch,
            base=_baseline(row),
            bank=bank,
        )
    else:
        base = _baseline(row)
        base_x = None if base is None else base[batch]
        parts = session_policies.feed(parts, bank, x, prev, base_x=base_x)
    est, diff = _estimates(session, row, parts)
    row.state, row.decision = _judge(row, est, diff, parts)
    if row.state == "open" and session_costs.exhausted(parts.get("cost")):
        row.state = "exhausted"  # the budget is spent: undecided, with what it spent
    k = min(row.batch_size, row.max_items - row.items_used) if row.state == "open" else 0
    nxt = None
    if k and fluid_state is not None:
        nxt = legacy_engines.next_items(bank, fluid_state, k)
    elif k and not legacy_engines.is_legacy(parts):
        step = len(row.history or []) + 1
        parts, nxt = session_policies.draw_next(
            parts,
            bank,
            seed=int(row.seed),
            step=step,
            k=k,
            costs=session_costs.design_costs(parts.get("cost")),
        )
    if nxt is not None:
        row.order = np.concatenate([_order(row), nxt]).astype("<i4").tobytes()
    row.open_size = k
    return parts, est, diff


def post_results(
    session: Session,
    sid: uuid.UUID,
    model_name: str,
    parsed: ParsedResults,
    *,
    batch_number: int | None = None,
    idle_hours: float | None = None,
) -> tuple[SessionPublic, bool]:
    """Apply the results of batch ``batch_number`` (None: the batch the item ids name); ``(reply,
    replayed)``: ``replayed`` when it resent an answered batch, answered with that batch's
    reply and nothing changed (:mod:`app.services.evaluation.batches`). Flush only."""
    row = get_row(session, sid, for_update=True)
    version = get_version(session, row.benchmark_version_id)
    if model_name != row.model_name:
        raise InvalidInput(
            f"this session evaluates {row.model_name!r}, not {model_name!r}", field="model"
        )
    answer = batches.resolve(row, version, parsed, batch_number)
    if answer.answered:
        public = to_public(session, row, version, idle_hours=idle_hours)
        return batches.reply_as_of(public, row, version, answer.number), True
    lifecycle.refuse_if_abandoned(row, idle_hours)
    x = answer.values
    prev = _values(row)
    parts = unpack_state(row.engine_state)
    batch = open_batch(row)
    if "cost" in parts:
        parts["cost"] = session_costs.spend(parts["cost"], parsed, version, batch)
    row.binary = bool(row.binary and legacy_engines.on_lattice(x))
    row.items_used += batch.size
    parts, est, diff = _apply(session, row, parts, x, prev, batch)
    row.values = np.concatenate([prev, x]).astype("<f8").tobytes()
    row.engine_state = pack_state(parts)
    entry = HistoryRow(
        step=len(row.history or []) + 1,
        items_used=row.items_used,
        estimate=est,
        difference=diff,
        decision=row.decision,  # type: ignore[arg-type]
        state=row.state,  # type: ignore[arg-type]
    ).model_dump(mode="json")
    now = utcnow()  # the reply's updated_at, kept for a resend of this batch after the next
    row.updated_at = now
    row.history = [
        *(row.history or []),
        {**entry, "items": batch.tolist(), "applied_at": now.isoformat()},
    ]
    if row.state != "open" and row.store_results:
        row.stored_result = _store_partial(session, row, version)
    try:
        session.flush()
    except StaleDataError:
        raise Conflict(
            "the session changed while this batch was applied; fetch it and retry",
            field="session_id",
        ) from None
    return to_public(session, row, version, idle_hours=idle_hours), False


def _store_partial(session: Session, row: EvaluationSession, version: BenchmarkVersion) -> str:
    """Store the seen items' results as the model's (partial-coverage) result set."""
    seen = _order(row)[: row.items_used]
    vals = _values(row)
    binary = bool(np.all((vals == 0) | (vals == 1)))
    parsed = ParsedResults(
        item_ids=item_index(version).item_ids[seen],
        correct=vals.astype(np.uint8) if binary else vals.astype(np.float32),
        source_format="session",
    )
    try:
        _, status = store_results(session, version.id, ModelCreate(name=row.model_name), parsed)
    except Conflict:
        return "skipped"
    return status


__all__ = [
    "STATES",
    "create_session",
    "get_row",
    "get_session_public",
    "model_name",
    "open_batch",
    "pack_state",
    "post_results",
    "to_public",
    "unpack_state",
]
