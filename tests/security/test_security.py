"""Security: keys hashed at rest and shown once, scopes on every operation of the committed
OpenAPI, body/JSON/upload limits, hostile ids and names stored verbatim, CORS off, no secrets
in logs. In-process app on this session's Postgres (rolled back per test) unless noted."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.services.access.keys import create_key
from app.settings import Settings
from tests.support.procs import REPO_ROOT
from tests.support.tools import missing

SPEC = json.loads((REPO_ROOT / "openapi" / "openapi.json").read_text())
WRITE_METHODS = {"post", "put", "patch", "delete"}
PROBLEM = "application/problem+json"
OPERATIONS = [
    (method, path, op)
    for path, ops in SPEC["paths"].items()
    for method, op in ops.items()
    if method in WRITE_METHODS | {"get", "head"}
]
PROTECTED = [(m, p, op) for m, p, op in OPERATIONS if p.startswith("/v1/")]
# project admins only (issue 25): the audit trail, retiring a benchmark version
ADMIN_ONLY = {
    "/v1/audit",
    "/v1/benchmarks/{benchmark}/retire",
    "/v1/benchmarks/{benchmark}/unretire",
}


def _fill(path: str) -> str:
    values = {
        "benchmark": str(uuid.uuid4()),
        "session_id": str(uuid.uuid4()),
        "analysis_id": str(uuid.uuid4()),
        "job_id": str(uuid.uuid4()),
        "gate_id": str(uuid.uuid4()),
        "subset_id": "0" * 64,
        "model": "org/model",
        "fmt": "svg",
    }
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


@pytest.fixture
def secure_app(engine: Any, settings: Settings) -> Iterator[Any]:
    from app.main import create_app

    application = create_app(
        settings.model_copy(
            update={
                "auth_enabled": True,
                "max_body_bytes": 20_000,
                "max_json_depth": 8,
                "max_upload_lines": 50,
                "max_line_bytes": 400,
            }
        )
    )
    yield application
    application.state.celery.close()
    application.state.engine.dispose()


@pytest.fixture
def api(secure_app: Any, db_session: Session) -> Iterator[TestClient]:
    from app.api.deps import open_session

    secure_app.dependency_overrides[open_session] = lambda: db_session
    with TestClient(secure_app, raise_server_exceptions=False) as client:
        yield client


def _key(session: Session, *scopes: str) -> str:
    _, token = create_key(session, f"sec-{'-'.join(scopes)}", list(scopes))
    session.flush()
    return token


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> Any:
    kwargs: dict[str, Any] = {"headers": headers}
    if method in WRITE_METHODS and method != "delete":
        kwargs["json"] = {}
    return client.request(method.upper(), _fill(path), **kwargs)


# --- keys at rest -------------------------------------------------------------------------------


def test_api_keys_are_stored_hashed_and_never_found_in_the_database(
    committed_sessionmaker: Any, database_url: str, secure_app: Any
) -> None:
    with committed_sessionmaker() as session:
        row, token = create_key(session, "at-rest", ["write"])
        session.commit()
        key_id = row.id
    secret = token.split("_", 2)[2]
    try:
        with TestClient(secure_app, raise_server_exceptions=False) as api:  # real commits
            assert api.get("/v1/benchmarks", headers=_auth(token)).status_code == 200
            wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            assert api.get("/v1/benchmarks", headers=_auth(wrong)).status_code == 401
        with committed_sessionmaker() as session:
            stored = session.execute(
                text("SELECT key_hash, prefix FROM api_keys WHERE id = :id"), {"id": key_id}
            ).one()
        assert stored.key_hash.startswith("$argon2id$"), stored.key_hash
        assert secret not in stored.key_hash and token not in stored.key_hash
        dbname = database_url.rsplit("/", 1)[1]
        if shutil.which("pg_dump") is None:
            missing("pg_dump is not installed")
        dump = subprocess.run(
            ["pg_dump", "-h", "127.0.0.1", "-U", "postgres", "--data-only", dbname],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert stored.prefix in dump  # the dump does hold the key's row …
        assert secret not in dump and token not in dump  # … but never the key
    finally:
        with committed_sessionmaker() as session:
            session.execute(text("DELETE FROM api_keys WHERE id = :id"), {"id": key_id})
            session.commit()


def test_a_key_is_shown_once_by_the_cli_and_never_listed(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "NO_COLOR": "1"}
    created = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", "create", "--name", "shown-once"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    token = created.stdout.strip().splitlines()[0]
    assert token.startswith("bsk_") and "not shown again" in created.stderr
    prefix = token.split("_")[1]
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "app.cli", "keys", "list"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=True,
        )
        assert prefix in listed.stdout
        assert token.split("_", 2)[2] not in listed.stdout + listed.stderr
    finally:
        subprocess.run(
            [sys.executable, "-m", "app.cli", "keys", "revoke", prefix],
            capture_output=True,
            env=env,
            timeout=120,
        )


# --- scopes on every operation ------------------------------------------------------------------


def test_the_committed_spec_declares_bearer_auth_on_every_v1_operation() -> None:
    missing = [f"{m.upper()} {p}" for m, p, op in PROTECTED if not op.get("security")]
    assert not missing, missing
    assert len(PROTECTED) >= 20


@pytest.mark.parametrize(
    ("method", "path"), [(m, p) for m, p, _ in PROTECTED], ids=lambda v: str(v)
)
def test_every_operation_without_a_key_is_401(api: TestClient, method: str, path: str) -> None:
    r = _call(api, method, path, {})
    assert r.status_code == 401, (method, path, r.status_code, r.text)
    assert r.headers["content-type"].startswith(PROBLEM)
    assert r.headers.get("www-authenticate") == "Bearer"


@pytest.mark.parametrize(
    ("method", "path"), [(m, p) for m, p, _ in PROTECTED], ids=lambda v: str(v)
)
def test_a_read_only_key_is_refused_every_write_operation(
    api: TestClient, db_session: Session, method: str, path: str
) -> None:
    read_key = _key(db_session, "read")
    r = _call(api, method, path, _auth(read_key))
    if method in WRITE_METHODS or path in ADMIN_ONLY:
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert r.headers["content-type"].startswith(PROBLEM)
    else:
        assert r.status_code not in (401, 403), (method, path, r.status_code, r.text)
    write_key = _key(db_session, "write")
    r = _call(api, method, path, _auth(write_key))
    if path in ADMIN_ONLY:
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        r = _call(api, method, path, _auth(_key(db_session, "admin")))
    assert r.status_code not in (401, 403), (method, path, r.status_code, r.text)


def test_a_revoked_key_is_refused_at_once(api: TestClient, db_session: Session) -> None:
    from app.services.access.keys import revoke_key

    row, token = create_key(db_session, "revoked", ["admin"])
    assert api.get("/v1/benchmarks", headers=_auth(token)).status_code == 200
    revoke_key(db_session, row.prefix)
    assert api.get("/v1/benchmarks", headers=_auth(token)).status_code == 401


# --- limits -------------------------------------------------------------------------------------


@pytest.fixture
def writer(api: TestClient, db_session: Session) -> TestClient:
    api.headers.update(_auth(_key(db_session, "write")))
    return api


def test_a_declared_body_over_the_limit_is_413(writer: TestClient) -> None:
    items = [{"id": f"item-{i:06d}"} for i in range(2000)]
    r = writer.post("/v1/benchmarks", json={"name": "big", "items": items})
    assert r.status_code == 413 and r.headers["content-type"].startswith(PROBLEM), r.text


def test_a_chunked_json_body_over_the_limit_is_413(writer: TestClient) -> None:
    payload = json.dumps({"name": "big", "items": [{"id": f"i{i:06d}"} for i in range(2000)]})

    def chunks() -> Iterator[bytes]:
        data = payload.encode()
        for start in range(0, len(data), 1000):
            yield data[start : start + 1000]

    r = writer.post(
        "/v1/benchmarks", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413, r.text


def test_deeply_nested_json_is_refused_with_422(writer: TestClient) -> None:
    deep: Any = "x"
    for _ in range(50):
        deep = {"k": deep}
    r = writer.post(
        "/v1/benchmarks", json={"name": "deep", "items": [{"id": "a", "metadata": deep}]}
    )
    assert r.status_code == 422 and r.headers["content-type"].startswith(PROBLEM), r.text
    assert "nested" in r.json()["detail"]
    shallow = {"name": "shallow", "items": [{"id": "a", "metadata": {"k": {"k": 1}}}]}
    assert writer.post("/v1/benchmarks", json=shallow).status_code == 201


def test_upload_line_limits(writer: TestClient) -> None:
    bench = writer.post("/v1/benchmarks", json={"name": "lines", "items": [{"id": "a"}]}).json()
    url = f"/v1/benchmarks/{bench['id']}/results?model=m"
    many = "".join(f"a,{i % 2}\n" for i in range(60)).encode()
    r = writer.post(url, content=many, headers={"Content-Type": "text/csv"})
    assert r.status_code == 413 and "lines" in r.json()["detail"], r.text
    long_line = b"a," + b"1" * 1000 + b"\n"
    r = writer.post(url, content=long_line, headers={"Content-Type": "text/csv"})
    assert r.status_code == 413 and "line of" in r.json()["detail"], r.text
    files = {"file": ("r.csv", many, "text/csv")}
    r = writer.post(url, files=files)
    assert r.status_code == 413, r.text
    ok = writer.post(url, content=b"item_id,correct\na,1\n", headers={"Content-Type": "text/csv"})
    assert ok.status_code == 201, ok.text


# --- hostile ids and names ------------------------------------------------------------------------

HOSTILE = [
    "../../etc/passwd",
    "..%2F..%2Fetc%2Fpasswd",
    "'; DROP TABLE models; --",
    'x" OR "1"="1',
    "a\r\nX-Injected: yes",
    "模型-ü-🙂",
    "tab\there<script>alert(1)</script>",
    "%00%0d%0a",
    "\\\\server\\share",
]


def test_hostile_item_ids_and_model_names_are_stored_and_returned_verbatim(
    writer: TestClient,
) -> None:
    items = [{"id": v, "subtask": v} for v in HOSTILE]  # item ids are stored verbatim
    name = "hostile X-Injected: yes; 模型 \"'; --"
    r = writer.post("/v1/benchmarks", json={"name": name, "items": items})
    assert r.status_code == 201, r.text
    assert r.json()["name"] == name
    bid = r.json()["id"]
    # model names: no control character, no "." or ".." part (refused: test_data_edges.py)
    names = [
        v
        for v in HOSTILE
        if not any(ord(c) < 32 for c in v) and not {".", ".."} & set(v.split("/"))
    ]
    for k, name in enumerate(names):
        results = {v: (k + j) % 2 for j, v in enumerate(HOSTILE)}
        r = writer.post(
            f"/v1/benchmarks/{bid}/results",
            json={"model": {"name": name, "family": name}, "results": results},
        )
        assert r.status_code == 201, (name, r.text)
        assert r.json()["model"]["name"] == name
    listed = writer.get(f"/v1/benchmarks/{bid}/models").json()["items"]
    assert sorted(m["model"]["name"] for m in listed) == sorted(names)
    assert {m["model"]["family"] for m in listed} == set(names)
    detail = writer.get(f"/v1/benchmarks/{bid}").json()
    assert {s["name"] for s in detail["subtasks"]} == set(HOSTILE)

    matrix = writer.get(f"/v1/benchmarks/{bid}/matrix")
    assert matrix.status_code == 200, matrix.text
    disposition = matrix.headers["content-disposition"]
    assert "\r" not in disposition and "\n" not in disposition
    assert "x-injected" not in {k.lower() for k in matrix.headers}

    r = writer.post(
        f"/v1/benchmarks/{bid}/subsets", json={"method": "random", "size": 3, "seed": 1}
    )
    assert r.status_code in (200, 202, 503), r.text  # the id-carrying path is the point here

    # Deleting by a hostile name goes through the path verbatim (percent-encoded).
    victim = next(v for v in names if "%" not in v and "/" not in v)
    r = writer.delete(f"/v1/benchmarks/{bid}/models/{quote(victim, safe='')}")
    assert r.status_code == 204, r.text
    left = [m["model"]["name"] for m in writer.get(f"/v1/benchmarks/{bid}/models").json()["items"]]
    assert victim not in left and len(left) == len(names) - 1
    # The SQL-looking names did nothing to the tables.
    assert writer.get(f"/v1/benchmarks/{bid}/models").status_code == 200

    # Names with control characters are refused, naming the field (last: a refused request
    # rolls back the test's transaction, the key with it).
    r = writer.post(
        f"/v1/benchmarks/{bid}/results",
        json={"model": {"name": "a\r\nb", "family": "x\ty"}, "results": {HOSTILE[0]: 1}},
    )
    assert r.status_code == 422, r.text
    assert {"name", "family"} <= {e["loc"][-1] for e in r.json()["errors"]}, r.text


def test_hostile_names_in_query_parameters_are_plain_values(writer: TestClient) -> None:
    bench = writer.post(
        "/v1/benchmarks", json={"name": "q", "items": [{"id": "a"}, {"id": "b"}]}
    ).json()
    for name in HOSTILE:
        r = writer.get(
            f"/v1/benchmarks/{bench['id']}/verdict", params={"model_a": name, "model_b": "other"}
        )
        assert r.status_code == 404, (name, r.status_code, r.text)
        assert r.headers["content-type"].startswith(PROBLEM)


# --- CORS and logs ------------------------------------------------------------------------------


def test_cors_is_off_by_default(writer: TestClient) -> None:
    origin = {"Origin": "https://evil.example"}
    r = writer.get("/v1/benchmarks", headers=origin)
    assert r.status_code == 200
    assert "access-control-allow-origin" not in {k.lower() for k in r.headers}
    pre = writer.options(
        "/v1/benchmarks",
        headers={**origin, "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in {k.lower() for k in pre.headers}


def test_no_secrets_in_logs(
    api: TestClient, db_session: Session, caplog: pytest.LogCaptureFixture, database_url: str
) -> None:
    token = _key(db_session, "write")
    secret = token.split("_", 2)[2]
    with caplog.at_level(logging.DEBUG):
        api.get("/v1/benchmarks", headers=_auth(token))
        api.post(
            "/v1/benchmarks", json={"name": "logs", "items": [{"id": "a"}]}, headers=_auth(token)
        )
        api.get("/v1/benchmarks", headers=_auth(token + "x"))  # a failed attempt logs too
        api.get(f"/v1/jobs/{uuid.uuid4()}", headers=_auth(token))
    text_ = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert secret not in text_ and token not in text_
    password_like = re.compile(r"postgres(?:ql)?(?:\+\w+)?://[^:/@\s]+:[^@\s]+@")
    assert not password_like.search(text_), "a DB URL with a password was logged"


def test_no_secrets_in_the_logs_of_a_real_service(database_url: str) -> None:
    """uvicorn at INFO with a password in DATABASE_URL and keys in every request: neither the
    password nor any key (good or bad) appears in what the service writes."""
    from tests.support.procs import api_server, service_env
    from tests.support.stack import create_key as store_key

    password = "s3cr3t-" + uuid.uuid4().hex
    with_password = database_url.replace("postgres@", f"postgres:{password}@", 1)
    assert password in with_password
    token = store_key(database_url, ["write"], name="log-check")
    bad = "bsk_" + token.split("_")[1] + "_" + "x" * 43
    env = service_env(
        DATABASE_URL=with_password,
        BROKER_URL="redis://127.0.0.1:1/0",
        AUTH_ENABLED="true",
        LOG_LEVEL="DEBUG",
    )
    import httpx

    with api_server(env) as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            assert c.get("/v1/benchmarks", headers=_auth(token)).status_code == 200
            assert c.get("/v1/benchmarks", headers=_auth(bad)).status_code == 401
            assert c.get("/v1/benchmarks?limit=0", headers=_auth(token)).status_code == 422
            r = c.post("/v1/jobs", json={"kind": "ping"}, headers=_auth(token))
            assert r.status_code == 503  # broker unreachable: logged as a warning
            assert c.get("/readyz").status_code == 503
        log = server.log
    assert "GET /v1/benchmarks" in log  # the access log was captured
    for secret in (password, token, token.split("_", 2)[2], bad.split("_", 2)[2]):
        assert secret not in log, f"secret leaked into the log: {secret[:6]}…"
