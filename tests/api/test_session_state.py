"""The engine-state packing of sessions: the raw format and the .npz of older rows read back to
the same values (dtype, shape, Python scalars), writable, and the engine continues identically."""

from __future__ import annotations

import io

import numpy as np

from app.core.sequential.confidence_sequences import CSState, cs_init, cs_update
from app.services.evaluation.sessions import STATE_MAGIC, pack_state, unpack_state


def _npz(parts: dict) -> bytes:  # the first format, as rows written before hold it
    buf = io.BytesIO()
    flat = {f"{p}__{k}": np.asarray(v) for p, d in parts.items() for k, v in d.items()}
    np.savez(buf, **flat)
    return buf.getvalue()


def _parts() -> dict:
    acc = cs_update(cs_init(448, alpha=0.05, paired=False, binary=True), np.array([1.0, 0, 1, 1]))
    diff = cs_init(448, alpha=0.05, paired=True, binary=False)
    diff = cs_update(diff, np.array([0.5, 0.0, 1.0, 0.5]))
    return {"acc": acc.to_dict(), "diff": diff.to_dict()}


def test_both_formats_read_back_the_same_values() -> None:
    parts = _parts()
    blob = pack_state(parts)
    assert blob.startswith(STATE_MAGIC)
    for stored in (blob, _npz(parts)):
        got = unpack_state(stored)
        assert got.keys() == parts.keys()
        for p, fields in parts.items():
            assert got[p].keys() == fields.keys()
            for k, v in fields.items():
                g = got[p][k]
                if isinstance(v, np.ndarray):
                    assert g.dtype == v.dtype and g.shape == v.shape and g.flags.writeable
                    np.testing.assert_array_equal(g, v)
                else:
                    assert type(g) is type(v) and g == v, (p, k)


def test_the_engine_continues_identically_from_either_format() -> None:
    parts = _parts()
    x = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    direct = cs_update(CSState.from_dict(parts["acc"]), x)
    for stored in (pack_state(parts), _npz(parts)):
        state = CSState.from_dict(unpack_state(stored)["acc"])
        again = cs_update(state, x, inplace=True)
        for k, v in direct.to_dict().items():
            np.testing.assert_array_equal(np.asarray(again.to_dict()[k]), np.asarray(v))
