"""The client side (``app.client``, ``benchslice --help``, client commands such as ``verdict``)
imports neither SQLAlchemy nor FastAPI: those cost most of the CLI's start-up time."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.cli.service import thread_server

SERVER_ONLY = ("sqlalchemy", "fastapi", "starlette", "celery", "uvicorn")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_the_client_and_cli_loads_no_server_stack() -> None:
    proc = _run(
        f"""
        import sys
        import app.client, app.cli
        assert 'sqlalchemy' not in sys.modules and 'fastapi' not in sys.modules
        print(",".join(m for m in {SERVER_ONLY!r} if m in sys.modules))
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_client_commands_against_a_service_load_no_server_stack() -> None:
    with thread_server() as (url, _):
        proc = _run(
            f"""
            import sys
            from typer.testing import CliRunner
            from app.cli import app

            runner = CliRunner()
            codes = [
                runner.invoke(app, ["--help"]).exit_code,
                runner.invoke(app, ["verdict", "--help"]).exit_code,
                runner.invoke(
                    app, ["verdict", "a", "b", "-b", "nope", "-n", "5", "--url", {url!r}]
                ).exit_code,
                runner.invoke(app, ["benchmarks", "list", "--url", {url!r}]).exit_code,
            ]
            print(codes)
            print(",".join(m for m in {SERVER_ONLY!r} if m in sys.modules))
            """
        )
    assert proc.returncode == 0, proc.stderr
    codes, loaded = proc.stdout.splitlines()
    # help, help, unknown benchmark (exit 2 after a real round trip), an empty listing
    assert codes == "[0, 0, 2, 0]"
    assert loaded == ""
