"""Bounded reading of zip archives (Inspect ``.eval`` logs): no member is inflated past a cap.

Python 3.11's :mod:`zipfile` cannot inflate zstd members (method 93, what Inspect writes), so
zstd members are read raw from their local header and inflated with the well-kept
``zstandard`` bindings; stored and deflated members go through :mod:`zipfile`. Either way the
declared size (central directory, zstd frame header) is checked against the caps *before*
inflating, and inflation streams with a hard cap, so a lying header cannot blow memory up (a
zip bomb is an error naming the member, not an allocation).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import zstandard

from app.ingest.types import IngestError

ZIP_STORED, ZIP_DEFLATED, ZIP_ZSTANDARD = 0, 8, 93
MAX_MEMBER_BYTES = 128 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_CHUNK = 1 << 20


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04"


class BoundedZip:
    """The members of a zip held in memory, each read at most once within byte caps.

    Errors are ``IngestError`` whose field names the member at fault (``field="header.json"``).
    """

    def __init__(
        self,
        data: bytes,
        *,
        max_member_bytes: int = MAX_MEMBER_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self._data = data
        self.max_member_bytes = max_member_bytes
        self.max_total_bytes = max_total_bytes
        self.inflated = 0
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
            raise IngestError.single(
                f"not a readable zip archive (truncated or corrupt?): {exc}", field="file"
            ) from None
        self.members = {i.filename: i for i in infos}

    def names(self) -> list[str]:
        return list(self.members)

    def __contains__(self, name: str) -> bool:
        return name in self.members

    def read(self, name: str) -> bytes:
        """The inflated bytes of member ``name`` (checked against its size and CRC)."""
        info = self.members.get(name)
        if info is None:
            raise IngestError.single("member missing from the archive", field=name)
        cap = min(self.max_member_bytes, self.max_total_bytes - self.inflated)
        if info.file_size > cap:
            raise IngestError.single(
                f"member declares {info.file_size} bytes uncompressed; the limit is {cap} "
                f"(per member {self.max_member_bytes}, per upload {self.max_total_bytes})",
                field=name,
            )
        if info.compress_type == ZIP_ZSTANDARD:
            out = self._inflate_zstd(info, cap)
        elif info.compress_type in (ZIP_STORED, ZIP_DEFLATED):
            out = self._inflate_stdlib(info, cap)
        else:
            raise IngestError.single(
                f"unsupported compression method {info.compress_type} (expected zstd, deflate "
                "or stored)",
                field=name,
            )
        if len(out) != info.file_size:
            raise IngestError.single(
                f"member inflates to {len(out)} bytes, its header says {info.file_size}",
                field=name,
            )
        if zlib.crc32(out) != info.CRC:
            raise IngestError.single("member is corrupt (CRC mismatch)", field=name)
        self.inflated += len(out)
        return out

    def _raw(self, info: zipfile.ZipInfo) -> bytes:
        start = info.header_offset
        header = self._data[start : start + _LOCAL_HEADER.size]
        if len(header) < _LOCAL_HEADER.size:
            raise IngestError.single("local header truncated", field=info.filename)
        fields = _LOCAL_HEADER.unpack(header)
        if fields[0] != b"PK\x03\x04":
            raise IngestError.single("bad local header signature", field=info.filename)
        begin = start + _LOCAL_HEADER.size + fields[10] + fields[11]  # name, extra lengths
        raw = self._data[begin : begin + info.compress_size]
        if len(raw) < info.compress_size:
            raise IngestError.single("member data truncated", field=info.filename)
        return raw

    def _inflate_zstd(self, info: zipfile.ZipInfo, cap: int) -> bytes:
        raw = self._raw(info)
        try:
            declared = zstandard.frame_content_size(raw)
        except zstandard.ZstdError:
            raise IngestError.single(
                "not zstd data (wrong compression?)", field=info.filename
            ) from None
        if declared > cap:  # -1: unknown (streamed frame); the streaming cap below holds
            raise IngestError.single(
                f"zstd frame declares {declared} bytes; the limit is {cap}", field=info.filename
            )
        reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(raw), read_across_frames=True
        )
        return _bounded_read(reader, cap, info.filename, zstandard.ZstdError)

    def _inflate_stdlib(self, info: zipfile.ZipInfo, cap: int) -> bytes:
        try:
            with self._zip.open(info) as f:
                return _bounded_read(f, cap, info.filename, zipfile.BadZipFile)
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as exc:
            raise IngestError.single(f"member is corrupt: {exc}", field=info.filename) from None


def _bounded_read(reader, cap: int, name: str, error: type[Exception]) -> bytes:
    """Read ``reader`` to its end, failing once more than ``cap`` bytes come out."""
    parts: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = reader.read(min(_CHUNK, cap + 1 - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
            if size > cap:
                raise IngestError.single(
                    f"member inflates past the limit of {cap} bytes", field=name
                )
    except (error, zlib.error, EOFError) as exc:
        raise IngestError.single(f"member is corrupt: {exc}", field=name) from None
    return b"".join(parts)
