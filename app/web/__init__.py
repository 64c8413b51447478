"""Read-only browser view under /ui: server-rendered pages over the services (issue 15)."""

from __future__ import annotations

import secrets
from http import HTTPStatus
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import DomainError
from app.services import page_plots
from app.web.routes import TEMPLATES, error_page, router
from app.web.security import UI_PREFIX, SecurityHeaders

STATIC_DIR = Path(__file__).parent / "static"


def install_web(app: FastAPI) -> None:
    """Mount the pages, their static files and the security headers on ``app``."""
    app.state.web_secret = secrets.token_bytes(32)  # signs CSRF tokens (per process)
    app.include_router(router)
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="ui_static")
    app.add_middleware(SecurityHeaders)
    _html_http_errors(app)


def warm_up() -> None:
    """Do at startup what a process otherwise does on its first page: compile every template
    and draw one figure (matplotlib loads its fonts and builds its glyph caches then)."""
    for name in TEMPLATES.env.list_templates(extensions=["html"]):
        TEMPLATES.get_template(name)
    page_plots.warm_up()


def _html_http_errors(app: FastAPI) -> None:
    """Routing errors under /ui (no such page: ``/ui/benchmarks/``, a POST to a page) are HTML
    error pages like the pages' own 4xx, not the API's problem+json."""
    api_handler = app.exception_handlers[StarletteHTTPException]

    async def handler(request: Request, exc: Exception) -> Response:
        path = request.url.path
        if not isinstance(exc, StarletteHTTPException) or not (
            path == UI_PREFIX or path.startswith(UI_PREFIX + "/")
        ):
            return await api_handler(request, exc)
        error = DomainError(str(exc.detail))
        error.status_code = exc.status_code
        error.title = HTTPStatus(exc.status_code).phrase
        response = error_page(request, error)
        response.headers.update(exc.headers or {})
        return response

    app.exception_handlers[StarletteHTTPException] = handler
