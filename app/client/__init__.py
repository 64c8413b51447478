"""Python client for the benchslice HTTP API (used by the ``benchslice`` CLI and by CI scripts).

>>> from app.client import Client
>>> with Client() as bs:                       # BENCHSLICE_URL / BENCHSLICE_API_KEY from the env
...     gpqa = bs.find_benchmark("gpqa")
...     v = bs.verdict(gpqa.id, "org/model-a", "org/model-b", size=25)

Every error the API answers (RFC 9457 problem+json) and every transport failure is raised as one
exception type, :class:`BenchsliceError` (``status``, ``title``, ``detail``, ``field``/``fields``).
Requests are retried with exponential backoff only where that is safe: ``GET`` and requests
carrying an ``Idempotency-Key`` (retried on connection errors and on 429/502/503/504, honouring
``Retry-After``). Uploads get an ``Idempotency-Key`` derived from their content by default, so a
retried upload is a no-op on the server.

Layout: :mod:`~app.client.transport` sends requests (httpx, auth, retries, uploads, waiting for
jobs) and :mod:`~app.client.errors` turns problems into exceptions; the operations, one module per
area (:mod:`~app.client.benchmarks`, :mod:`~app.client.subsets`, :mod:`~app.client.analyses`,
:mod:`~app.client.leaderboards`, :mod:`~app.client.sessions`, :mod:`~app.client.gates`,
:mod:`~app.client.jobs`,
:mod:`~app.client.audit`), build on the transport;
:class:`Client` brings them together.
"""

from __future__ import annotations

from app.client.analyses import AnalysisOperations
from app.client.audit import AuditOperations
from app.client.benchmarks import BenchmarkOperations, UploadReply
from app.client.errors import BenchsliceConnectionError, BenchsliceError, JobFailedError
from app.client.gates import GateOperations
from app.client.jobs import JobOperations
from app.client.leaderboards import LeaderboardOperations
from app.client.sessions import SessionOperations, SessionStart
from app.client.subsets import SubsetOperations, SubsetRequest
from app.client.transport import DEFAULT_URL, content_idempotency_key, media_type_for

__all__ = [
    "DEFAULT_URL",
    "BenchsliceConnectionError",
    "BenchsliceError",
    "Client",
    "JobFailedError",
    "SessionStart",
    "SubsetRequest",
    "UploadReply",
    "content_idempotency_key",
    "media_type_for",
]


class Client(
    BenchmarkOperations,
    SubsetOperations,
    AnalysisOperations,
    LeaderboardOperations,
    SessionOperations,
    GateOperations,
    JobOperations,
    AuditOperations,
):
    """A benchslice API client: every operation, over one :class:`~app.client.transport.Transport`.

    Takes the constructor arguments of :class:`~app.client.transport.Transport` (``url``,
    ``api_key``, ``timeout``, ``retries``, ``backoff``, ``max_wait``, ``transport``,
    ``event_hooks``), documented there.
    """
