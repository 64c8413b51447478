"""The arrows between app/ and worker/: the API enqueues by task name through app.queue and never
imports the worker package; the worker's Celery app starts from the API's client configuration."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from app.queue import ANALYSIS_CHUNKS_TASK, RUN_JOB_TASK, make_celery_client
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_app_never_imports_the_worker_package() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imports(p) if m.split(".")[0] == "worker")
        for p in (ROOT / "app").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_building_the_api_builds_no_worker() -> None:
    code = (
        "import sys, app.main\n"
        "app.main.create_app().state.job_queue.close()\n"
        "print(sorted(m for m in sys.modules if m == 'worker' or m.startswith('worker.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_worker_registers_the_task_names_the_api_sends() -> None:
    from worker.celery_app import make_celery

    settings = Settings(
        broker_url="redis://127.0.0.1:6379/5", celery_queue="q-seam", celery_key_prefix="p:"
    )
    client, worker = make_celery_client(settings), make_celery(settings)
    try:
        for key in (
            "task_default_queue",
            "task_default_routing_key",
            "task_serializer",
            "accept_content",
            "broker_transport_options",
            "broker_connection_timeout",
        ):
            assert worker.conf[key] == client.conf[key], key
        assert client.conf.broker_transport_options["global_keyprefix"] == "p:"
        worker.loader.import_default_modules()
        assert {RUN_JOB_TASK, ANALYSIS_CHUNKS_TASK} <= set(worker.tasks)
    finally:
        client.close()
        worker.close()
