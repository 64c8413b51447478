"""docker-compose.yml is validated, not run (no Docker engine here).

1. check-jsonschema against the Compose specification schema it vendors (works offline);
2. Debian's ``docker-compose config`` when that binary is installed (.ci/run installs it);
3. the wiring the service relies on, checked on the parsed file.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.tools import missing

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_file_matches_the_compose_specification() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(COMPOSE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        missing("docker-compose (Debian package) not installed; .ci/run installs it")
    result = subprocess.run(
        [binary, "--project-directory", str(ROOT), "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_services_and_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"db", "redis", "migrate", "api", "worker", "nginx"}
    assert services["db"]["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(services["db"]["healthcheck"]["test"])
    assert services["redis"]["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]


def test_app_services_share_one_image_and_wait_for_their_dependencies(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    app_services = ("migrate", "api", "worker")
    assert {services[name]["image"] for name in app_services} == {"benchslice:latest"}
    assert {services[name]["build"]["dockerfile"] for name in app_services} == {"Dockerfile"}
    assert services["migrate"]["command"] == ["benchslice", "migrate"]
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    for name in ("api", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["redis"]["condition"] == "service_healthy"
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["BROKER_URL"].startswith("redis://")
    assert services["worker"]["command"] == ["benchslice", "worker"]
    assert services["api"]["command"] == ["benchslice", "serve"]


def test_dockerfile_builds_the_one_image_with_the_cli() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11" in dockerfile
    for needed in ("COPY alembic.ini", "COPY migrations", "pip install ."):
        assert needed in dockerfile
    assert '"benchslice"' in dockerfile


def test_only_nginx_is_published_and_it_runs_the_documented_config(
    compose: dict[str, Any],
) -> None:
    """Issue 39: uvicorn is not published; nginx (deploy/nginx.conf, tested against Debian's
    nginx in tests/limits/test_nginx.py) buffers requests in front of it."""
    services = compose["services"]
    published = {name for name, svc in services.items() if svc.get("ports")}
    assert published == {"nginx"}
    nginx = services["nginx"]
    assert "./deploy/nginx.conf:/etc/nginx/benchslice.conf:ro" in nginx["volumes"]
    assert "/etc/nginx/benchslice.conf" in nginx["command"]
    assert nginx["depends_on"]["api"]["condition"] == "service_healthy"
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server api:8000;" in conf and "proxy_request_buffering on;" in conf
    assert services["api"]["environment"]["FORWARDED_ALLOW_IPS"] == "*"
