"""Read-only browser view under /ui: server-rendered pages over the services (issue 15)."""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from app.errors import DomainError
from app.web import page_plots
from app.web.routes import TEMPLATES, error_page, router
from app.web.security import HEADERS, UI_PREFIX, SecurityHeaders

STATIC_DIR = Path(__file__).parent / "static"


def install_web(app: FastAPI) -> None:
    """Mount the pages, their static files and the security headers on ``app``."""
    app.state.web_secret = None  # signs CSRF tokens; shared by every process (security._secret)
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
    """Errors under /ui that no page handled — no such page (``/ui/benchmarks/``), a POST to a
    page, the database down (503), a bug (500) — are HTML error pages like the pages' own 4xx,
    not the API's problem+json. The API's handler still runs first (it logs, sets the status,
    ``Retry-After``…); its problem body gives the page's title and detail."""
    for exc_class, api_handler in list(app.exception_handlers.items()):
        app.exception_handlers[exc_class] = _html_under_ui(api_handler)


def _html_under_ui(api_handler):
    async def handler(request: Request, exc: Exception) -> Response:
        response = await api_handler(request, exc)
        path = request.url.path
        if not (path == UI_PREFIX or path.startswith(UI_PREFIX + "/")):
            return response
        try:
            body = json.loads(bytes(response.body))
        except ValueError:
            body = {}
        status = response.status_code
        error = DomainError(str(body.get("detail") or HTTPStatus(status).phrase))
        error.status_code = status
        error.title = str(body.get("title") or HTTPStatus(status).phrase)
        page = error_page(request, error)
        for name in ("retry-after", "allow", "www-authenticate"):
            if name in response.headers:
                page.headers[name] = response.headers[name]
        # a 500 is answered by the outermost middleware, outside SecurityHeaders: set them here
        for key, value in HEADERS:
            page.headers[key.decode()] = value.decode()
        page.headers["cache-control"] = "no-store"
        return page

    return handler
