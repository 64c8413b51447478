"""Pages follow project roles (issue 25): a key of another team, logged in through the form,
does not see a private project's benchmark on the index, and its page is a 404 like a missing
one; a public-read project's page opens."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.services.access.keys import create_key
from app.services.access.projects import create_project, set_public_read
from app.services.catalog.benchmarks import create_version


def _login(client: TestClient, key: str) -> None:
    page = client.get("/ui/login").text
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    r = client.post("/ui/login", data={"key": key, "csrf": token.group(1), "next": "/ui/"})
    assert r.status_code == 303, r.text


def test_a_private_projects_pages_are_hidden_from_other_teams(
    auth_client: TestClient, db_session: Session
) -> None:
    team_a = create_project(db_session, "ui-team-a")
    create_project(db_session, "ui-team-b")
    create_version(db_session, "ui-a-bench", ["q1", "q2"], [None, None], project=team_a)
    _, key_b = create_key(db_session, "ui-b", {"ui-team-b": "read"})
    db_session.commit()
    _login(auth_client, key_b)

    index = auth_client.get("/ui/")
    assert index.status_code == 200 and "ui-a-bench" not in index.text
    hidden = auth_client.get("/ui/benchmarks/ui-a-bench")
    missing = auth_client.get("/ui/benchmarks/ui-no-such-bench")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text.replace("ui-a-bench", "X") == missing.text.replace("ui-no-such-bench", "X")

    set_public_read(db_session, team_a, True)
    db_session.commit()
    assert auth_client.get("/ui/benchmarks/ui-a-bench").status_code == 200
    assert "ui-a-bench" in auth_client.get("/ui/").text
