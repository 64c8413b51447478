"""Sessions a CI job can live with (issue 23): idle sessions read as ``abandoned``, and the
listing of a benchmark version's sessions.

``abandoned`` is computed on read, not written by a sweep: an ``open`` session whose last
activity (``updated_at``: its creation or its last applied batch; resends and reads do not
count) is older than ``SESSION_IDLE_HOURS`` reads as ``abandoned`` everywhere (the session, the
listing and its ``state`` filter, the pages), and takes no more results (409). Computing it
needs no periodic task (``make run`` has no beat scheduler) and can never disagree with the
setting in force; the price is that raising the setting revives sessions idle for less than
the new limit, which is what whoever raised it wants. ``0`` turns it off.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.core.sequential.population import estimand_sentence
from app.db.base import utcnow
from app.db.models import EvaluationSession
from app.db.repositories.sessions import EvaluationSessionRepository
from app.errors import Conflict
from app.schemas.sessions import SessionPage, SessionState, SessionSummary
from app.services.catalog.benchmarks import get_version
from app.services.platform.pagination import decode_cursor, encode_cursor

MAX_PAGE = 100
ABANDONED = "abandoned"


def idle_cutoff(idle_hours: float | None, now: datetime | None = None) -> datetime | None:
    """Last activity before this instant makes an open session abandoned (None: never)."""
    if not idle_hours:
        return None
    return (now or utcnow()) - timedelta(hours=idle_hours)


def state_of(row: EvaluationSession, idle_hours: float | None) -> str:
    """The state a reader sees: the stored one, or ``abandoned`` for an idle open session."""
    cutoff = idle_cutoff(idle_hours)
    if row.state == "open" and cutoff is not None and row.updated_at < cutoff:
        return ABANDONED
    return row.state


def refuse_if_abandoned(row: EvaluationSession, idle_hours: float | None) -> None:
    """409 for a batch posted to an abandoned session (resends are still answered)."""
    if state_of(row, idle_hours) == ABANDONED:
        raise Conflict(
            f"session {row.id} was abandoned: no batch since {row.updated_at.isoformat()} "
            f"(more than {idle_hours:g} h, SESSION_IDLE_HOURS); start a new session",
            field="session_id",
            message="session is abandoned",
        )


def list_sessions(
    session: Session,
    version_id: uuid.UUID,
    *,
    idle_hours: float | None,
    limit: int = 20,
    cursor: str | None = None,
    model: str | None = None,
    state: SessionState | None = None,
    hide_abandoned: bool = False,
) -> SessionPage:
    """A version's sessions, newest first, keyset-paginated on ``(created_at, id)``
    (``state="abandoned"``: open and idle; ``"open"``: open and not idle)."""
    version = get_version(session, version_id)
    limit = max(1, min(limit, MAX_PAGE))
    before = decode_cursor(cursor) if cursor else None
    rows = list(
        EvaluationSessionRepository(session).page(
            version.id,
            limit=limit + 1,
            before=before,
            model=model,
            state="open" if state == ABANDONED else state,
            idle=True
            if state == ABANDONED
            else False
            if state == "open" or hide_abandoned
            else None,
            idle_before=idle_cutoff(idle_hours),
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    return SessionPage(
        items=[
            SessionSummary(
                id=r.id,
                version_id=version.id,
                model=r.model_name,
                baseline=r.baseline_name,
                goal=r.goal,  # type: ignore[arg-type]
                policy=r.policy,  # type: ignore[arg-type]
                estimand=r.estimand,  # type: ignore[arg-type]
                state=state_of(r, idle_hours),  # type: ignore[arg-type]
                decision=r.decision,  # type: ignore[arg-type]
                items_used=r.items_used,
                n_items=r.n_items,
                created_at=r.created_at,
                updated_at=r.updated_at,
            )
            for r in rows
        ],
        next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None,
    )


#: what a reader is told a session came to, by its state: a session whose items or budget ran out
#: before its test decided is INCONCLUSIVE (what CI's exit code 1 says), never a pass
OUTCOMES = {"open": "open", "decided": "decided", "exhausted": "inconclusive", ABANDONED: ABANDONED}


def outcome_of(state: str) -> str:
    """``open`` / ``decided`` / ``inconclusive`` (items or budget spent first) / ``abandoned``."""
    return OUTCOMES[state]


def stopped_by(state: str, spent_budgets: list[str]) -> str | None:
    """Why a closed session stopped: ``decision``, ``budget`` (a cost budget ran out) or
    ``max_items``; None while open (or abandoned)."""
    if state == "decided":
        return "decision"
    if state == "exhausted":
        return "budget" if spent_budgets else "max_items"
    return None


def conclusion(
    row: EvaluationSession,
    state: str,
    *,
    items_used: int | None = None,
    decision: str | None = None,
    spent_budgets: list[str] | None = None,
) -> str:
    """The session's answer in one sentence naming its estimand (the CLI prints it at the end,
    the session page shows it); ``items_used``/``decision``: as of an earlier batch;
    ``spent_budgets``: the units of the budgets that ran out (an exhausted session names them)."""
    about = f"about {estimand_sentence(row.estimand, row.n_items)}"
    used = f"{row.items_used if items_used is None else items_used} of {row.n_items} items"
    if state == "decided":
        return f"Decided ({row.decision if decision is None else decision}) after {used}, {about}."
    if state == "exhausted":
        why = (
            f"the {' and '.join(spent_budgets)} budget ran out"
            if spent_budgets
            else f"max_items = {row.max_items} reached"
        )
        if row.baseline_name is not None:
            return (
                f"Inconclusive ({why}). Not decided after {used}: they do not separate "
                f"{row.model_name} from {row.baseline_name} at alpha = {row.alpha:g}, {about}."
            )
        return f"Inconclusive ({why}): not decided after {used}, {about}."
    return f"{state.capitalize()} after {used}, {about}."
