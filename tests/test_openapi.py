from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _export_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openapi_export", ROOT / "openapi" / "export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_openapi_matches_the_app() -> None:
    export = _export_module()
    committed = export.SPEC_PATH.read_text() if export.SPEC_PATH.exists() else ""
    current = export.render()
    if committed != current:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(True),
                current.splitlines(True),
                "openapi/openapi.json (committed)",
                "app (current)",
                n=2,
            )
        )
        raise AssertionError(f"openapi/openapi.json is stale: run `make openapi`\n{diff[:4000]}")


def test_operation_ids_are_unique_and_errors_are_problem_json() -> None:
    spec = json.loads(_export_module().render())
    ids = [op["operationId"] for path in spec["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert "jobs-create_job" in ids and "health-readyz" in ids
    create = spec["paths"]["/v1/jobs"]["post"]["responses"]
    assert set(create) >= {"202", "422", "503"}
    assert "application/problem+json" in create["503"]["content"]
    assert "application/problem+json" in create["422"]["content"]
    assert "Problem" in spec["components"]["schemas"]
