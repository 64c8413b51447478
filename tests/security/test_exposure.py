"""Secure default: no open service on a public address unless asked for explicitly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from app.settings import Settings, exposure_refusal, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True),
     ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False),
     ("example.org", False)],
)  # fmt: skip
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_refusal_rules() -> None:
    assert exposure_refusal(Settings(host="127.0.0.1")) is None
    refusal = exposure_refusal(Settings(host="0.0.0.0"))
    assert refusal is not None and "ALLOW_UNAUTHENTICATED=true" in refusal
    assert "AUTH_ENABLED=true" in refusal
    assert exposure_refusal(Settings(host="0.0.0.0", auth_enabled=True)) is None
    assert exposure_refusal(Settings(host="0.0.0.0", allow_unauthenticated=True)) is None
    assert exposure_refusal(Settings(), host="0.0.0.0") is not None  # an explicit --host counts


def _env(**extra: str) -> dict[str, str]:
    drop = {"AUTH_ENABLED", "HOST", "ALLOW_UNAUTHENTICATED", "BENCHSLICE_BIND_HOST"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra)
    return env


def test_make_run_refuses_a_public_address_without_keys(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher"],
        env=_env(HOST="0.0.0.0", DATABASE_URL=f"sqlite:///{tmp_path}/never.sqlite3"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "refusing to serve on 0.0.0.0" in lines[0]
    assert "ALLOW_UNAUTHENTICATED=true" in lines[0]
    assert not (tmp_path / "never.sqlite3").exists()  # refused before migrating anything


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_starts_open_when_allowed_and_warns(tmp_path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0", "--port", str(port)],
        env=_env(ALLOW_UNAUTHENTICATED="true", DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3"),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "Uvicorn running" in line or "Application startup complete" in line:
                break
        text = "".join(seen)
        assert "WARNING serving on 0.0.0.0 with API keys disabled" in text
        assert "Application startup complete" in text or "Uvicorn running" in text, text
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _uvicorn(host: str, port: int, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory"]
    return subprocess.Popen(
        [*argv, "--host", host, "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one", "workers"])
def test_the_app_factory_refuses_a_public_bind_without_keys(tmp_path, workers) -> None:
    """The README's scaling path (`uvicorn --factory --host 0.0.0.0`) no longer bypasses the
    guard: the app's startup fails, whatever started it."""
    env = _env(DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")
    env.pop("ALLOW_UNAUTHENTICATED", None)
    env.pop("BENCHSLICE_BIND_HOST", None)
    proc = _uvicorn("0.0.0.0", _free_port(), env, *workers)
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if not workers:  # uvicorn's supervisor (--workers) stops but exits 0 when a child fails
        assert proc.returncode == 3, out
    assert "refusing to serve on 0.0.0.0" in out and "ALLOW_UNAUTHENTICATED=true" in out, out
    assert "Application startup complete" not in out


def test_the_app_factory_serves_a_public_bind_with_keys(tmp_path) -> None:
    """With keys on, 0.0.0.0 starts (traffic sent to 127.0.0.1 only)."""
    import httpx

    port = _free_port()
    env = _env(DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", AUTH_ENABLED="true")
    proc = _uvicorn("0.0.0.0", port, env)
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert status == 200
        assert httpx.get(f"http://127.0.0.1:{port}/v1/benchmarks", timeout=5).status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_bind_hosts_reads_the_serve_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.api.exposure import ExposureRefused, bind_hosts, check_exposure

    monkeypatch.setenv("BENCHSLICE_BIND_HOST", "10.0.0.7")
    assert bind_hosts() == ["10.0.0.7"]
    with pytest.raises(ExposureRefused):
        check_exposure(Settings(auth_enabled=False))
    check_exposure(Settings(auth_enabled=True))
    monkeypatch.setenv("BENCHSLICE_BIND_HOST", "127.0.0.1")
    check_exposure(Settings(auth_enabled=False))


def test_the_bind_host_variable_does_not_hide_the_real_address(tmp_path) -> None:
    """Issue 39: ``BENCHSLICE_BIND_HOST=127.0.0.1`` used to override what uvicorn said; now it
    is checked besides the server's own ``--host 0.0.0.0``, which still refuses."""
    env = _env(DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", BENCHSLICE_BIND_HOST="127.0.0.1")
    env.pop("ALLOW_UNAUTHENTICATED", None)
    proc = _uvicorn("0.0.0.0", _free_port(), env)
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, out
    assert "refusing to serve on 0.0.0.0" in out, out
