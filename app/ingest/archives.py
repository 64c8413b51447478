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
import zlib
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
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
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
            except ArchiveRefused:
                raise
            except (  # what zipfile and zlib raise on a corrupt member
                zipfile.BadZipFile,
                zlib.error,
                EOFError,
                OSError,
                ValueError,
                NotImplementedError,
            ) as exc:
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
    """A parquet file's table, measured before it is decoded.

    From the footer: rows, leaf values (``num_values`` of every column chunk) and the pages'
    uncompressed size. Dictionary or run-length encoding can still make a few pages decode to
    much more (a million copies of one long string), so top-level string and binary columns are
    read as dictionaries (memory: the dictionary and the indices) and their decoded size is
    summed from the dictionary's value lengths before anything expands them. Nested string
    lists are bounded by their leaf values only."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(data))
        meta = parquet.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        inflated = sum(g.total_byte_size for g in groups)
        leaves = sum(g.column(j).num_values for g in groups for j in range(g.num_columns))
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:  # UnicodeDecodeError in a footer
        raise ArchiveRefused(f"unreadable parquet file: {exc}") from None
    if meta.num_rows > MAX_PARQUET_ROWS:
        raise ArchiveRefused(f"{meta.num_rows:,} rows; the limit is {MAX_PARQUET_ROWS:,}")
    if leaves > MAX_ARRAY_VALUES:
        raise ArchiveRefused(f"{leaves:,} values; the limit is {MAX_ARRAY_VALUES:,}")
    if inflated > max_bytes:
        raise ArchiveRefused(
            f"the parquet file inflates to {inflated:,} bytes; the limit is {max_bytes:,}"
        )
    textual = [
        f.name
        for f in schema
        if pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_binary(f.type)
    ]
    try:
        reader = pq.ParquetFile(io.BytesIO(data), read_dictionary=textual or None)
        table = reader.read(use_threads=False)
        decoded = 0
        for name in table.column_names:
            column = table.column(name)
            for chunk in column.chunks:
                if pa.types.is_dictionary(chunk.type):
                    lengths = pc.binary_length(chunk.dictionary).fill_null(0)
                    taken = pc.take(lengths, chunk.indices.fill_null(0))
                    decoded += int(pc.sum(taken).as_py() or 0)
                else:
                    decoded += chunk.nbytes
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ArchiveRefused(f"unreadable parquet file: {exc}") from None
    if decoded > max_bytes:
        raise ArchiveRefused(
            f"the parquet file decodes to {decoded:,} bytes; the limit is {max_bytes:,}"
        )
    return table
