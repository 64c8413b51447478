"""CLI tests drive ``benchslice`` as a user would: subprocesses against a real service
(``python -m app.launcher`` on the embedded SQLite + SQLite-broker defaults, in a temp dir)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.service import LiveService, live_service
from tests.support.tools import missing

BENCHSLICE = Path(sys.executable).parent / "benchslice"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


@dataclass
class Run:
    args: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return (
            f"$ benchslice {' '.join(self.args)}\n[exit {self.code}]\n{self.stdout}\n{self.stderr}"
        )


CLI = Callable[..., Run]


def run_cli(service: LiveService | None, *args: str, stdin: str | None = None, **env: str) -> Run:
    """``benchslice ARGS`` in a subprocess (the installed entry point), stdin not a terminal."""
    command = [str(BENCHSLICE)] if BENCHSLICE.exists() else [sys.executable, "-m", "app.cli"]
    base = service.client_env(**env) if service else {**os.environ, **env}
    proc = subprocess.run(
        [*command, *args],
        env=base,
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Run(list(args), proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="session")
def service() -> Iterator[LiveService]:
    with live_service() as svc:
        yield svc


@pytest.fixture(scope="session")
def cli(service: LiveService) -> CLI:
    return lambda *args, **kw: run_cli(service, *args, **kw)


@pytest.fixture(scope="session")
def gpqa_path(shared_data_dir: Path) -> Path:
    path = shared_data_dir / "gpqa.npz"
    if not path.exists():
        missing(f"{path} not found (set BENCHSLICE_SHARED_DATA)")
    return path


HELD_OUT = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture(scope="session")
def gpqa(cli: CLI, gpqa_path: Path) -> dict[str, Any]:
    """GPQA pushed once through the CLI (every model but one held out for scoring)."""
    run = cli("push", "--create", "--benchmark", "gpqa", str(gpqa_path), "--exclude", HELD_OUT)
    assert run.code == 0, run
    return {"name": "gpqa", "path": gpqa_path, "held_out": HELD_OUT}
