"""Who the current request is for, as quotas and limits see it (set per request by the API).

A context variable rather than an argument: job creation deep inside a service charges the
request's caller without every service passing it down. ``None`` outside requests (worker tasks,
scripts): their work is not limited.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Caller:
    """Who a request is for, as the limits see it: the key id, the buckets it draws on, and
    whether its role exempts it (admins)."""

    id: str
    units: tuple[str, ...]
    exempt: bool = False
    labels: tuple[tuple[str, str], ...] = ()  # unit -> readable name (a project's)
    # the project units this request touched so far (a target's project was checked), and
    # what charges a project unit when it is first touched (set by the API)
    touched: set[str] = field(default_factory=set, compare=False)
    on_touch: Callable[[str], None] | None = field(default=None, compare=False)

    def charged_units(self) -> tuple[str, ...]:
        """The buckets a charge takes from: the key's, and the projects the request touched
        (issue 39: never another project's bucket the key merely holds a role on)."""
        return tuple(u for u in self.units if not u.startswith("project:") or u in self.touched)

    @property
    def projects(self) -> tuple[str, ...]:
        """The project ids whose totals this caller counts towards (its ``project:`` units)."""
        return tuple(u.split(":", 1)[1] for u in self.units if u.startswith("project:"))


# Set per request by the API (app.api.deps); None outside requests (worker tasks, scripts).
CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("caller", default=None)


def touch_project(project_id: object) -> None:
    """The request acts on this project (its target's project was checked): charge its
    bucket, once per request, when the caller draws on it."""
    caller = CALLER.get()
    if caller is None:
        return
    unit = f"project:{project_id}"
    if unit in caller.touched or unit not in caller.units:
        return
    caller.touched.add(unit)
    if caller.on_touch is not None:
        caller.on_touch(unit)
