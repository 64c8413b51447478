"""The evaluation configuration an lm-eval results JSON carries, and its fingerprint.

lm-evaluation-harness writes ``results_<timestamp>.json`` next to the sample logs: ``results``,
``configs`` (one task config each: ``num_fewshot``, ``metric_list``, ``filter_list``,
``generation_kwargs``, ``repeats`` …), ``versions``, ``n-shot``, ``task_hashes``, ``config``
(``model``, ``model_args``, ``gen_kwargs`` …) and top-level ``lm_eval_version`` / ``git_hash``,
``chat_template`` / ``chat_template_sha``, ``fewshot_as_multiturn``, ``system_instruction_sha``.
The fields that change a model's per-item results (not the model's own name) are kept readable;
the fingerprint is the sha256 of their canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from app.ingest.types import IngestError

#: Readable configuration fields, in display order.
CONFIG_FIELDS: tuple[str, ...] = (
    "harness_version",
    "task_version",
    "task_hash",
    "num_fewshot",
    "metric",
    "filter",
    "repeats",
    "chat_template_applied",
    "chat_template_sha",
    "fewshot_as_multiturn",
    "system_instruction_sha",
    "gen_kwargs",
    "model_args",
)
#: ``model_args`` keys that name the model or only place/batch the computation.
MODEL_ARG_IGNORED = frozenset(
    {
        "pretrained",
        "model",
        "model_name",
        "tokenizer",
        "peft",
        "delta",
        "revision",
        "base_url",
        "device",
        "device_map",
        "parallelize",
        "batch_size",
        "max_batch_size",
        "num_concurrent",
        "max_retries",
    }
)
RESULTS_KEYS = frozenset({"configs", "versions", "n-shot", "task_hashes", "lm_eval_version"})
MAX_STRING = 2000


def is_lm_eval_results(obj: Any) -> bool:
    """True for an lm-eval results JSON (not a benchslice results body)."""
    return (
        isinstance(obj, Mapping)
        and isinstance(obj.get("results"), Mapping)
        and any(k in obj for k in RESULTS_KEYS)
        and "model" not in obj
        and "correct" not in obj
    )


def _clean(value: Any) -> Any:
    """JSON-safe, NUL-free, bounded copy (Postgres rejects NUL in text)."""
    if isinstance(value, str):
        return value.replace("\x00", "")[:MAX_STRING]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Mapping):
        return {str(k).replace("\x00", "")[:200]: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return str(value)[:MAX_STRING]


def parse_model_args(raw: Any) -> dict[str, Any] | None:
    """``"pretrained=org/m,dtype=bfloat16"`` or a dict → dict without the model's identity."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, Mapping):
        items = dict(raw)
    elif isinstance(raw, str):
        items = {}
        for part in raw.split(","):
            key, sep, val = part.partition("=")
            if key.strip():
                items[key.strip()] = val.strip() if sep else True
    else:
        return None
    kept = {k: v for k, v in items.items() if k not in MODEL_ARG_IGNORED}
    return dict(sorted(kept.items())) if kept else None


def _names(entries: Any) -> list[str] | None:
    if not isinstance(entries, list):
        return None
    out = [e.get("metric") or e.get("name") for e in entries if isinstance(e, Mapping)]
    names = [n for n in out if isinstance(n, str)]
    return names or None


def _per_task(obj: Mapping[str, Any], task: str, metric: str | None, flt: str | None) -> dict:
    configs = obj.get("configs") if isinstance(obj.get("configs"), Mapping) else {}
    tc = configs.get(task) if isinstance(configs.get(task), Mapping) else {}
    top = obj.get("config") if isinstance(obj.get("config"), Mapping) else {}

    def lookup(key: str) -> Any:
        table = obj.get(key)
        return table.get(task) if isinstance(table, Mapping) else None

    metrics = _names(tc.get("metric_list"))
    filters = _names(tc.get("filter_list"))
    gen = tc.get("generation_kwargs")
    if gen is None:
        gen = top.get("gen_kwargs") or None
    nshot = lookup("n-shot")
    if nshot is None:
        nshot = tc.get("num_fewshot")
    return {
        "task_version": lookup("versions"),
        "task_hash": lookup("task_hashes"),
        "num_fewshot": nshot,
        "metric": metric or (metrics[0] if metrics and len(metrics) == 1 else None),
        "filter": flt or (filters[0] if filters and len(filters) == 1 else None),
        "repeats": tc.get("repeats"),
        "gen_kwargs": gen,
    }


