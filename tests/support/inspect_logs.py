"""Inspect ``.eval`` archives built byte by byte, for tests that need broken or hostile ones."""

from __future__ import annotations

import io
import struct
import zlib

import zstandard


def zip_bytes(members) -> bytes:
    """A zip built byte by byte: ``members`` are ``(name, payload, method, crc, size)``, the
    payload already compressed (3.11's zipfile cannot write zstd, method 93, nor lie)."""
    out, central = io.BytesIO(), []
    for name, payload, method, crc, size in members:
        offset, raw = out.tell(), name.encode()
        fields = struct.pack(
            "<HHHHHLLLHH", 20, 0, method, 0, 0, crc, len(payload), size, len(raw), 0
        )
        out.write(b"PK\x03\x04" + fields + raw + payload)
        central.append(
            b"PK\x01\x02"
            + struct.pack("<H", 20)
            + fields
            + struct.pack("<HHHLL", 0, 0, 0, 0, offset)
            + raw
        )
    start = out.tell()
    out.write(b"".join(central))
    size = out.tell() - start
    n = len(members)
    out.write(b"PK\x05\x06" + struct.pack("<HHHHLLH", 0, 0, n, n, size, start, 0))
    return out.getvalue()


def zstd_member(name: str, data: bytes, *, declared: int | None = None, frame: bytes | None = None):
    payload = frame if frame is not None else zstandard.ZstdCompressor().compress(data)
    return (name, payload, 93, zlib.crc32(data), len(data) if declared is None else declared)
