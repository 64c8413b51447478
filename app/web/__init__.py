"""Read-only browser view under /ui: server-rendered pages over the services (issue 15)."""

from __future__ import annotations

import secrets
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.web.routes import router
from app.web.security import UI_PREFIX, SecurityHeaders

STATIC_DIR = Path(__file__).parent / "static"


def install_web(app: FastAPI) -> None:
    """Mount the pages, their static files and the security headers on ``app``."""
    app.state.web_secret = secrets.token_bytes(32)  # signs CSRF tokens (per process)
    app.include_router(router)
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="ui_static")
    app.add_middleware(SecurityHeaders)
