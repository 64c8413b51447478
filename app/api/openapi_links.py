"""OpenAPI links: how one operation's response feeds the next (create a session → post its
batch → read it; create a subset → score on it; a 202 → poll its job).

Links document the workflows for clients and let schemathesis' stateful phase walk them with
real ids. They are added to the generated document after the routes (the routes stay free of
schema plumbing); a link whose operation or parameter no longer exists is left out, and
:func:`link_problems` (asserted empty by tests/test_openapi_links.py) says which.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

SESSION_BATCH = 10  # SessionCreate.batch_size's default


def _link(operation_id: str, description: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation_id, "description": description, "parameters": parameters}


def _batch(size: int) -> dict[str, Any]:
    """A complete batch of results for the open batch of a session (first ``size`` items)."""
    results = {f"$response.body#/next_items/{i}/item_id": i % 2 for i in range(size)}
    return {"model": "$response.body#/model", "results": results}


def _session_next(description: str) -> dict[str, dict[str, Any]]:
    session_id = "$response.body#/id"
    return {
        "GetSession": _link("sessions-get_session", description, session_id=session_id),
        "PostOneItemBatch": {
            **_link(
                "sessions-post_session_results",
                "Post the open batch's results when it holds one item (batch_size=1)",
                session_id=session_id,
            ),
            "requestBody": _batch(1),
        },
        "PostDefaultBatch": {
            **_link(
                "sessions-post_session_results",
                f"Post the open batch's results when it holds {SESSION_BATCH} items (the default "
                "batch_size)",
                session_id=session_id,
            ),
            "requestBody": _batch(SESSION_BATCH),
        },
    }


def _job(prefix: str = "") -> dict[str, dict[str, Any]]:
    job_id = f"$response.body#/{prefix}id"
    return {
        "GetJob": _link("jobs-get_job", "Poll the job", job_id=job_id),
        "CancelJob": _link("jobs-cancel_job", "Cancel the job", job_id=job_id),
    }


def _benchmark(expression: str) -> dict[str, dict[str, Any]]:
    """What can be done with a benchmark version once it exists."""
    targets = {
        "GetBenchmark": "benchmarks-get_benchmark",
        "ListItems": "benchmarks-list_items",
        "UploadResults": "results-upload_results",
        "ListModels": "results-list_models",
        "GetMatrix": "results-get_matrix",
        "CreateSubset": "subsets-create_subset",
        "PlanSize": "subsets-plan_size",
        "PairVerdict": "subsets-pair_verdict",
        "CreateAnalysis": "analyses-create_analysis",
        "ListAnalyses": "analyses-list_analyses",
        "CreateSession": "sessions-create_session",
        "Leaderboard": "leaderboards-leaderboard",
        "LeaderboardPairs": "leaderboards-leaderboard_pairs",
    }
    return {
        name: _link(op, "The same benchmark version", benchmark=expression)
        for name, op in targets.items()
    }


def _subset() -> dict[str, dict[str, Any]]:
    subset_id = "$response.body#/id"
    return {
        "GetSubset": _link("subsets-get_subset", "The subset", subset_id=subset_id),
        "ScoreOnSubset": _link(
            "subsets-score_on_subset", "Score a model on it", subset_id=subset_id
        ),
        "SubsetVerdict": _link(
            "subsets-subset_verdict", "Compare two models on it", subset_id=subset_id
        ),
    }


def _analysis() -> dict[str, dict[str, Any]]:
    analysis_id = "$response.body#/id"
    return {
        "GetAnalysis": _link("analyses-get_analysis", "The analysis", analysis_id=analysis_id),
        "PlotMdad": _link(
            "analyses-plot_mdad", "Its MDAD plot (once succeeded)", analysis_id=analysis_id
        ),
        "PlotAgreement": _link(
            "analyses-plot_agreement", "Its agreement plot", analysis_id=analysis_id
        ),
        "GetJob": _link("jobs-get_job", "Poll its job", job_id="$response.body#/job_id"),
    }


def links() -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """``{(operationId, status): {link name: Link object}}``."""
    version = "$response.body#/version_id"
    uploaded = {
        "ListModels": _link(
            "results-list_models", "The benchmark's models", benchmark="$request.path.benchmark"
        ),
        "DeleteModelResults": _link(
            "results-delete_model_results",
            "Delete the results just written",
            benchmark="$request.path.benchmark",
            model="$response.body#/model/name",
        ),
        "Leaderboard": _link(
            "leaderboards-leaderboard", "Rank with them", benchmark="$request.path.benchmark"
        ),
    }
    session_created = _session_next("The session")
    return {
        ("benchmarks-create_benchmark", "201"): _benchmark(version),
        ("benchmarks-create_benchmark", "200"): _benchmark(version),
        ("benchmarks-create_benchmark_from_samples", "201"): _benchmark(version),
        ("benchmarks-create_benchmark_from_samples", "200"): _benchmark(version),
        ("results-upload_results", "201"): uploaded,
        ("results-upload_results", "200"): uploaded,
        ("subsets-create_subset", "200"): _subset(),
        ("subsets-create_subset", "202"): _job(),
        ("analyses-create_analysis", "202"): _analysis(),
        ("jobs-create_job", "202"): _job(),
        ("sessions-create_session", "201"): session_created,
        ("sessions-create_session", "202"): _job(),
        ("sessions-post_session_results", "200"): _session_next("The session, updated"),
        ("subsets-score_on_subset", "201"): {
            "GetSubset": _link(
                "subsets-get_subset", "The subset", subset_id="$response.body#/subset_id"
            )
        },
    }


def _operations(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        op["operationId"]: op for path in spec.get("paths", {}).values() for op in path.values()
    }


def link_problems(spec: dict[str, Any]) -> list[str]:
    """Why some of :func:`links` cannot go into ``spec``: a missing source operation or status,
    target operation, or target parameter (empty when every link resolves; a test asserts it)."""
    operations = _operations(spec)
    problems = []
    for (source, status), named in links().items():
        if status not in operations.get(source, {}).get("responses", {}):
            problems.append(f"no operation {source!r} with a {status} response")
            continue
        for name, link in named.items():
            target = operations.get(link["operationId"])
            if target is None:
                problems.append(f"link {name!r} of {source}: no operation {link['operationId']!r}")
                continue
            missing = set(link["parameters"]) - {p["name"] for p in target.get("parameters", [])}
            if missing:
                problems.append(
                    f"link {name!r} of {source}: {link['operationId']} has no {missing}"
                )
    return problems


def add_links(spec: dict[str, Any]) -> dict[str, Any]:
    """Add :func:`links` to ``spec`` in place (idempotent). A link that does not resolve (an
    operation renamed under it) is left out rather than failing the document: see
    :func:`link_problems`."""
    operations = _operations(spec)
    for (source, status), named in links().items():
        response = operations.get(source, {}).get("responses", {}).get(status)
        if response is None:
            continue
        ok = {}
        for name, link in named.items():
            target = operations.get(link["operationId"])
            params = {p["name"] for p in (target or {}).get("parameters", [])}
            if target is not None and set(link["parameters"]) <= params:
                ok[name] = link
        if ok:
            response["links"] = ok
    return spec


def install_openapi_links(app: FastAPI) -> None:
    """Wrap ``app.openapi`` so the document carries the links (after the problem+json pass)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        return add_links(build())

    app.openapi = openapi  # type: ignore[method-assign]
