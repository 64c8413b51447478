"""Fields of one lm-eval sample record: string-decoding, log-likelihoods, gold choice, confidence.

The per-record interpretation under :func:`app.ingest.lm_eval.parse_lm_eval_samples` (the file
format itself is described in :mod:`app.ingest.lm_eval`). The Open LLM Leaderboard exports
string-encode fields in places (``"[['-1.2', 'False']]"``); :func:`maybe_decode` undoes that,
:func:`loglikelihoods` reads the per-choice log-likelihoods of ``filtered_resps``,
:func:`gold_indices` resolves the gold choice(s) from ``target`` (an index or a choice text), and
:func:`softmax_at_gold` turns the log-likelihoods into the model's probability of the gold.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["as_float", "gold_indices", "loglikelihoods", "maybe_decode", "softmax_at_gold"]

_LL_CHOICES_MIN = 2


def maybe_decode(value: Any) -> Any:
    """Undo string encoding of JSON/Python literals (``"[['-1.2', 'False']]"``, ``"{...}"``)."""
    if isinstance(value, str) and value[:1] in "[({":
        try:
            return json.loads(value)
        except RecursionError:  # a string nested deeper than Python recurses: not a literal
            return value
        except ValueError:
            try:
                return ast.literal_eval(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return value
    return value


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_BOOL_STRINGS = frozenset({"True", "False", "true", "false"})


def loglikelihoods(filtered_resps: Any) -> list[float] | None:
    """Per-choice log-likelihoods from ``filtered_resps`` (``[[ll, is_greedy], …]``), else None.

    Each entry may be ``[-1.23, false]``, ``["-1.23", "False"]`` or a string encoding of either.
    """
    resps = maybe_decode(filtered_resps)
    if not isinstance(resps, list | tuple) or len(resps) < _LL_CHOICES_MIN:
        return None
    out = []
    try:
        for r in resps:
            if isinstance(r, str):
                r = maybe_decode(r)
            flag = r[1]
            if len(r) != 2 or not (flag is True or flag is False or flag in _BOOL_STRINGS):
                return None
            ll = r[0]
            if isinstance(ll, bool):
                return None
            ll = float(ll)
            if ll != ll:  # NaN
                return None
            out.append(ll)
    except (TypeError, ValueError, IndexError, KeyError):
        return None
    return out


def _continuations(arguments: Any) -> list[str] | None:
    args = maybe_decode(arguments)
    if isinstance(args, Mapping):

        def order(key: str) -> int:
            digits = re.sub(r"\D", "", key)
            return int(digits) if digits else 0

        items = [args[k] for k in sorted(args, key=order)]
        conts = []
        for a in items:
            a = maybe_decode(a)
            if isinstance(a, Mapping) and "arg_1" in a:
                conts.append(str(a["arg_1"]))
            elif isinstance(a, list | tuple) and len(a) >= 2:
                conts.append(str(a[1]))
            else:
                return None
        return conts
    if isinstance(args, list | tuple):
        conts = []
        for a in args:
            a = maybe_decode(a)
            if isinstance(a, list | tuple) and len(a) >= 2:
                conts.append(str(a[1]))
            else:
                return None
        return conts
    return None


def _match_text(target: str, options: Sequence[str]) -> int | None:
    for key in (lambda s: s, lambda s: s.strip()):
        t = key(target)
        hits = [i for i, o in enumerate(options) if key(str(o)) == t]
        if len(hits) == 1:
            return hits[0]
    return None


def gold_indices(target: Any, doc: Any, arguments: Any, n_choices: int) -> list[int] | None:
    """Gold choice index(es): ``target`` as an index, else the choice whose text matches it.

    Choice texts come from ``doc["choices"]`` / ``doc["options"]``, then from the continuations
    in ``arguments``. Returns ``None`` when no unique gold can be found.
    """
    target = maybe_decode(target)
    if isinstance(target, list | tuple):
        idx = [t for t in (_as_index(x, n_choices) for x in target) if t is not None]
        return idx if idx and len(idx) == len(target) else None
    idx = _as_index(target, n_choices)
    if idx is not None:
        return [idx]
    if not isinstance(target, str):
        return None
    sources: list[Sequence[str]] = []
    if isinstance(doc, Mapping):
        for key in ("choices", "options"):
            opts = maybe_decode(doc.get(key))
            if (
                isinstance(opts, Mapping) and "text" in opts
            ):  # ARC-style {"text": [...], "label": [...]}
                opts = opts["text"]
            if isinstance(opts, list) and len(opts) == n_choices:
                sources.append(opts)
    conts = _continuations(arguments)
    if conts is not None and len(conts) == n_choices:
        sources.append(conts)
    for opts in sources:
        hit = _match_text(target, opts)
        if hit is not None:
            return [hit]
    return None


def _as_index(value: Any, n_choices: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < n_choices else None
    if isinstance(value, str) and value.strip().isdigit():
        v = int(value.strip())
        return v if 0 <= v < n_choices else None
    return None


def softmax_at_gold(
    flat_ll: list[float], lengths: np.ndarray, gold_rows: list[int], gold_cols: list[int]
) -> np.ndarray:
    """Softmax over each record's choices, summed over its gold choice(s), vectorised.

    ``p_gold = sum_{g in gold} exp(ll_g - logsumexp(ll))``; rows without choices get 0.
    """
    n, width = lengths.shape[0], max(int(lengths.max(initial=0)), 1)
    ll = np.full((n, width), -np.inf)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
    ll[rows, cols] = np.asarray(flat_ll, dtype=np.float64)
    m = ll.max(axis=1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    with np.errstate(invalid="ignore"):
        p = np.exp(ll - m)
    p /= np.maximum(p.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    gold = np.zeros((n, width), dtype=bool)
    gold[np.asarray(gold_rows, dtype=np.int64), np.asarray(gold_cols, dtype=np.int64)] = True
    return np.clip((p * gold).sum(axis=1), 0.0, 1.0)
