"""Read-only pages under /ui (Jinja2 templates; data from app/services, no SQL or numpy here).

Query parameters arrive as strings and are checked by the services, so a bad value is a page with
a clear message and its 4xx status, never a 500 or a JSON error. Not in the OpenAPI schema.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from app import formatting
from app.api.deps import SessionDep
from app.errors import DomainError, InvalidInput, NotFound, Unauthorized
from app.services.access import web_sessions
from app.services.access.access import visibility
from app.services.catalog.ownership import check_readable, readable_version
from app.services.limits.expensive import EXPENSIVE
from app.services.limits.ratelimit import RATES
from app.services.platform.caching import MB, BoundedCache
from app.services.reliability import analyses as analyses_service
from app.services.selection import coverage_runs
from app.web import page_views, pages, security
from app.web.svg import inline_svg

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
TEMPLATES.env.globals.update(pts=pages.pts, svg=inline_svg, fmt=formatting)
TEMPLATES.env.filters["pct"] = formatting.pct

router = APIRouter(prefix=security.UI_PREFIX, include_in_schema=False)

# The benchmark page's expensive part (histogram, leaderboard summary, models table, item health)
# rendered to HTML, per (version, results stamp, ref, normalised query): a repeated read costs a
# stamp query, the small listings and the page shell. Holds nothing user- or request-specific:
# the CSRF token and login state are in the shell (base.html), rendered per request.
MAIN_CACHE_BYTES = 32 * MB
_BENCHMARK_MAIN: BoundedCache[tuple, Markup] = BoundedCache("page_benchmark_main", MAIN_CACHE_BYTES)


def render(
    request: Request, template: str, context: dict[str, Any], status_code: int = 200
) -> Response:
    settings = request.app.state.settings
    token = security.csrf_token(request) if settings.auth_enabled else ""
    response = TEMPLATES.TemplateResponse(
        request,
        template,
        {"auth_enabled": settings.auth_enabled, "csrf": token, **context},
        status_code=status_code,
    )
    if token:
        security.set_csrf_cookie(request, response, token)
    return response


def error_page(request: Request, exc: DomainError) -> Response:
    if isinstance(exc, Unauthorized):
        return login_form(request, status_code=401, message=exc.detail)
    return render(
        request,
        "error.html",
        {"title": exc.title, "detail": exc.detail, "status": exc.status_code},
        status_code=exc.status_code,
    )


def _uuid(raw: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"no {what} {raw!r} (not an id)", field="id") from None


def _int(raw: str | None, name: str) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name} {raw!r} is not a whole number", field=name) from None


@router.get("/", name="ui_index")
def index(request: Request, session: SessionDep) -> Response:
    try:
        principal = security.page_principal(request, session)
        rows = pages.benchmarks_overview(session, visibility(principal))
    except DomainError as exc:
        return error_page(request, exc)
    return render(request, "index.html", {"title": "Benchmarks", "rows": rows})


@router.get("/benchmarks/{benchmark}", name="ui_benchmark")
def benchmark(
    request: Request,
    benchmark: str,
    session: SessionDep,
    q: str | None = None,
    sort: str | None = None,
    all: str | None = None,
) -> Response:
    try:
        principal = security.page_principal(request, session)
        version = readable_version(session, principal, benchmark)
        query = pages.BenchmarkQuery.of(q, sort, show_all=all == "1")
        stamp = pages.benchmark_stamp(session, version)
        key = (version.id, stamp, benchmark, query)
        main = _BENCHMARK_MAIN.get(key)
        if main is None:
            main = EXPENSIVE.run(  # a first view: a bounded pool, lower CPU priority
                "a benchmark page", lambda: _render_main(session, version, benchmark, query)
            )
            _BENCHMARK_MAIN.discard_where(lambda k: k[0] == version.id and k[1] != stamp)
            _BENCHMARK_MAIN.put(key, main)
        idle = request.app.state.settings.session_idle_hours
        listings = pages.benchmark_listings(session, version, idle_hours=idle)
        coverage = coverage_runs.latest(session, version.id)
    except DomainError as exc:
        return error_page(request, exc)
    context = {"title": version.benchmark.name, "main": main, "p": listings, "v": version}
    context["coverage"] = coverage.result if coverage is not None else None
    return render(request, "benchmark.html", context)


def _render_main(session: Any, version: Any, benchmark: str, query: Any) -> Markup:
    data = pages.benchmark_main(session, version, benchmark, query)
    return Markup(TEMPLATES.get_template("benchmark_main.html").render(p=data))


def clear_caches() -> None:
    _BENCHMARK_MAIN.clear()


@router.get("/benchmarks/{benchmark}/pair", name="ui_pair")
def pair(
    request: Request,
    benchmark: str,
    session: SessionDep,
    model_a: str | None = None,
    model_b: str | None = None,
    size: str | None = None,
    method: str | None = None,
) -> Response:
    try:
        principal = security.page_principal(request, session)
        version = readable_version(session, principal, benchmark)
        view = page_views.pair_view(
            session, version, model_a=model_a, model_b=model_b, size=size, method=method
        )
    except DomainError as exc:
        return error_page(request, exc)
    context = {"title": f"{version.benchmark.name}: pair verdict", "v": view, "ref": benchmark}
    return render(request, "pair.html", context, status_code=view.status)


@router.get("/analyses/{analysis_id}", name="ui_analysis")
def analysis(
    request: Request, analysis_id: str, session: SessionDep, n: str | None = None
) -> Response:
    try:
        principal = security.page_principal(request, session)
        analysis_uuid = _uuid(analysis_id, "analysis")
        check_readable(session, principal, "analysis", analysis_uuid)
        row = analyses_service.get_analysis(session, analysis_uuid)
        public = analyses_service.to_public(row)
        size = _int(n, "n")
        plots = None
        sentences: list[str] = []
        exact: dict[int, float | None] = {}
        if public.result is not None:
            plots = pages.analysis_plots(session, row.id, size)
            sentences = pages.recommendation_sentences(public.result.recommendation)
            exact = pages.exact_random_mdads(session, public)
    except DomainError as exc:
        return error_page(request, exc)
    context = {
        "title": f"Analysis of {public.benchmark_name}",
        "a": public,
        "plots": plots,
        "sentences": sentences,
        "exact": exact,
        "running": public.status.value in ("queued", "running"),
    }
    return render(request, "analysis.html", context)


@router.get("/subsets/{subset_id}", name="ui_subset")
def subset(request: Request, subset_id: str, session: SessionDep) -> Response:
    try:
        principal = security.page_principal(request, session)
        check_readable(session, principal, "subset", subset_id)
        view = page_views.subset_view(session, subset_id)
    except DomainError as exc:
        return error_page(request, exc)
    return render(request, "subset.html", {"title": f"Subset {subset_id[:12]}…", "s": view})


@router.get("/subsets/{subset_id}/download/{fmt}", name="ui_subset_download")
def subset_download(request: Request, subset_id: str, fmt: str, session: SessionDep) -> Response:
    try:
        principal = security.page_principal(request, session)
        check_readable(session, principal, "subset", subset_id)
        data, media_type = page_views.subset_export(session, subset_id, fmt)
    except DomainError as exc:
        return error_page(request, exc)
    ext = {"csv": "csv"}.get(fmt, "json")
    name = f"subset-{subset_id[:12]}-{fmt}.{ext}"
    return Response(
        data,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get("/sessions/{session_id}", name="ui_session")
def evaluation_session(request: Request, session_id: str, session: SessionDep) -> Response:
    try:
        principal = security.page_principal(request, session)
        session_uuid = _uuid(session_id, "evaluation session")
        check_readable(session, principal, "session", session_uuid)
        view = page_views.session_view(
            session, session_uuid, idle_hours=request.app.state.settings.session_idle_hours
        )
    except DomainError as exc:
        return error_page(request, exc)
    title = f"Session: {view.session.model}"
    return render(request, "session.html", {"title": title, "s": view})


@router.get("/gates/{gate_id}", name="ui_gate")
def release_gate(request: Request, gate_id: str, session: SessionDep) -> Response:
    try:
        principal = security.page_principal(request, session)
        gate_uuid = _uuid(gate_id, "gate")
        check_readable(session, principal, "gate", gate_uuid)
        view = page_views.gate_view(
            session, gate_uuid, idle_hours=request.app.state.settings.session_idle_hours
        )
    except DomainError as exc:
        return error_page(request, exc)
    return render(request, "gate.html", {"title": f"Gate: {view.gate.model}", "v": view})


# --- login / logout (only meaningful with auth enabled) ----------------------------------------


def login_form(
    request: Request, *, status_code: int = 200, message: str | None = None, next_url: str = ""
) -> Response:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = security.safe_next(next_url or here)
    context = {"title": "Sign in", "message": message, "next": target}
    return render(request, "login.html", context, status_code=status_code)


@router.get("/login", name="ui_login")
def login(request: Request, next: str | None = None) -> Response:
    if not request.app.state.settings.auth_enabled:
        return RedirectResponse(security.safe_next(next), status_code=303)
    return login_form(request, next_url=next or "")


@router.post("/login", name="ui_login_submit")
def login_submit(
    request: Request,
    session: SessionDep,
    key: Annotated[str, Form()] = "",
    csrf: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "",
) -> Response:
    if not request.app.state.settings.auth_enabled:
        return RedirectResponse(security.safe_next(next), status_code=303)
    if not security.csrf_ok(request, csrf):
        return login_form(
            request,
            status_code=403,
            message="the form expired or did not come from this site; try again",
            next_url=next,
        )
    try:
        session_id = web_sessions.open_session(
            session,
            key.strip() or None,
            timedelta(hours=request.app.state.settings.web_session_hours),
            before_hashing=lambda prefix: RATES.check_auth_attempt(prefix, _address(request)),
            after_failure=lambda prefix: RATES.auth_failed(prefix, _address(request)),
        )
    except DomainError as exc:
        return login_form(request, status_code=exc.status_code, message=exc.detail, next_url=next)
    response = RedirectResponse(security.safe_next(next), status_code=303)
    security.set_session_cookie(request, response, session_id)
    return response


@router.post("/logout", name="ui_logout")
def logout(request: Request, session: SessionDep, csrf: Annotated[str, Form()] = "") -> Response:
    if not security.csrf_ok(request, csrf):
        return error_page(request, InvalidInput("the form expired; reload the page and retry"))
    web_sessions.close_session(session, request.cookies.get(security.SESSION_COOKIE))
    response = RedirectResponse(f"{security.UI_PREFIX}/login", status_code=303)
    security.clear_session_cookie(request, response)
    return response


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"
