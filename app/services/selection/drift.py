"""Drift guard and source-model sufficiency: the warnings on subsets, scores and verdicts.

* ``config_mismatch``: the scored model's evaluation configuration (the lm-eval results JSON of
  its upload, else its stored results' configuration) differs, field by field, from the
  reference models' (the subset's source models, or every model with results on the version
  when the method uses none); a verdict warns when the pair's configurations differ. A field
  either side does not know is not compared.
* ``few_source_models``: the subset's selector was fit on fewer than
  :data:`MIN_SOURCE_MODELS` source models.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.selectors import SELECTORS
from app.db.models.model_result import LanguageModel, ModelResult
from app.ingest import CONFIG_FIELDS, ParsedResults, value_key
from app.schemas.quality import Warning
from app.schemas.subsets import PopulationShift

# Coverage of the service's 95 % intervals vs the number of source models the selector was fit
# on, GPQA (420 models x 448 items), n = 50, 100 held-out targets, seed 0, through
# app.core.scoring.coverage.coverage_study (the service's own scorer):
#   anchor_points (40 splits) weighted_mean: 20 -> 0.777, 30 -> 0.840, 50 -> 0.882, 75 -> 0.904,
#     100 -> 0.930, 150 -> 0.945, 200 -> 0.942, 300 -> 0.949; |error| 0.046 at 20, 0.038 at 100.
#   tiny_benchmarks (20 splits) irt / p_irt / gp_irt: 20 -> 0.83 / 0.85 / 0.83, 30 -> 0.90 /
#     0.90 / 0.91, 50 -> 0.93 / 0.94 / 0.94 (p_irt top-20 % tail 0.83), 75 -> 0.94 / 0.95 / 0.94
#     (tail 0.90), 100 -> 0.95 / 0.96 / 0.96 (tail 0.92), 300 -> 0.97 / 0.97 / 0.97.
#   With 10 sources (< 20 references) the service falls back to design intervals: irt 0.97 but
#     p_irt 0.17 (its delta-method interval).
# Below 100 the model-based intervals undercover (< 0.93 for anchor_points), so 100 it is.
MIN_SOURCE_MODELS = 100


def source_warnings(method: str, source_models: Sequence[str] | None) -> list[Warning]:
    """``few_source_models`` when a selector that fits on source models had fewer than
    :data:`MIN_SOURCE_MODELS`."""
    cls = SELECTORS.get(method)
    if cls is None or not cls.uses_sources:
        return []
    n = len(source_models or ())
    if n >= MIN_SOURCE_MODELS:
        return []
    return [
        Warning(
            code="few_source_models",
            message=f"the {method} selector was fit on {n} source model(s); its intervals were "
            f"measured to undercover below {MIN_SOURCE_MODELS} (coverage study on GPQA)",
            details={"n_source_models": n, "threshold": MIN_SOURCE_MODELS},
        )
    ]


def stored_configs(
    session: Session, version_id: uuid.UUID, names: Iterable[str] | None = None
) -> dict[str, dict[str, Any] | None]:
    """Model name -> stored evaluation configuration on the version (every model by default)."""
    stmt = (
        select(LanguageModel.name, ModelResult.eval_config)
        .join(LanguageModel, LanguageModel.id == ModelResult.model_id)
        .where(ModelResult.benchmark_version_id == version_id)
    )
    if names is not None:
        stmt = stmt.where(LanguageModel.name.in_(list(names)))
    return {name: cfg for name, cfg in session.execute(stmt).all()}


def config_mismatches(
    model: str, config: Mapping[str, Any] | None, references: Mapping[str, Any]
) -> list[Warning]:
    """One ``config_mismatch`` per field where a reference model's known value differs.

    ``sources`` counts the reference models per value of the field (the model's own value
    included when some share it).
    """
    if not config:
        return []
    out = []
    for field in CONFIG_FIELDS:  # a dozen fields
        if field not in config:
            continue
        mine = value_key(config[field])
        counts = Counter(
            value_key(ref[field]) for ref in references.values() if ref and field in ref
        )
        if not counts or set(counts) == {mine}:
            continue
        differing = sum(c for v, c in counts.items() if v != mine)
        out.append(
            Warning(
                code="config_mismatch",
                message=f"{field} = {mine} for {model!r} but {differing} of "
                f"{sum(counts.values())} reference model(s) used another value",
                field=field,
                model=model,
                value=config[field],
                sources=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
            )
        )
    return out


def reference_names(source_models: Sequence[str] | None) -> list[str] | None:
    """The subset's source models, or ``None`` (every model on the version) when it has none."""
    return list(source_models) if source_models else None


def score_warnings(
    session: Session,
    version_id: uuid.UUID,
    method: str,
    source_models: Sequence[str] | None,
    model_name: str,
    parsed: ParsedResults,
) -> list[Warning]:
    """Warnings for a score: few source models, and configuration drift from the references."""
    out = source_warnings(method, source_models)
    refs = stored_configs(session, version_id, reference_names(source_models))
    config = parsed.eval_config
    if config is None:
        config = stored_configs(session, version_id, [model_name]).get(model_name)
    refs.pop(model_name, None)
    return out + config_mismatches(model_name, config, refs)


def pair_warnings(
    session: Session, version_id: uuid.UUID, model_a: str, model_b: str
) -> list[Warning]:
    """``config_mismatch`` per field where the two models' stored configurations differ."""
    configs = stored_configs(session, version_id, [model_a, model_b])
    return config_mismatches(model_b, configs.get(model_b), {model_a: configs.get(model_a)})


def extend_shift(shift: PopulationShift, warnings: Sequence[Warning]) -> PopulationShift:
    """The population-shift flag also fires on an evaluation-configuration mismatch."""
    fields = [w.field for w in warnings if w.code == "config_mismatch" and w.field]
    if not fields:
        return shift
    return shift.model_copy(
        update={
            "flagged": True,
            "reasons": [
                *shift.reasons,
                "evaluation configuration differs from the reference models' on: "
                + ", ".join(fields),
            ],
            "details": {**shift.details, "config_mismatch_fields": fields},
        }
    )
