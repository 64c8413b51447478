"""Which batch a session's results post answers, and what a resend of it gets (issue 23).

The batches a session serves are numbered 1, 2, … (the open batch is ``step + 1``). A post names
the batch it answers with ``?batch=N`` or by its item ids: items are drawn without replacement,
so every item belongs to one batch. Values without item ids must name their batch: they cannot
be told from the next batch's values (a resend of such a post used to be applied to the next
batch).

* The open batch: the caller applies it (:func:`app.services.evaluation.sessions.post_results`).
* An answered batch, same items and values: a resend. It is answered with the reply that batch
  got (the session as it stood right after it) and changes nothing.
* An answered batch, other items or values: 409 naming ``item_ids`` or ``correct``.
* A batch not served yet, or the open batch of a closed session: 409 naming ``batch`` /
  ``session_id``.

Racing posts are serialised by the session row's lock (``SELECT … FOR UPDATE`` on Postgres, a
write on SQLite, :meth:`EvaluationSessionRepository.get_locked`): the second sees the first's
batch as answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from app.db.models import BenchmarkVersion, EvaluationSession
from app.errors import Conflict, DomainError, FieldIssue, InvalidInput
from app.ingest import ParsedResults
from app.schemas.sessions import SessionItem, SessionPublic
from app.services.catalog.benchmarks import item_index
from app.services.catalog.matrices import doc_ids
from app.services.evaluation.lifecycle import conclusion, outcome_of, stopped_by

MAX_LISTED = 20  # items named in one error


@dataclass(frozen=True)
class Answer:
    """A post resolved to the batch it answers."""

    number: int  # 1-based batch number
    positions: np.ndarray  # the batch's items, in serving order
    values: np.ndarray  # the post's values in serving order
    answered: bool  # the batch was applied before: a resend


def order(row: EvaluationSession) -> np.ndarray:
    return np.frombuffer(row.order, dtype="<i4").astype(np.int64)


def bounds(row: EvaluationSession) -> np.ndarray:
    """``[0, items after batch 1, …, items_used]``: batch ``k`` is ``order[b[k-1]:b[k]]``."""
    used = [int(h["items_used"]) for h in row.history or []]
    return np.asarray([0, *used], dtype=np.int64)


def batch_positions(row: EvaluationSession, number: int) -> np.ndarray:
    """The items of batch ``number`` (answered or open), in serving order."""
    b = bounds(row)
    if number <= b.size - 1:
        return order(row)[b[number - 1] : b[number]]
    return order(row)[row.items_used : row.items_used + row.open_size]


def batch_items(
    version: BenchmarkVersion, positions: np.ndarray
) -> tuple[list[SessionItem], dict[str, list[int]]]:
    """A batch as ``next_items`` and as ``samples`` (``{subtask: [doc_id, …]}``, lm-eval)."""
    index = item_index(version)
    docs = doc_ids(version)
    items = [
        SessionItem(position=int(p), item_id=str(i), doc_id=int(d), subtask=str(s))
        for p, i, d, s in zip(
            positions.tolist(),
            index.item_ids[positions].tolist(),
            docs[positions].tolist(),
            index.subtasks[positions].tolist(),
            strict=True,
        )
    ]
    samples: dict[str, list[int]] = {}
    for it in items:
        samples.setdefault(it.subtask, []).append(it.doc_id)
    return items, {k: sorted(v) for k, v in sorted(samples.items())}


def _values(parsed: ParsedResults) -> np.ndarray:
    values = np.asarray(parsed.correct, dtype=np.float64)
    if values.size and (not np.all(np.isfinite(values)) or values.min() < 0 or values.max() > 1):
        raise InvalidInput("values must be finite and in [0, 1]", field="correct")
    return values


def _check_number(row: EvaluationSession, number: int, sid: object) -> None:
    step = len(row.history or [])
    if number <= step:
        return
    if number == step + 1 and row.open_size > 0:
        return
    if number == step + 1:
        raise Conflict(
            f"session {sid} is {row.state}; it takes no more results",
            field="session_id",
            message=f"session is {row.state}",
        )
    open_text = f"the open batch is {step + 1}" if row.open_size else f"the session is {row.state}"
    raise Conflict(
        f"batch {number} has not been served ({open_text})",
        field="batch",
        message=f"at most {step + (1 if row.open_size else 0)}",
    )


def _batch_of(row: EvaluationSession, version, pos: np.ndarray) -> int:
    """The batch holding the first served item of ``pos`` (422 when none was served)."""
    served = order(row)[: row.items_used + row.open_size]
    rank = np.full(item_index(version).n_items, -1, dtype=np.int64)
    rank[served] = np.arange(served.size)
    r = rank[pos]
    if not (r >= 0).any():
        ids = item_index(version).item_ids
        raise InvalidInput(
            f"{pos.size} item(s) are not in the open batch",
            errors=[
                FieldIssue(("item_ids",), f"item {str(ids[p])!r} is not in the open batch")
                for p in pos[:MAX_LISTED].tolist()
            ],
        )
    first = int(r[r >= 0][0])
    return int(np.searchsorted(bounds(row), first, side="right"))


def _not_a_resend(row: EvaluationSession, detail: str, issues: list[FieldIssue]) -> Conflict:
    """409 for a post to an answered batch that does not repeat it; on a closed session it
    also names ``session_id`` (a closed session takes no more results)."""
    if row.open_size == 0:
        closed = FieldIssue(("session_id",), f"session is {row.state}")
        return Conflict(f"{detail}; session {row.id} is {row.state}", errors=[closed, *issues])
    return Conflict(detail, errors=issues)


def _mismatch(
    row: EvaluationSession,
    version: BenchmarkVersion,
    pos: np.ndarray,
    expected: np.ndarray,
    answered: bool,
    number: int,
) -> DomainError:
    """409 (answered batch) or 422 (open batch) naming the foreign and missing items."""
    ids = item_index(version).item_ids
    want = set(expected.tolist())
    foreign = [p for p in pos.tolist() if p not in want]
    missing = sorted(want - set(pos.tolist()))
    where = f"batch {number}" if answered else "the open batch"
    issues = [
        FieldIssue(("item_ids",), f"item {str(ids[p])!r} is not in {where}")
        for p in foreign[:MAX_LISTED]
    ] + [FieldIssue(("item_ids",), f"missing item {str(ids[p])!r}") for p in missing[:MAX_LISTED]]
    if answered:
        return _not_a_resend(
            row,
            f"batch {number} was answered with other items ({len(foreign)} foreign, "
            f"{len(missing)} missing); a resend must repeat it exactly",
            issues,
        )
    if foreign:
        return InvalidInput(f"{len(foreign)} item(s) are not in the open batch", errors=issues)
    return InvalidInput(
        f"results missing for {len(missing)} of the open batch's {expected.size} items",
        errors=issues,
    )


def resolve(
    row: EvaluationSession,
    version: BenchmarkVersion,
    parsed: ParsedResults,
    batch: int | None,
) -> Answer:
    """The batch a post answers and its values in serving order (see the module docstring)."""
    values = _values(parsed)
    step = len(row.history or [])
    if parsed.item_ids is None:
        if batch is None:
            raise InvalidInput(
                "values without item ids must name the batch they answer",
                field="batch",
                message=f"give ?batch= (the open batch is {step + 1}) or the item ids",
            )
        _check_number(row, batch, row.id)
        expected = batch_positions(row, batch)
        answered = batch <= step
        if values.size != expected.size:
            detail = f"{values.size} values given for batch {batch} of {expected.size} items"
            issue = FieldIssue(("correct",), f"expected {expected.size} values in the order served")
            if answered:
                raise _not_a_resend(row, detail, [issue])
            raise InvalidInput(detail, errors=[issue])
        aligned, number = values, batch
    else:
        index = item_index(version)
        pos = index.positions(np.asarray(parsed.item_ids, dtype=str))
        uniq, counts = np.unique(pos, return_counts=True)
        if (counts > 1).any():
            dup = index.item_ids[uniq[counts > 1][0]]
            raise InvalidInput(f"item {str(dup)!r} appears twice", field="item_ids")
        number = _batch_of(row, version, pos) if batch is None else batch
        _check_number(row, number, row.id)
        expected = batch_positions(row, number)
        answered = number <= step
        if pos.size != expected.size or not np.isin(pos, expected).all():
            raise _mismatch(row, version, pos, expected, answered, number)
        slot = np.full(index.n_items, -1, dtype=np.int64)
        slot[expected] = np.arange(expected.size)
        aligned = np.empty(expected.size)
        aligned[slot[pos]] = values
    if answered:
        b = bounds(row)
        stored = np.frombuffer(row.values, dtype="<f8")[b[number - 1] : b[number]]
        differ = np.flatnonzero(stored != aligned)
        if differ.size:
            ids = item_index(version).item_ids
            raise _not_a_resend(
                row,
                f"batch {number} was answered with other values on {differ.size} item(s); "
                "a resend must repeat it exactly",
                [
                    FieldIssue(
                        ("correct",),
                        f"item {str(ids[expected[k]])!r}: {aligned[k]:g} now, {stored[k]:g} before",
                    )
                    for k in differ[:MAX_LISTED].tolist()
                ],
            )
    return Answer(number, expected, aligned, answered)


def reply_as_of(
    public: SessionPublic, row: EvaluationSession, version, number: int
) -> SessionPublic:
    """The reply batch ``number`` got: the session as it stood right after it (``public`` is
    the current state, which is that reply for the last batch)."""
    history = row.history or []
    if number >= len(history):
        return public
    h = public.history[number - 1]
    items, samples = batch_items(version, batch_positions(row, number + 1))
    at = history[number - 1].get("applied_at")
    return public.model_copy(
        update={
            "step": number,
            "items_used": h.items_used,
            "estimate": h.estimate,
            "difference": h.difference,
            "decision": h.decision,
            "state": h.state,
            "outcome": outcome_of(h.state),
            "stopped_by": stopped_by(h.state, []),
            "conclusion": conclusion(row, h.state, items_used=h.items_used, decision=h.decision),
            "history": public.history[:number],
            "next_items": items,
            "samples": samples,
            "stored_result": None,
            "updated_at": public.updated_at if at is None else datetime.fromisoformat(at),
        }
    )
