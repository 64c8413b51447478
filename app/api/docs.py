"""The interactive API docs (Swagger UI, ReDoc) with their assets served from a package, and
``/metrics``.

The browser loads nothing from a CDN: the scripts and styles are the ``fastapi_offline``
package's files, served under ``/docs-assets``. The pages can not be framed
(``frame-ancestors 'none'`` and ``X-Frame-Options: DENY``, set with ``nosniff`` by
:class:`app.api.middleware.ResponseHeaders`).

``/metrics``: Prometheus text format (``prometheus_client``) of this process: cache hits,
misses, evictions and bytes per cache, expensive computations run and refused. Not in the
OpenAPI schema; with keys enabled it needs an instance-admin key (issue 39: the counters are the
whole instance's, every tenant's refusals and cache use, not one project's; a read key is 403).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import require_scope
from app.errors import Forbidden
from app.services.access.keys import Principal

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
DOCS_PATHS = frozenset({DOCS_URL, REDOC_URL})
# Swagger UI's page starts itself with an inline script and draws icons from data: URIs
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'; form-action 'self'"
)


def assets_dir() -> str:
    return str(files("fastapi_offline") / "static")


def is_docs_path(path: str) -> bool:
    return path in DOCS_PATHS or path.startswith(ASSETS_URL + "/")


def install_docs(app: FastAPI) -> None:
    """``/docs``, ``/redoc`` and ``/metrics`` (none in the OpenAPI schema)."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    @app.get("/metrics", include_in_schema=False)
    def metrics(
        principal: Annotated[Principal, Depends(require_scope("read"))],
    ) -> Response:
        if not principal.instance_admin:
            raise Forbidden(
                "/metrics needs an instance-admin key (benchslice keys create --instance-admin)"
            )
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
