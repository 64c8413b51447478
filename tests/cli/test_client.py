"""app.client against real servers: problem+json mapping, retry rules, job waiting, API keys."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.client import (
    BenchsliceConnectionError,
    BenchsliceError,
    Client,
    JobFailedError,
    content_idempotency_key,
)
from tests.cli.conftest import FIXTURES
from tests.cli.service import LiveService, free_port, thread_server

pytestmark = pytest.mark.integration

ARC = FIXTURES / "samples_arc_easy_2024-05-01T10-00-00.123456.jsonl"


class Attempts:
    """Counts requests as they leave the client (an httpx event hook; nothing is faked)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request: httpx.Request) -> None:
        self.requests.append((request.method, request.url.path))

    def client(self, url: str, **kwargs: object) -> Client:
        return Client(url, event_hooks={"request": [self]}, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def attempts() -> Attempts:
    return Attempts()


# --- problem+json → BenchsliceError --------------------------------------------------------------


def test_not_found_maps_status_title_detail(service: LiveService) -> None:
    with Client(service.url) as client, pytest.raises(BenchsliceError) as info:
        client.get_benchmark(uuid.uuid4())
    exc = info.value
    assert exc.status == 404 and exc.title == "Not found"
    assert exc.detail and exc.detail != exc.title
    assert exc.type.endswith("/not-found")
    assert str(exc).startswith("404 Not found: ")


def test_validation_error_carries_the_fields(service: LiveService) -> None:
    with Client(service.url) as client, pytest.raises(BenchsliceError) as info:
        client.create_benchmark("bad/name", ["a"])
    exc = info.value
    assert exc.status == 422 and exc.title == "Invalid input"
    assert exc.field == "body.name" and exc.fields == ["body.name"]
    assert "body.name: " in str(exc)


def test_ambiguous_metric_names_the_query_field(service: LiveService) -> None:
    with Client(service.url) as client:
        bench = client.create_benchmark_from_samples("arc-client", [ARC])
        with pytest.raises(BenchsliceError) as info:
            client.upload_results_file(bench.id, ARC, model="m")
        assert info.value.status == 422 and info.value.field == "query.metric"
        reply = client.upload_results_file(bench.id, ARC, model="m", metric="acc")
        assert reply.status == "created" and reply.n_items == 5 and not reply.replayed
        again = client.upload_results_file(bench.id, ARC, model="m", metric="acc")
        assert again.replayed and again.content_hash == reply.content_hash


def test_find_benchmark_resolves_latest_version(service: LiveService) -> None:
    with Client(service.url) as client:
        v1 = client.create_benchmark("versions", ["a", "b"])
        v2 = client.create_benchmark("versions", ["a", "b", "c"])
        assert (v1.version, v2.version) == (1, 2)
        assert client.find_benchmark("versions").id == v2.id
        with pytest.raises(BenchsliceError) as info:
            client.find_benchmark("versions-nope")
        assert info.value.status == 404 and info.value.field == "benchmark"


def test_env_configures_url(service: LiveService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHSLICE_URL", service.url + "/v1/")
    with Client() as client:
        assert client.url == service.url
        assert client.health()["status"] == "ok"


# --- retry rules ---------------------------------------------------------------------------------


def test_connection_errors_retry_only_get_and_idempotent_posts(attempts: Attempts) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with attempts.client(dead, retries=2, backoff=0.0) as client:
        with pytest.raises(BenchsliceConnectionError) as info:
            client.list_benchmarks()
        assert info.value.status is None and "ConnectError" in info.value.detail
        assert len(attempts.requests) == 3

        attempts.requests.clear()
        with pytest.raises(BenchsliceConnectionError):
            client.create_job("ping")
        assert attempts.requests == [("POST", "/v1/jobs")]

        attempts.requests.clear()
        with pytest.raises(BenchsliceConnectionError):
            client.upload_results(uuid.uuid4(), "m", results={"a": 1})
        assert len(attempts.requests) == 3 and {m for m, _ in attempts.requests} == {"POST"}

        attempts.requests.clear()  # scores honour Idempotency-Key server-side: retried too
        with pytest.raises(BenchsliceConnectionError):
            client.score_subset("0" * 64, model="m", results={"a": 1})
        assert len(attempts.requests) == 3 and {m for m, _ in attempts.requests} == {"POST"}

        attempts.requests.clear()
        with pytest.raises(BenchsliceConnectionError):
            client.score_subset("0" * 64, model="m", results={"a": 1}, idempotency_key=False)
        assert len(attempts.requests) == 1


@pytest.fixture(scope="module")
def broker_down() -> Iterator[str]:
    """A real app whose broker (Redis on a closed port) is down: 503 + Retry-After."""
    with thread_server(
        broker_url=f"redis://127.0.0.1:{free_port()}/0", broker_publish_timeout=0.5
    ) as (url, _):
        yield url


def test_503_get_is_retried_honouring_retry_after(broker_down: str, attempts: Attempts) -> None:
    with attempts.client(broker_down, retries=2, backoff=0.0, max_wait=0.01) as client:
        with pytest.raises(BenchsliceError) as info:
            client.ready()
    assert info.value.status == 503 and info.value.title == "Not ready"
    assert info.value.retry_after == 5.0
    assert attempts.requests == [("GET", "/readyz")] * 3


def test_503_post_without_idempotency_key_is_not_retried(
    broker_down: str, attempts: Attempts
) -> None:
    with attempts.client(broker_down, retries=3, backoff=0.0, max_wait=0.01) as client:
        with pytest.raises(BenchsliceError) as info:
            client.create_job("ping")
        assert info.value.status == 503 and info.value.retry_after is not None
        assert attempts.requests == [("POST", "/v1/jobs")]


def test_4xx_is_never_retried(service: LiveService, attempts: Attempts) -> None:
    with attempts.client(service.url, retries=3, backoff=0.0) as client:
        with pytest.raises(BenchsliceError):
            client.get_job(uuid.uuid4())
    assert len(attempts.requests) == 1


def test_content_key_is_deterministic_and_length_prefixed() -> None:
    assert content_idempotency_key("a", b"bc") == content_idempotency_key("a", b"bc")
    assert content_idempotency_key("ab", b"c") != content_idempotency_key("a", b"bc")


# --- jobs ----------------------------------------------------------------------------------------


def test_wait_reports_progress_until_succeeded(service: LiveService) -> None:
    seen: list[tuple[str, int]] = []
    with Client(service.url) as client:
        job = client.create_job("ping", {"steps": 4, "delay": 0.2})
        done = client.wait(job.id, progress=lambda j: seen.append((j.status, j.progress.done)))
    assert done.status == "succeeded" and done.result == {"pong": True, "steps": 4}
    assert seen[-1] == ("succeeded", 4)
    assert [d for _, d in seen] == sorted(d for _, d in seen)


def test_wait_raises_for_cancelled_and_times_out(service: LiveService) -> None:
    with Client(service.url) as client:
        job = client.create_job("ping", {"steps": 100, "delay": 0.1})
        with pytest.raises(BenchsliceError) as info:
            client.wait(job.id, timeout=0.3)
        assert info.value.title == "Timed out" and str(job.id) in info.value.detail
        client.cancel_job(job.id)
        with pytest.raises(JobFailedError) as failed:
            client.wait(job.id, timeout=60)
    assert failed.value.job.status == "cancelled"
    assert isinstance(failed.value, BenchsliceError)


# --- API keys from the environment ---------------------------------------------------------------


def test_api_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.services.access.keys import create_key

    with thread_server(auth_enabled=True) as (url, db_url):
        engine = create_engine(db_url)
        with Session(engine) as session:
            _, token = create_key(session, "ci", ["write"])
            session.commit()
        engine.dispose()
        monkeypatch.delenv("BENCHSLICE_API_KEY", raising=False)
        with Client(url) as anonymous, pytest.raises(BenchsliceError) as info:
            anonymous.list_benchmarks()
        assert info.value.status == 401
        monkeypatch.setenv("BENCHSLICE_API_KEY", token)
        with Client(url) as client:
            assert client.create_benchmark("keyed", ["a"]).n_items == 1
            assert [b.name for b in client.list_benchmarks().items] == ["keyed"]


def test_503_post_with_idempotency_key_is_retried(broker_down: str, attempts: Attempts) -> None:
    """A seeded subset request carries a content-derived Idempotency-Key (the subset is
    content-addressed, so repeating it is safe): a 503 from the down broker is retried."""
    with Client(broker_down) as setup:
        bench = setup.create_benchmark("retry", [f"q{i}" for i in range(10)])
    path = f"/v1/benchmarks/{bench.id}/subsets"
    with attempts.client(broker_down, retries=2, backoff=0.0, max_wait=0.01) as client:
        with pytest.raises(BenchsliceError) as info:
            client.create_subset(bench.id, "random", 5, seed=1)
        assert info.value.status == 503
        assert attempts.requests == [("POST", path)] * 3
        attempts.requests.clear()
        with pytest.raises(BenchsliceError):
            client.create_subset(bench.id, "random", 5)  # no seed: a new subset each time
        assert attempts.requests == [("POST", path)]


# Every operation of the committed OpenAPI has a client method (a new endpoint needs one).
CLIENT_METHODS = {
    "health-healthz": "health",
    "health-readyz": "ready",
    "jobs-create_job": "create_job",
    "jobs-get_job": "get_job",
    "jobs-cancel_job": "cancel_job",
    "benchmarks-list_benchmarks": "list_benchmarks",
    "benchmarks-create_benchmark": "create_benchmark",
    "benchmarks-create_benchmark_from_samples": "create_benchmark_from_samples",
    "benchmarks-get_benchmark": "get_benchmark",
    "benchmarks-start_coverage_study": "start_coverage",
    "benchmarks-get_coverage_study": "get_coverage",
    "benchmarks-list_items": "list_items",
    "results-upload_results": "upload_results_file",
    "results-upload_matrix": "upload_matrix",
    "results-list_models": "list_models",
    "results-delete_model_results": "delete_model_results",
    "results-restore_model_results": "restore_model_results",
    "benchmarks-retire_benchmark_version": "retire_version",
    "benchmarks-unretire_benchmark_version": "retire_version",
    "audit-list_audit_events": "list_audit_events",
    "audit-list_projects": "list_projects",
    "results-get_matrix": "get_matrix",
    "subsets-create_subset": "create_subset",
    "subsets-get_subset": "get_subset",
    "subsets-score_on_subset": "score_subset",
    "subsets-subset_verdict": "subset_verdict",
    "subsets-pair_verdict": "verdict",
    "subsets-plan_size": "plan",
    "analyses-create_analysis": "create_analysis",
    "analyses-list_analyses": "list_analyses",
    "analyses-get_analysis": "get_analysis",
    "analyses-plot_mdad": "plot",
    "analyses-plot_agreement": "plot",
    "leaderboards-leaderboard": "leaderboard",
    "leaderboards-leaderboard_pairs": "leaderboard_pairs",
    "sessions-create_session": "create_session",
    "sessions-get_session": "get_session",
    "sessions-list_sessions": "list_sessions",
    "sessions-post_session_results": "post_session_results",
    "gates-create_gate": "create_gate",
    "gates-get_gate": "get_gate",
    "gates-list_gates": "list_gates",
    "gates-post_gate_results": "post_gate_results",
    "gates-post_gate_result_files": "post_gate_result_files",
    "gates-abandon_gate": "abandon_gate",
}


def test_every_operation_has_a_client_method() -> None:
    import json
    from pathlib import Path

    spec = json.loads((Path(__file__).resolve().parents[2] / "openapi/openapi.json").read_text())
    operations = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    assert operations == set(CLIENT_METHODS), operations ^ set(CLIENT_METHODS)
    for method in CLIENT_METHODS.values():
        assert callable(getattr(Client, method)), method


def test_model_names_with_slashes_and_odd_characters(service: LiveService) -> None:
    with Client(service.url) as client:
        bench = client.create_benchmark("odd-names", ["a", "b"])
        for name in ("org/model-7b", "org/we?ird #1 100%"):
            client.upload_results(bench.id, name, correct=[1, 0])
            client.delete_model_results(bench.id, name)
        assert client.list_models(bench.id).items == []


def test_projects_audit_and_restore_through_the_client_and_cli() -> None:
    """Two teams on a server with keys on: `push --project`, the key's projects, a delete
    undone with `benchmarks restore`, and `benchslice audit` showing who did what."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from app.services.access.keys import create_key
    from app.services.access.projects import create_project
    from tests.cli.conftest import run_cli

    with thread_server(auth_enabled=True) as (url, db_url):
        engine = create_engine(db_url)
        with Session(engine) as session:
            create_project(session, "team-a")
            create_project(session, "team-b")
            _, writer = create_key(session, "a-ci", {"team-a": "write"})
            _, lead = create_key(session, "a-lead", {"team-a": "admin", "team-b": "read"})
            session.commit()
        engine.dispose()
        env = {"BENCHSLICE_URL": url}
        with Client(url, writer) as client:
            assert [(p.name, p.role) for p in client.list_projects().items] == [("team-a", "write")]
        csv = Path(tempfile.mkdtemp()) / "m.csv"
        csv.write_text("item_id,correct\na,1\nb,0\n")
        pushed = run_cli(
            None,
            "push",
            "--create",
            "--project",
            "team-a",
            "--benchmark",
            "cli-a",
            "--model",
            "org/m",
            str(csv),
            "--json",
            BENCHSLICE_API_KEY=writer,
            **env,
        )
        assert pushed.code == 0, pushed
        with Client(url, writer) as client:
            assert client.get_benchmark("cli-a").project == "team-a"
            client.delete_model_results("cli-a", "org/m")
        wrong = run_cli(
            None,
            "push",
            "--project",
            "team-b",
            "--benchmark",
            "cli-a",
            "--model",
            "org/m",
            str(csv),
            BENCHSLICE_API_KEY=writer,
            **env,
        )
        assert wrong.code == 2 and "belongs to project 'team-a'" in wrong.stderr
        restored = run_cli(
            None, "benchmarks", "restore", "cli-a", "org/m", BENCHSLICE_API_KEY=writer, **env
        )
        assert restored.code == 0 and "restored org/m" in restored.stdout, restored
        trail = run_cli(
            None, "audit", "--project", "team-a", "--json", BENCHSLICE_API_KEY=lead, **env
        )
        assert trail.code == 0, trail
        actions = [e["action"] for e in trail.json()["items"]]
        assert actions == [
            "results.restore",
            "results.delete",
            "results.upload",
            "benchmark.create_version",
        ]
        assert {e["key_name"] for e in trail.json()["items"]} == {"a-ci"}
        denied = run_cli(None, "audit", BENCHSLICE_API_KEY=writer, **env)
        assert denied.code == 2 and "403" in denied.stderr
