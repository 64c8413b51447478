"""Whatever goes wrong, a client command exits 2 — never 1, which ``verdict`` uses for "not
distinguishable" — and says what happened on stderr."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import run_cli
from tests.cli.service import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def not_benchslice(tmp_path: Path) -> Iterator[str]:
    """A real HTTP server that answers 200 with something that is not the API's JSON."""
    # the verdict path (the CLI sends --benchmark straight into it; the query is ignored here)
    (tmp_path / "v1" / "benchmarks" / "gpqa").mkdir(parents=True)
    (tmp_path / "v1" / "benchmarks" / "gpqa" / "verdict").write_text("<html>hello</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_unexpected_response_exits_2(not_benchslice: str) -> None:
    run = run_cli(None, "verdict", "-b", "gpqa", "a", "b", "-n", "25", "--url", not_benchslice)
    assert run.code == 2, run
    assert run.stderr.startswith("error: unexpected JSONDecodeError"), run


def test_404_from_a_foreign_server_exits_2(not_benchslice: str) -> None:
    run = run_cli(
        None,
        "plan",
        "-b",
        "00000000-0000-0000-0000-000000000000",
        "--gap",
        "0.1",
        "--url",
        not_benchslice,
    )
    assert run.code == 2, run
    assert run.stderr.startswith("error: 404 "), run


def test_connection_refused_exits_2() -> None:
    run = run_cli(None, "benchmarks", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert run.code == 2 and "Connection error" in run.stderr, run