def parse_lm_eval_config(
    data: bytes | str | Mapping[str, Any],
    *,
    tasks: Iterable[str] | None = None,
    metric: str | None = None,
    filter: str | None = None,
) -> dict[str, Any]:
    """The evaluation configuration of an lm-eval results JSON.

    Parameters
    ----------
    data : bytes, str or mapping
        The results JSON.
    tasks : iterable of str, optional
        The tasks whose per-item results were uploaded (sample-log names); default every task
        with a config (else every task in ``versions`` / ``results``).
    metric, filter : str, optional
        The metric and filter the per-item values were taken from.

    Returns
    -------
    dict
        :data:`CONFIG_FIELDS` that are known (``None`` fields left out). A per-task field is a
        value when every task agrees, else ``{task: value}``.
    """
    if isinstance(data, bytes | str):
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise IngestError.single(f"malformed JSON: {exc}") from None
    else:
        obj = data
    if not is_lm_eval_results(obj):
        raise IngestError.single("not an lm-eval results JSON", field="results")
    known = [
        t
        for key in ("configs", "versions", "results")
        if isinstance(obj.get(key), Mapping)
        for t in obj[key]
    ]
    leaf = list(obj["configs"]) if isinstance(obj.get("configs"), Mapping) else known
    wanted = [t for t in dict.fromkeys(tasks or ()) if t in known] or list(dict.fromkeys(leaf))
    top = obj.get("config") if isinstance(obj.get("config"), Mapping) else {}
    version = obj.get("lm_eval_version")
    if version is None and obj.get("git_hash"):
        version = f"git:{obj['git_hash']}"
    template = obj.get("chat_template")
    template_sha = obj.get("chat_template_sha")
    if template_sha is None and isinstance(template, str) and template:
        template_sha = hashlib.sha256(template.encode()).hexdigest()
    cfg: dict[str, Any] = {
        "harness_version": version,
        "chat_template_applied": bool(template or template_sha)
        if ("chat_template" in obj or "chat_template_sha" in obj)
        else None,
        "chat_template_sha": template_sha,
        "fewshot_as_multiturn": obj.get("fewshot_as_multiturn"),
        "system_instruction_sha": obj.get("system_instruction_sha"),
        "model_args": parse_model_args(top.get("model_args")),
    }
    per = {t: _per_task(obj, t, metric, filter) for t in sorted(wanted)}
    for name in ("task_version", "task_hash", "num_fewshot", "metric", "filter", "repeats"):
        cfg[name] = _merge({t: p[name] for t, p in per.items()})
    cfg["gen_kwargs"] = _merge({t: p["gen_kwargs"] for t, p in per.items()})
    return canonical_config(cfg)


def _merge(by_task: dict[str, Any]) -> Any:
    known = {t: v for t, v in by_task.items() if v is not None}
    if not known:
        return None
    keys = {value_key(v) for v in known.values()}
    return next(iter(known.values())) if len(keys) == 1 else known


def canonical_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The known fields of ``cfg`` (``None`` dropped), cleaned, in :data:`CONFIG_FIELDS` order."""
    return {k: _clean(cfg[k]) for k in CONFIG_FIELDS if cfg.get(k) is not None}


def value_key(value: Any) -> str:
    """A field value as a short stable string: strings as is, anything else canonical JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def config_fingerprint(cfg: Mapping[str, Any] | None) -> str | None:
    """sha256 hex of the canonical JSON of the configuration (``None`` when there is none)."""
    if not cfg:
        return None
    canon = canonical_config(cfg)
    if not canon:
        return None
    text = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
