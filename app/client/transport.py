"""The client's transport: one httpx connection, auth, retries, problem+json → exceptions, file
uploads with content-derived Idempotency-Keys, and waiting for jobs.

The operations (:mod:`app.client.benchmarks`, :mod:`app.client.subsets`,
:mod:`app.client.analyses`) build on :class:`Transport` and only say which path to call with
what; every rule about *how* a request is sent lives here.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import httpx

from app.client.errors import (
    BenchsliceConnectionError,
    BenchsliceError,
    JobFailedError,
    retry_after_seconds,
)
from app.schemas.jobs import JobPublic

DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUSES = frozenset({429, 502, 503, 504})
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
_MEDIA_TYPES = {
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".csv": "text/csv",
    ".parquet": "application/vnd.apache.parquet",
}

FileLike = str | os.PathLike[str] | tuple[str, bytes]
Progress = Callable[[JobPublic], None]


def media_type_for(name: str) -> str:
    """The upload content type for a file name (by extension; ``application/octet-stream`` else)."""
    return _MEDIA_TYPES.get(Path(name).suffix.lower(), "application/octet-stream")


def content_idempotency_key(*parts: bytes | str, prefix: str = "bs") -> str:
    """A deterministic Idempotency-Key: sha256 over length-prefixed parts (method, path, body…)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return f"{prefix}-{h.hexdigest()}"


def file_list(files: FileLike | Sequence[FileLike]) -> list[FileLike]:
    """One file or several, as a list; a ``(name, bytes)`` pair is one in-memory file."""
    if isinstance(files, (list, tuple)) and not _is_named_bytes(files):
        return list(files)
    return [files]  # type: ignore[list-item]


def results_upload(
    model: str,
    results: Mapping[str, Any] | None,
    files: FileLike | Sequence[FileLike] | None,
    *,
    missing: str,
) -> tuple[list[FileLike], bool]:
    """What a results upload sends, and whether it is raw: ``results`` (``{item_id: value}``) as
    one ``results.json`` for ``model``, else ``files``; neither raises with detail ``missing``."""
    if results is not None:
        data = json.dumps({"model": model, "results": dict(results)}).encode()
        return [("results.json", data)], True
    if files is None:
        raise BenchsliceError("Invalid input", detail=missing)
    return file_list(files), False


def _is_named_bytes(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], bytes)
    )


def _read_file(file: FileLike) -> tuple[str, bytes]:
    if isinstance(file, tuple):
        return file
    path = Path(file)
    return path.name, path.read_bytes()


def _clean_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in (params or {}).items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (list, tuple)):
            v = ",".join(map(str, v))
        out[k] = v
    return out


