"""Who the current request is for, as quotas and limits see it (set per request by the API).

A context variable rather than an argument: job creation deep inside a service charges the
request's caller without every service passing it down. ``None`` outside requests (worker tasks,
scripts): their work is not limited.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who a request is for, as the limits see it: the key id, the buckets it draws on, and
    whether its role exempts it (admins)."""

    id: str
    units: tuple[str, ...]
    exempt: bool = False
    labels: tuple[tuple[str, str], ...] = ()  # unit -> readable name (a project's)

    @property
    def projects(self) -> tuple[str, ...]:
        """The project ids whose totals this caller counts towards (its ``project:`` units)."""
        return tuple(u.split(":", 1)[1] for u in self.units if u.startswith("project:"))


# Set per request by the API (app.api.deps); None outside requests (worker tasks, scripts).
CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("caller", default=None)
