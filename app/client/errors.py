"""The client's one exception type (and its two refinements), built from RFC 9457 problem+json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from app.schemas.jobs import JobPublic


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Seconds from a response's ``Retry-After`` header (``None`` when absent or not a number)."""
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class BenchsliceError(Exception):
    """An API problem (RFC 9457) or a transport failure, in one type.

    Attributes
    ----------
    status : int or None
        HTTP status; ``None`` when no response arrived (see :class:`BenchsliceConnectionError`).
    title, detail : str
        The problem's title and detail.
    type : str
        The problem type URI (``about:blank`` when the server gave none).
    errors : list of dict
        Field errors, each ``{"loc": [...], "field": "query.metric", "message": "..."}``.
    errors_total : int or None
        How many field errors there were when the server listed only the first.
    retry_after : float or None
        Seconds from the ``Retry-After`` header, when present.
    """

    def __init__(
        self,
        title: str,
        *,
        status: int | None = None,
        detail: str | None = None,
        type: str = "about:blank",
        errors: Sequence[Mapping[str, Any]] | None = None,
        instance: str | None = None,
        retry_after: float | None = None,
        errors_total: int | None = None,
    ) -> None:
        self.title = title
        self.status = status
        self.detail = detail or title
        self.type = type
        self.errors = [dict(e) for e in errors or ()]
        self.errors_total = max(errors_total or 0, len(self.errors))
        self.instance = instance
        self.retry_after = retry_after
        super().__init__(str(self))

    @property
    def fields(self) -> list[str]:
        """The offending fields (``"query.metric"``, ``"body.items.0.id"`` …), in order."""
        return [str(e.get("field") or ".".join(map(str, e.get("loc", ())))) for e in self.errors]

    @property
    def field(self) -> str | None:
        """The first offending field, or ``None``."""
        fields = self.fields
        return fields[0] if fields else None

    def __str__(self) -> str:
        head = f"{self.status} {self.title}" if self.status is not None else self.title
        text = head if self.detail == self.title else f"{head}: {self.detail}"
        for e, f in zip(self.errors[:5], self.fields, strict=False):
            text += f"\n  {f}: {e.get('message', 'invalid')}"
        shown = min(5, len(self.errors))
        if self.errors_total > shown:
            text += f"\n  … and {self.errors_total - shown} more"
        return text

    @classmethod
    def from_response(cls, response: httpx.Response) -> BenchsliceError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            body = {"detail": response.text[:500] or None}
        return cls(
            str(body.get("title") or response.reason_phrase or "HTTP error"),
            status=response.status_code,
            detail=body.get("detail") if isinstance(body.get("detail"), str) else None,
            type=str(body.get("type") or "about:blank"),
            errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
            errors_total=body.get("errors_total")
            if isinstance(body.get("errors_total"), int)
            else None,
            instance=body.get("instance"),
            retry_after=retry_after_seconds(response),
        )


class BenchsliceConnectionError(BenchsliceError):
    """The server could not be reached (or the connection broke) after the allowed retries."""


class JobFailedError(BenchsliceError):
    """A job ended ``failed`` or ``cancelled``; ``job`` holds its last state."""

    def __init__(self, job: JobPublic) -> None:
        self.job = job
        super().__init__(
            f"Job {job.status}", detail=job.error or f"job {job.id} {job.status}", status=None
        )
