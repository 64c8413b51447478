"""Compressed uploads measured before anything is inflated (issue 39, "a compressed bomb").

A 2 MB ``.npz`` of zeros inflates to 2 GB: ``np.load`` trusts the archive and allocates what
its headers say. Here every member of the zip is measured from the central directory (its
uncompressed size) and every ``.npy`` header is read (a few hundred bytes, its shape and dtype)
*before* an array is read, and refused when the archive would inflate past
:data:`MAX_DECOMPRESSED_BYTES` or an array holds more than :data:`MAX_ARRAY_VALUES` values. An
array is then read from the member stream at exactly the size its header states; zipfile stops
inflating at the central directory's size, so a member whose data is longer than it claims is a
CRC error, not more memory. Parquet (details files) is measured the same way from its footer
(the uncompressed size of every row group).

Hand-written on top of :mod:`zipfile` and :mod:`numpy.lib.format` (both standard): ``np.load``
has no size limits, and no maintained library bounds an npz.
"""

from __future__ import annotations

import io
import math
import zipfile
from typing import Any

import numpy as np
from numpy.lib import format as npy_format

# the largest matrix upload: 16.7 M values (20,000 models x 840 items, or 1,300 x 12,900)
MAX_ARRAY_VALUES = 1 << 24
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 16
MAX_PARQUET_ROWS = 2_000_000


class ArchiveRefused(ValueError):
    """The archive is malformed or would inflate past its limits (``field``: what is at
    fault: ``body`` or the array's name)."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


def _read_header(stream: Any, name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            return npy_format.read_array_header_1_0(stream)
        if version in ((2, 0), (3, 0)):
            return npy_format.read_array_header_2_0(stream)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise ArchiveRefused(f"{name}: not a .npy array ({exc})", field=name) from None
    raise ArchiveRefused(f"{name}: unsupported .npy version {version}", field=name)


def load_npz(
    data: bytes,
    *,
    max_bytes: int = MAX_DECOMPRESSED_BYTES,
    max_values: int = MAX_ARRAY_VALUES,
) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` upload, each measured from its headers before it is read.

    Raises
    ------
    ArchiveRefused
        Not a zip of ``.npy`` members; more than :data:`MAX_MEMBERS` members; a total
        uncompressed size over ``max_bytes``; an array of object dtype, of more than
        ``max_values`` values, or whose header disagrees with its member's size.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ArchiveRefused(f"not an .npz matrix: {exc}") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise ArchiveRefused(f"{len(members)} arrays in the archive; at most {MAX_MEMBERS}")
        total = sum(m.file_size for m in members)
        if total > max_bytes:
            raise ArchiveRefused(
                f"the archive inflates to {total:,} bytes; the limit is {max_bytes:,}"
            )
        arrays: dict[str, np.ndarray] = {}
        for member in members:
            name = member.filename.removesuffix(".npy")
            if not member.filename.endswith(".npy") or member.is_dir():
                raise ArchiveRefused(f"{member.filename!r} is not a .npy member", field=name)
            try:
                with archive.open(member) as stream:
                    shape, fortran, dtype = _read_header(stream, name)
                    arrays[name] = _read_array(
                        stream, member, name, shape, fortran, dtype, max_values
                    )
            except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as exc:
                raise ArchiveRefused(f"{name}: unreadable ({exc})", field=name) from None
    return arrays


def _read_array(
    stream: Any,
    member: zipfile.ZipInfo,
    name: str,
    shape: tuple[int, ...],
    fortran: bool,
    dtype: np.dtype,
    max_values: int,
) -> np.ndarray:
    if dtype.hasobject:
        raise ArchiveRefused(f"{name}: object arrays are not accepted", field=name)
    count = math.prod(shape)
    if count > max_values:
        raise ArchiveRefused(
            f"{name}: {count:,} values (shape {shape}); an array holds at most {max_values:,}",
            field=name,
        )
    size = count * dtype.itemsize
    if size > member.file_size:  # the header claims more than the member holds
        raise ArchiveRefused(
            f"{name}: the header states {size:,} bytes of data, the archive holds "
            f"{member.file_size:,}",
            field=name,
        )
    array = np.empty(count, dtype=dtype)  # filled in place: one copy of the data in memory
    view = memoryview(array).cast("B") if size else memoryview(b"")
    filled = 0
    while filled < size:
        got = stream.readinto(view[filled:])
        if not got:
            raise ArchiveRefused(f"{name}: truncated array data", field=name)
        filled += got
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def parquet_table(data: bytes, *, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Any:
    """A parquet file's table, measured from its footer first (rows, uncompressed bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveRefused(f"unreadable parquet file: {exc}") from None
    meta = parquet.metadata
    inflated = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if meta.num_rows > MAX_PARQUET_ROWS:
        raise ArchiveRefused(f"{meta.num_rows:,} rows; the limit is {MAX_PARQUET_ROWS:,}")
    if inflated > max_bytes:
        raise ArchiveRefused(
            f"the parquet file inflates to {inflated:,} bytes; the limit is {max_bytes:,}"
        )
    try:
        return parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise ArchiveRefused(f"unreadable parquet file: {exc}") from None
