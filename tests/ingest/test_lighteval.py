"""lighteval details written by lighteval itself (its DummyModel, three seeds; see
tests/fixtures/lighteval/README.md), checked against pyarrow's own read of the parquet and
lighteval's own aggregates in its results_*.json; broken details name the file and field."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.errors import InvalidInput
from app.ingest.logs.lighteval import (
    details_path,
    doc_key,
    is_lighteval_details,
    parse_lighteval_details,
    select_details,
)
from app.ingest.types import AmbiguousChoiceError, IngestError
from app.schemas.results import ModelCreate
from app.services.catalog.uploads import ParseOptions, UploadPart, parse_results_upload

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "lighteval" / "out"
FILES = sorted(OUT.rglob("details_*.parquet"))
METRICS = {"arith|0": ("acc", "mrr"), "echo|0": ("em", "f1")}


def _name(path: Path) -> str:
    return str(path.relative_to(OUT))


def _results(model: str) -> dict:
    (path,) = (OUT / "results" / model).glob("results_*.json")
    return json.loads(path.read_text())["results"]


def _key(doc: dict) -> str:
    """The documented key, restated with the standard library: SHA-256 of the canonical JSON of
    query, choices and gold indices, first 16 hex digits."""
    gold = doc["gold_index"] if isinstance(doc["gold_index"], list) else [doc["gold_index"]]
    canon = {"query": doc["query"], "choices": doc["choices"], "gold_index": gold}
    text = json.dumps(canon, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_fixture_is_three_models_two_tasks_one_run_each() -> None:
    assert len(FILES) == 6
    assert {details_path(_name(f)).model for f in FILES} == {"dummy-a", "dummy-b", "dummy-c"}
    assert select_details([_name(f) for f in FILES]) == (list(range(6)), ())


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parts[-3]}-{p.name.split('_')[1]}")
def test_every_value_matches_pyarrows_read_and_lightevals_aggregate(path: Path) -> None:
    data, name = path.read_bytes(), _name(path)
    assert is_lighteval_details(data, name) and is_lighteval_details(data)
    rows = pq.read_table(path).to_pylist()  # the producer's format, read by pyarrow itself
    task = rows[0]["doc"]["task_name"]
    model = path.parts[-3]
    with pytest.raises(AmbiguousChoiceError) as exc:
        parse_lighteval_details(data, filename=name)
    assert exc.value.choices["metric"] == list(METRICS[task])
    for metric in METRICS[task]:
        parsed = parse_lighteval_details(data, metric=metric, filename=name)
        assert parsed.model == model and parsed.task == task and parsed.metric == metric
        assert parsed.source_format == "lighteval" and parsed.samples is None
        assert parsed.item_ids.tolist() == [f"{task}/{_key(r['doc'])}" for r in rows]
        assert parsed.item_ids.tolist() == [
            f"{task}/{doc_key(r['doc']['query'], r['doc']['choices'], r['doc']['gold_index'])}"
            for r in rows
        ]
        want = [float(r["metric"][metric]) for r in rows]
        np.testing.assert_allclose(parsed.correct.astype(float), want, rtol=0, atol=1e-7)
        assert parsed.binary == (metric in ("acc", "em"))  # 0/1 stored as bits, else graded
        # lighteval's own corpus aggregate (mean) in results_*.json is the mean of what we store
        assert parsed.correct.mean() == pytest.approx(_results(model)[task][metric], abs=1e-6)
        assert parsed.subjects.tolist() == [task] * len(rows)
        assert parsed.costs is None  # the DummyModel counts no tokens
    # a comma-separated list: each file takes the first metric it has
    assert parse_lighteval_details(data, metric="acc,em", filename=name).metric in ("acc", "em")


def test_items_are_keyed_by_content_so_models_align() -> None:
    arith = [f for f in FILES if "arith" in f.name]
    parsed = [
        parse_lighteval_details(f.read_bytes(), metric="acc", filename=_name(f)) for f in arith
    ]
    assert len({tuple(sorted(p.item_ids.tolist())) for p in parsed}) == 1
    assert len({p.correct.tobytes() for p in parsed}) > 1  # the seeds answer differently
    # doc.id is positional: reordered rows keep their keys
    table = pq.read_table(arith[0])
    flipped = _bytes(table.take(list(range(table.num_rows))[::-1]))
    again = parse_lighteval_details(flipped, metric="acc", filename=_name(arith[0]))
    assert dict(zip(again.item_ids, again.correct, strict=True)) == dict(
        zip(parsed[0].item_ids, parsed[0].correct, strict=True)
    )


def _bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _with(table: pa.Table, column: str, field: str, values: list, type_=None) -> pa.Table:
    """``table`` with ``column.field`` replaced (or added)."""
    col = table.column(column).combine_chunks()
    names = [col.type.field(j).name for j in range(col.type.num_fields)]
    arrays = [col.field(n) for n in names]
    if field in names:
        arrays[names.index(field)] = pa.array(values, type=type_)
    else:
        names.append(field)
        arrays.append(pa.array(values, type=type_))
    struct = pa.StructArray.from_arrays(arrays, names=names)
    return table.set_column(table.column_names.index(column), column, struct)


ARITH = next(f for f in FILES if "dummy-a" in str(f) and "arith" in f.name)
NAME = _name(ARITH)


def _arith() -> pa.Table:
    return pq.read_table(ARITH)


def _mrr(values: list) -> bytes:
    return _bytes(_with(_arith(), "metric", "mrr", values, pa.float64()))


def _refused(data: bytes, metric: str | None = "mrr", filename: str = NAME) -> IngestError:
    with pytest.raises(IngestError) as exc:
        parse_lighteval_details(data, metric=metric, filename=filename)
    return exc.value


def test_broken_details_name_the_file_row_and_field() -> None:
    good = ARITH.read_bytes()
    # truncated parquet: still told lighteval's by its name, refused naming the file
    err = _refused(good[: len(good) // 2])
    assert is_lighteval_details(good[: len(good) // 2], NAME)
    assert err.errors[0].field == NAME and "truncated" in str(err)
    # no metric column
    err = _refused(_bytes(_arith().drop_columns(["metric"])))
    assert err.errors[0].field == f"{NAME}:metric" and "no 'metric' column" in str(err)
    # a metric the file does not have: the error lists those it has
    err = _refused(good, metric="bleu")
    assert err.errors[0].field == "metric" and "acc, mrr" in str(err)
    # NaN, infinite, out of range, missing: each row named
    n = _arith().num_rows
    for bad, what in ((float("nan"), "NaN"), (float("inf"), "NaN or infinite"), (1.5, "not in")):
        err = _refused(_mrr([0.5] * 2 + [bad] + [0.5] * (n - 3)))
        assert (err.errors[0].line, err.errors[0].field) == (3, f"{NAME}:metric.mrr"), err
        assert what in str(err)
    err = _refused(_mrr([None] + [0.5] * (n - 1)))
    assert (err.errors[0].line, err.errors[0].field) == (1, f"{NAME}:metric.mrr")
    # a duplicated doc
    table = _arith()
    err = _refused(_bytes(pa.concat_tables([table, table.slice(0, 1)])))
    assert (err.errors[0].line, err.errors[0].field) == (n + 1, f"{NAME}:doc")
    assert "row 1" in str(err)
    # a non-numeric (corpus-level) metric is never a score
    corpus = _bytes(_with(table, "metric", "bleu", [["a", "b"]] * n))
    err = _refused(corpus, metric="bleu")
    assert err.errors[0].field == f"{NAME}:metric.bleu" and "not a score" in str(err)
    # a doc without a query; docs of two tasks in one file
    err = _refused(_bytes(_with(table, "doc", "query", [None] * n, pa.string())))
    assert (err.errors[0].line, err.errors[0].field) == (1, f"{NAME}:doc.query")
    mixed = _bytes(_with(table, "doc", "task_name", ["arith|0"] * (n - 1) + ["echo|0"]))
    assert _refused(mixed).errors[0].field == f"{NAME}:doc.task_name"


def test_token_ids_give_the_cost() -> None:
    n = _arith().num_rows
    table = _with(_arith(), "model_response", "input_tokens", [[1, 2, 3]] * (n - 1) + [[]])
    table = _with(table, "model_response", "output_tokens", [[[4, 5]]] * n)
    parsed = parse_lighteval_details(_bytes(table), metric="acc", filename=NAME)
    np.testing.assert_array_equal(parsed.costs.input_tokens, [3.0] * (n - 1) + [np.nan])
    np.testing.assert_array_equal(parsed.costs.output_tokens, [2.0] * n)


def _parts(files: list[Path], names: list[str] | None = None) -> list[UploadPart]:
    names = names or [_name(f) for f in files]
    return [UploadPart("", f.read_bytes(), n) for f, n in zip(files, names, strict=True)]


def test_upload_reads_one_models_latest_run_and_refuses_mixed_models() -> None:
    a = [f for f in FILES if "dummy-a" in str(f)]
    date = a[0].parts[-2]
    older = [_name(f).replace(date, "2020-01-01T00-00-00.000000") for f in a]
    parts = _parts(a + a, [_name(f) for f in a] + older)
    assert select_details([p.filename for p in parts])[1] == (
        f"dummy-a: 2 runs; the latest ({date}) read, 2020-01-01T00-00-00.000000 left out",
    )
    parsed, model = parse_results_upload(parts, ParseOptions(metric="acc,em"), model=None)
    assert model.name == "dummy-a" and parsed.n_items == 8 + 6
    assert parsed.source_format == "lighteval" and parsed.metric == "acc,em"
    b = next(f for f in FILES if "dummy-b" in str(f))
    with pytest.raises(InvalidInput) as exc:
        parse_results_upload(_parts([a[0], b]), ParseOptions(metric="acc"), model=None)
    assert "several models (dummy-a, dummy-b)" in str(exc.value)
    assert exc.value.errors[0].field[-1] == f"{_name(b)}:model"
    with pytest.raises(IngestError, match="several models"):
        select_details([_name(a[0]), _name(b)], one_model=True)
    # a single parquet with no details/ path: the model comes from the caller
    plain = [UploadPart("", a[0].read_bytes(), "x.parquet")]
    with pytest.raises(InvalidInput, match="which model"):
        parse_results_upload(plain, ParseOptions(metric="acc,em"), model=None)
    parsed, model = parse_results_upload(
        plain, ParseOptions(metric="acc,em"), model=ModelCreate(name="mine")
    )
    assert model.name == "mine" and parsed.source_format == "lighteval"
