"""OpenAPI ``responses`` entries shared by the route modules (problem+json bodies)."""

from __future__ import annotations

from app.api.errors import problem

AUTH = {401: problem("Missing or invalid API key"), 403: problem("The API key lacks the scope")}
UNSUPPORTED = {
    413: problem("Body over the configured size limit"),
    415: problem("Unsupported content type"),
}
