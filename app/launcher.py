"""`make run`: migrations, then uvicorn and one Celery worker as subprocesses; stop both together."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from types import FrameType

from app.settings import exposure_refusal, get_settings


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url


def main(*, migrate: bool = True) -> int:
    settings = get_settings()
    refusal = exposure_refusal(settings)
    if refusal is not None:  # before migrating or starting anything
        print(f"benchslice: {refusal}", file=sys.stderr, flush=True)
        return 2
    if migrate:
        from app.db.migrate import upgrade

        upgrade()
    base = f"http://{settings.host}:{settings.port}"
    cli = [sys.executable, "-m", "app.cli"]
    procs = [
        subprocess.Popen([*cli, "serve"]),
        subprocess.Popen([*cli, "worker"]),
    ]
    print(
        f"benchslice API:  {base}/v1  (health {base}/healthz, readiness {base}/readyz)", flush=True
    )
    print(f"interactive docs: {base}/docs", flush=True)
    print(f"browser view:     {base}/ui/", flush=True)
    print(
        f"database: {_redact(settings.database_url)}   broker: {_redact(settings.broker_url)}",
        flush=True,
    )
    print("Ctrl-C stops the API and the worker.", flush=True)

    stopping = False

    def _stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    code = 0
    while not stopping:
        for proc in procs:
            if proc.poll() is not None:
                print(
                    f"process {proc.args[-1]} exited with {proc.returncode}; stopping",
                    file=sys.stderr,
                    flush=True,
                )
                code = proc.returncode or 1
                stopping = True
        time.sleep(0.2)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return code


if __name__ == "__main__":
    sys.exit(main())
