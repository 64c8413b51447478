"""HELM run directories written by crfm-helm itself (simple/model1, one run with HELM's
``extra_space`` data augmentation), checked against what HELM's own readers read from them
(tests/fixtures/helm/expected.json)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.ingest.logs.helm import is_helm_run_spec, is_helm_stats, parse_helm_run, task_name
from app.ingest.types import AmbiguousChoiceError, IngestError

HELM = Path(__file__).resolve().parents[1] / "fixtures" / "helm"
EXPECTED = json.loads((HELM / "expected.json").read_text())
PERTURBED = "simple1:model=simple_model1,max_eval_instances=2,data_augmentation=extra_space2"
CASES = [
    ("simple_mcqa:model=simple_model1", "exact_match"),
    ("simple1:model=simple_model1", "max_prob"),
    (PERTURBED, "max_prob"),
]


def _run(name: str) -> tuple[bytes, bytes]:
    folder = HELM / "runs" / name
    return (folder / "per_instance_stats.json").read_bytes(), (
        folder / "run_spec.json"
    ).read_bytes()


@pytest.mark.parametrize(("run", "stat"), CASES, ids=["mcqa", "simple1", "extra_space"])
def test_every_value_matches_helms_reader(run: str, stat: str) -> None:
    stats, spec = _run(run)
    assert is_helm_stats(stats) and is_helm_run_spec(spec)
    with pytest.raises(AmbiguousChoiceError) as exc:
        parse_helm_run(stats, spec)
    assert stat in exc.value.choices["metric"]
    parsed = parse_helm_run(stats, spec, metric=stat)
    want = EXPECTED[run]
    task = task_name(want["run"])
    assert parsed.model == want["model"] == "simple/model1" and parsed.task == task
    items: dict[str, dict[int, dict]] = {}
    for e in want["entries"]:
        key = f"{task}/{e['instance_id']}" + (f"@{e['perturbation']}" if e["perturbation"] else "")
        items.setdefault(key, {})[e["train_trial_index"]] = e["means"]
    assert parsed.item_ids.tolist() == list(items)
    k = 1 + max(t for trials in items.values() for t in trials)
    assert k == 3 and parsed.samples == 3  # train trials are the item's samples
    values = [[m[stat] for _, m in sorted(trials.items())] for trials in items.values()]
    np.testing.assert_allclose(parsed.correct, [np.mean(v) for v in values], rtol=1e-6)
    np.testing.assert_allclose(
        parsed.within_variance, [np.var(v, ddof=1) for v in values], rtol=1e-4, atol=1e-7
    )
    for field, name in (
        ("input_tokens", "num_prompt_tokens"),
        ("output_tokens", "num_output_tokens"),
        ("seconds", "inference_runtime"),
    ):
        np.testing.assert_allclose(
            getattr(parsed.costs, field), [sum(m[name] for m in t.values()) for t in items.values()]
        )


def test_helms_perturbed_instances_are_items_of_their_own() -> None:
    """helm-run with data_augmentation=extra_space: every eval instance twice (original, then
    perturbed), each perturbed entry's stats tagged with its perturbation."""
    stats, spec = _run(PERTURBED)
    entries = json.loads(stats)
    assert [e.get("perturbation", {}).get("name") for e in entries] == [None, "extra_space"] * 6
    assert all(
        s["name"].get("perturbation") == e.get("perturbation") for e in entries for s in e["stats"]
    )
    parsed = parse_helm_run(stats, spec, metric="max_prob")
    task = "simple1:max_eval_instances=2,data_augmentation=extra_space2"
    assert parsed.item_ids.tolist() == [
        f"{task}/{i}{p}" for i in ("id12", "id18") for p in ("", "@extra_space")
    ]
    # the perturbed prompts are longer (the input's spaces doubled): each copy has its own cost
    tokens = parsed.costs.input_tokens
    assert (tokens[1::2] > tokens[0::2]).all()
    # an original entry's stats tagged with a perturbation are not its own
    tagged = [
        {
            **e,
            "stats": [
                {**s, "name": {**s["name"], "perturbation": {"name": "x"}}} for s in e["stats"]
            ],
        }
        if i == 0
        else e
        for i, e in enumerate(entries)
    ]
    with pytest.raises(IngestError, match="no 'max_prob' stat") as exc:
        parse_helm_run(json.dumps(tagged).encode(), spec, metric="max_prob")
    assert exc.value.errors[0].field == "per_instance_stats.json[0].stats"
    unnamed = [
        {**e, "perturbation": {"robustness": True}} if i == 1 else e for i, e in enumerate(entries)
    ]
    with pytest.raises(IngestError) as exc:
        parse_helm_run(json.dumps(unnamed).encode(), spec, metric="max_prob")
    assert exc.value.errors[0].field == "per_instance_stats.json[1].perturbation.name"


def test_broken_runs_name_the_field() -> None:
    stats, spec = _run(CASES[0][0])
    entries = json.loads(stats)
    twice = json.dumps(entries + entries[:1]).encode()
    with pytest.raises(IngestError, match="appears twice") as exc:
        parse_helm_run(twice, spec, metric="exact_match")
    assert exc.value.errors[0].field == "per_instance_stats.json[30].instance_id"
    with pytest.raises(IngestError, match="no stat of 'acc'"):
        parse_helm_run(stats, spec, metric="acc")
    no_model = json.dumps({**json.loads(spec), "adapter_spec": {}}).encode()
    with pytest.raises(IngestError) as exc:
        parse_helm_run(stats, no_model, metric="exact_match")
    assert exc.value.errors[0].field == "run_spec.json:adapter_spec.model"
