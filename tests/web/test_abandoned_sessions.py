"""Abandoned sessions on the browser view (issue 23): an open session idle past
``SESSION_IDLE_HOURS`` (default 24) is listed apart on its benchmark's page and says so on its
own page; a session active within the limit stays in the ordinary list."""

from __future__ import annotations

import html
import re
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import EvaluationSession
from tests.api._subset_data import seed_gpqa


def _section(page: str, section_id: str) -> str:
    m = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    return "" if m is None else html.unescape(m.group(1))


def test_abandoned_sessions_are_shown_apart(client: TestClient, db_session: Session) -> None:
    seeded = seed_gpqa(db_session, n_models=4)
    db_session.commit()
    ids = {}
    for model in ("ci/active", "ci/idle"):
        r = client.post(
            f"/v1/benchmarks/{seeded.version_id}/sessions",
            json={"model": model, "baseline": seeded.names[0], "seed": 1},
        )
        assert r.status_code == 201, r.text
        ids[model] = r.json()["id"]
    db_session.execute(
        update(EvaluationSession)
        .where(EvaluationSession.id == ids["ci/idle"])
        .values(updated_at=utcnow() - timedelta(hours=25))
        .execution_options(synchronize_session=False)
    )
    db_session.commit()
    db_session.expire_all()

    r = client.get(f"/ui/benchmarks/{seeded.version_id}")
    assert r.status_code == 200, r.text[:2000]
    listed, apart = _section(r.text, "sessions"), _section(r.text, "abandoned-sessions")
    assert f"/ui/sessions/{ids['ci/active']}" in listed and "ci/idle" not in listed
    assert f"/ui/sessions/{ids['ci/idle']}" in apart and "ci/active" not in apart
    assert "SESSION_IDLE_HOURS" in apart

    idle = client.get(f"/ui/sessions/{ids['ci/idle']}")
    assert idle.status_code == 200 and 'id="abandoned"' in idle.text
    assert "<strong>abandoned</strong>" in idle.text
    active = client.get(f"/ui/sessions/{ids['ci/active']}")
    assert active.status_code == 200 and 'id="abandoned"' not in active.text
    assert "<strong>open</strong>" in active.text
