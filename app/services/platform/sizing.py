"""Measured sizes of cached values (bytes), for caches bounded by memory rather than entry count.

``nbytes`` walks what a cache holds: numpy arrays count their buffers (a view counts its base
once), bytes and str their ``sys.getsizeof``, containers, dataclasses, pydantic models and
plain objects their parts. Shared objects count once per value. It is an estimate of what
dropping the value frees, accurate where the memory is (arrays, bytes, strings).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np

_SCALARS = (int, float, complex, bool, type(None))


def nbytes(value: Any) -> int:
    """Approximate bytes held by ``value`` and everything it references (each object once)."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            # an array that owns its buffer counts it in its own size; a view counts its
            # header and its base (once, however many views share it)
            total += sys.getsizeof(obj)
            if obj.base is not None:
                stack.append(obj.base)
            if obj.dtype == object:
                stack.extend(obj.ravel().tolist())
            continue
        total += sys.getsizeof(obj)
        if isinstance(obj, (str, bytes, bytearray, memoryview, *_SCALARS)):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif dataclasses.is_dataclass(obj):
            stack.extend(getattr(obj, f.name) for f in dataclasses.fields(obj))
        elif hasattr(obj, "__pydantic_fields__"):
            stack.extend(obj.__dict__.values())
        elif hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, s) for s in obj.__slots__ if hasattr(obj, s))
    return total
