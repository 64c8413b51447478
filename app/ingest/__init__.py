"""Parsers for result uploads: lm-eval sample logs, Open LLM Leaderboard details, CSV, JSON, and
Inspect AI logs (:mod:`app.ingest.logs`).

Pure Python + numpy: no database, no web framework. Every parser returns one ``ParsedResults``
or raises ``IngestError`` whose ``errors`` name the line and field at fault.
"""

from app.ingest.lm_eval import (
    LEADERBOARD_METRICS,
    gold_indices,
    leaderboard_metric,
    parse_leaderboard_details,
    parse_lm_eval_samples,
    task_from_filename,
)
from app.ingest.lm_eval_config import (
    CONFIG_FIELDS,
    canonical_config,
    config_fingerprint,
    is_lm_eval_results,
    parse_lm_eval_config,
    value_key,
)
from app.ingest.logs.inspect import parse_inspect_log
from app.ingest.tabular import parse_columnar, parse_csv, parse_keyed
from app.ingest.types import (
    AmbiguousChoiceError,
    IngestError,
    ItemCosts,
    LineError,
    ParsedResults,
)

__all__ = [
    "CONFIG_FIELDS",
    "LEADERBOARD_METRICS",
    "AmbiguousChoiceError",
    "IngestError",
    "ItemCosts",
    "LineError",
    "ParsedResults",
    "canonical_config",
    "config_fingerprint",
    "gold_indices",
    "is_lm_eval_results",
    "leaderboard_metric",
    "parse_columnar",
    "parse_csv",
    "parse_inspect_log",
    "parse_keyed",
    "parse_leaderboard_details",
    "parse_lm_eval_config",
    "parse_lm_eval_samples",
    "task_from_filename",
    "value_key",
]
