"""The built-in "ping" job kind: proves API -> commit -> broker -> worker -> status."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from app.db.models import Job
from app.errors import FieldIssue, InvalidInput
from app.services.platform.jobs import JobContext

PING_MAX_STEPS = 1000
PING_MAX_DELAY = 60.0


def validate_ping(params: dict[str, Any]) -> dict[str, Any]:
    errors = []
    steps = params.get("steps", 1)
    delay = params.get("delay", 0.0)
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= PING_MAX_STEPS:
        errors.append(FieldIssue(("params", "steps"), f"an integer in [1, {PING_MAX_STEPS}]"))
    if (
        not isinstance(delay, int | float)
        or isinstance(delay, bool)
        or not 0 <= delay <= PING_MAX_DELAY
    ):
        errors.append(
            FieldIssue(("params", "delay"), f"seconds per step, a number in [0, {PING_MAX_DELAY}]")
        )
    errors += [
        FieldIssue(("params", key), "unknown parameter")
        for key in sorted(set(params) - {"steps", "delay"})
    ]
    if errors:
        raise InvalidInput("invalid ping parameters", errors=errors)
    return {"steps": steps, "delay": float(delay)}


def run_ping(session: Session, job: Job, ctx: JobContext) -> None:
    steps, delay = int(job.params["steps"]), float(job.params["delay"])
    ctx.progress(0, steps)
    for step in range(1, steps + 1):
        if delay:
            time.sleep(delay)
        ctx.progress(step)
    job.result = {"pong": True, "steps": steps}