class Transport:
    """How requests reach the benchslice API (the base of :class:`app.client.Client`).

    Parameters
    ----------
    url : str, optional
        Base URL of the service (``$BENCHSLICE_URL``, default ``http://127.0.0.1:8000``); a
        trailing ``/v1`` is accepted.
    api_key : str, optional
        API key (``$BENCHSLICE_API_KEY``), sent as ``Authorization: Bearer``.
    timeout : float
        Seconds per request.
    retries : int
        Extra attempts for retryable requests (GET, or carrying an Idempotency-Key).
    backoff : float
        First wait between attempts, doubled each time (capped by ``max_wait``).
    max_wait : float
        Longest single wait, including a server's ``Retry-After``.
    transport : httpx.BaseTransport, optional
        E.g. ``httpx.WSGITransport``/an ASGI bridge for in-process use.
    event_hooks : dict, optional
        httpx event hooks (``{"request": [...], "response": [...]}``), e.g. for logging.
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_wait: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
    ) -> None:
        base = (url or os.environ.get("BENCHSLICE_URL") or DEFAULT_URL).rstrip("/")
        base = base.removesuffix("/v1")
        api_key = api_key if api_key is not None else os.environ.get("BENCHSLICE_API_KEY") or None
        all_headers = {"Accept": "application/json", "User-Agent": "benchslice-client/0.1"}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self.url = base
        self.retries = max(0, retries)
        self.backoff = backoff
        self.max_wait = max_wait
        self.sleep: Callable[[float], None] = time.sleep
        self._http = httpx.Client(
            base_url=base,
            headers=all_headers,
            timeout=timeout,
            transport=transport,
            event_hooks={k: list(v) for k, v in (event_hooks or {}).items()},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        content: bytes | None = None,
        files: list[tuple[str, tuple[str, bytes, str]]] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
        accept: str | None = None,
    ) -> httpx.Response:
        """Send one request (retrying when safe); raise :class:`BenchsliceError` unless 2xx."""
        hdrs = dict(headers or {})
        if idempotency_key is not None:
            hdrs["Idempotency-Key"] = idempotency_key
        if accept is not None:
            hdrs["Accept"] = accept
        retryable = method.upper() in ("GET", "HEAD") or idempotency_key is not None
        attempts = 1 + (self.retries if retryable else 0)
        wait = self.backoff
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._http.request(
                    method,
                    path,
                    params=_clean_params(params),
                    json=json_body,
                    content=content,
                    files=files,
                    headers=hdrs,
                )
            except httpx.TransportError as exc:
                if last:
                    raise BenchsliceConnectionError(
                        "Connection error",
                        detail=f"{method} {self.url}{path}: {type(exc).__name__}: {exc}"
                        if str(exc)
                        else f"{method} {self.url}{path}: {type(exc).__name__}",
                    ) from exc
                self.sleep(min(wait, self.max_wait))
                wait *= 2
                continue
            if response.is_success:
                return response
            if last or response.status_code not in RETRY_STATUSES:
                raise BenchsliceError.from_response(response)
            retry_after = retry_after_seconds(response)
            self.sleep(min(retry_after if retry_after is not None else wait, self.max_wait))
            wait *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def get_json(self, path: str, **params: Any) -> Any:
        """``GET path?params`` and its decoded JSON body (``None`` parameters are left out)."""
        return self.request("GET", path, params=params).json()

    def post_seeded(self, path: str, body: Mapping[str, Any], seed: int | None) -> httpx.Response:
        """``POST path`` with ``body`` as canonical JSON (sorted keys). With a ``seed`` the answer
        is determined by the body, so it carries a content-derived Idempotency-Key and a retry
        replays it; without one the server draws a seed, so it is sent once."""
        data = json.dumps(body, sort_keys=True).encode()
        key = content_idempotency_key("POST", path, data) if seed is not None else None
        return self.request(
            "POST",
            path,
            content=data,
            headers={"Content-Type": "application/json"},
            idempotency_key=key,
        )

    def send_files(
        self,
        path: str,
        files: Sequence[FileLike],
        params: Mapping[str, Any],
        *,
        key: bool | str,
        raw: bool = False,
    ) -> httpx.Response:
        """POST files as multipart ``file`` parts (their names carry the lm-eval task), or with
        ``raw`` one in-memory document as the body.

        ``key``: an Idempotency-Key, ``True`` to derive one from the request's content (method,
        path, parameters, file names and bytes), ``False`` for none."""
        loaded = [_read_file(f) for f in files]
        if not loaded:
            raise BenchsliceError("Invalid input", detail="no file to upload")
        clean = _clean_params(params)
        parts: list[bytes | str] = ["POST", path, json.dumps(clean, sort_keys=True)]
        for fname, data in loaded:
            parts += [fname, data]
        idem = key if isinstance(key, str) else content_idempotency_key(*parts) if key else None
        if raw:
            ((fname, data),) = loaded
            return self.request(
                "POST",
                path,
                params=clean,
                content=data,
                headers={"Content-Type": media_type_for(fname)},
                idempotency_key=idem,
            )
        return self.request(
            "POST",
            path,
            params=clean,
            files=[("file", (fname, data, media_type_for(fname))) for fname, data in loaded],
            idempotency_key=idem,
        )

    # --- jobs -----------------------------------------------------------------------------------

    def get_job(self, job_id: str | uuid.UUID) -> JobPublic:
        """``GET /v1/jobs/{id}``: status, progress, result or error."""
        return JobPublic.model_validate(self.get_json(f"/v1/jobs/{job_id}"))

    def wait(
        self,
        job_id: str | uuid.UUID,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
        poll: float = 0.2,
        max_poll: float = 2.0,
    ) -> JobPublic:
        """Poll a job until it ends (interval ``poll`` growing by 1.5x up to ``max_poll``).

        ``progress(job)`` is called after every poll. Returns the succeeded job; raises
        :class:`JobFailedError` when it failed or was cancelled, and :class:`BenchsliceError`
        (title ``Timed out``) after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll
        while True:
            job = self.get_job(job_id)
            if progress is not None:
                progress(job)
            if job.status in TERMINAL:
                if job.status != "succeeded":
                    raise JobFailedError(job)
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise BenchsliceError(
                    "Timed out",
                    detail=f"job {job_id} still {job.status} after {timeout:g} s "
                    f"({job.progress.done}/{job.progress.total or '?'})",
                )
            self.sleep(interval)
            interval = min(interval * 1.5, max_poll)
