"""Issue 38: no interval in the API lacks its estimand. Walks every 2xx JSON response schema of
the OpenAPI document (``$ref``s resolved, through arrays, unions and nested objects): an object
with an interval (``lower``/``upper``, ``ci_low``/``ci_high`` or ``ci``) must carry an
``estimand`` property itself or on an object that contains it."""

from __future__ import annotations

import json
from collections.abc import Iterator

from tests.test_openapi import _export_module

INTERVAL_KEYS = ({"lower", "upper"}, {"ci_low", "ci_high"}, {"ci"})


def _resolve(spec: dict, node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = spec["components"]["schemas"][name]
    return node


def _interval_objects(
    spec: dict, node: dict, path: str, has_estimand: bool, seen: frozenset
) -> Iterator[tuple[str, bool]]:
    """(path, an estimand is in scope) for every interval-bearing object under ``node``."""
    ref = node.get("$ref")
    if ref in seen:
        return
    seen = seen | {ref} if ref else seen
    node = _resolve(spec, node)
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(node.get(key, [])):
            yield from _interval_objects(spec, sub, f"{path}|{i}", has_estimand, seen)
    if "items" in node:
        yield from _interval_objects(spec, node["items"], f"{path}[]", has_estimand, seen)
    if isinstance(node.get("additionalProperties"), dict):
        sub = node["additionalProperties"]
        yield from _interval_objects(spec, sub, f"{path}{{}}", has_estimand, seen)
    props = node.get("properties", {})
    here = has_estimand or "estimand" in props
    if any(keys <= set(props) for keys in INTERVAL_KEYS):
        yield path, here
    for name, sub in props.items():
        yield from _interval_objects(spec, sub, f"{path}.{name}", here, seen)


def test_every_interval_in_a_response_names_its_estimand() -> None:
    spec = json.loads(_export_module().render())
    found, missing = [], []
    for route, ops in spec["paths"].items():
        for method, op in ops.items():
            for status, resp in op.get("responses", {}).items():
                if not status.startswith("2"):
                    continue
                for ctype, media in resp.get("content", {}).items():
                    if "json" not in ctype or "schema" not in media:
                        continue
                    where = f"{method.upper()} {route} {status}"
                    for path, ok in _interval_objects(
                        spec, media["schema"], where, False, frozenset()
                    ):
                        (found if ok else missing).append(path)
    assert not missing, "intervals without an estimand:\n" + "\n".join(sorted(set(missing)))
    # the walk reaches the answers the issue names (a walk that finds nothing proves nothing)
    text = "\n".join(found)
    for route in ("/sessions", "/verdict", "/scores", "/leaderboard", "/analyses"):
        assert route in text, route


def test_estimand_values_are_the_two_accuracies() -> None:
    spec = json.loads(_export_module().render())
    for name, schema in spec["components"]["schemas"].items():
        prop = schema.get("properties", {}).get("estimand")
        if prop is None:
            continue
        options = [_resolve(spec, p) for p in prop.get("anyOf", [prop])]
        values = {v for o in options for v in o.get("enum", [o.get("const")]) if v is not None}
        assert values <= {"benchmark", "generalized"} and values, (name, prop)
