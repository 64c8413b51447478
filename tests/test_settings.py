from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:///var/x.sqlite3", "sqlite:///var/x.sqlite3"),
    ],
)
def test_database_url_uses_psycopg3(given: str, expected: str) -> None:
    assert Settings(database_url=given).database_url == expected


def test_embedded_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "DATABASE_URL",
        "BROKER_URL",
        "CELERY_QUEUE",
        "CELERY_KEY_PREFIX",
        "JOB_SOFT_TIME_LIMIT",
        "JOB_HARD_TIME_LIMIT",
        "ENVIRONMENT",
    ):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite:///var/benchslice.sqlite3" and settings.is_sqlite
    assert settings.broker_url.startswith("sqla+sqlite:///") and not settings.broker_is_redis
    assert (settings.host, settings.port, settings.auth_enabled) == ("127.0.0.1", 8000, False)
    assert settings.celery_queue == "benchslice"


def test_empty_env_vars_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "")
    monkeypatch.setenv("PORT", "")
    settings = Settings(_env_file=None)
    assert settings.database_url == "sqlite:///var/benchslice.sqlite3"
    assert settings.port == 8000


def test_env_vars_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_URL", "redis://r:6379/3")
    monkeypatch.setenv("PORT", "9001")
    monkeypatch.setenv("JOB_SOFT_TIME_LIMIT", "10")
    monkeypatch.setenv("JOB_HARD_TIME_LIMIT", "20")
    settings = Settings(_env_file=None)
    assert settings.broker_is_redis and settings.port == 9001
    assert settings.visibility_timeout > settings.job_hard_time_limit


def test_hard_limit_must_exceed_soft_limit() -> None:
    with pytest.raises(ValidationError, match="JOB_HARD_TIME_LIMIT"):
        Settings(job_soft_time_limit=100, job_hard_time_limit=100)


def test_celery_is_configured_from_settings() -> None:
    from worker.celery_app import make_celery

    settings = Settings(
        broker_url="redis://127.0.0.1:6379/0",
        celery_queue="q1",
        celery_key_prefix="p:",
        job_soft_time_limit=10,
        job_hard_time_limit=20,
    )
    conf = make_celery(settings).conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_acks_late is True and conf.worker_prefetch_multiplier == 1
    assert (conf.task_soft_time_limit, conf.task_time_limit) == (10, 20)
    assert conf.broker_transport_options["visibility_timeout"] > 20
    assert conf.broker_transport_options["global_keyprefix"] == "p:"
    assert conf.task_default_queue == "q1"
