"""app/ingest/archives.py: an npz is read as np.load reads it, measured first; corrupt or
crafted archives are ArchiveRefused (never another exception: those were 500s in the fuzz run of
bench/bench_transport_fuzz.py)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from app.ingest.archives import ArchiveRefused, load_npz, parquet_table


def _npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def test_reads_what_np_load_reads() -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "correct": rng.random((5, 7)),
        "fortran": np.asfortranarray(rng.random((3, 4))),
        "models": np.array(["a", "bb", "ccc"]),
        "mask": rng.random((2, 2)) < 0.5,
        "empty": np.zeros((0, 3)),
    }
    data = _npz(**arrays)
    got = load_npz(data)
    with np.load(io.BytesIO(data)) as expected:
        assert set(got) == set(expected.files)
        for name in expected.files:
            np.testing.assert_array_equal(got[name], expected[name])
            assert got[name].dtype == expected[name].dtype


def _crafted(shape: tuple, descr: str = "<f8", data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("correct.npy", "w", force_zip64=True) as f:
            npy_format.write_array_header_1_0(
                f, {"descr": descr, "fortran_order": False, "shape": shape}
            )
            f.write(data)
    return buf.getvalue()


def test_limits_are_checked_from_the_headers() -> None:
    with pytest.raises(ArchiveRefused, match="values") as info:
        load_npz(_crafted((10**6, 10**7)))  # 10^13 values claimed, 0 bytes held
    assert info.value.field == "correct"
    with pytest.raises(ArchiveRefused, match=r"truncated|header states"):
        load_npz(_crafted((4, 4), data=bytes(16)))  # 128 bytes claimed, 16 held
    with pytest.raises(ArchiveRefused, match="object"):
        load_npz(_crafted((2,), descr="|O"))
    with pytest.raises(ArchiveRefused, match="inflates to"):
        load_npz(_npz(correct=np.zeros((100, 100))), max_bytes=50_000)


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_corrupt_archives_are_refused(cut: float) -> None:
    data = bytearray(_npz(correct=np.random.default_rng(1).random((30, 30))))
    for pos in range(int(len(data) * cut), int(len(data) * cut) + 6):
        data[pos] ^= 0x5A
    with pytest.raises(ArchiveRefused):
        load_npz(bytes(data))


def test_odd_zip_headers_are_refused() -> None:
    data = bytearray(_npz(correct=np.zeros(3)))
    central = data.rfind(b"PK\x01\x02")
    data[central + 6] = 97  # "version needed to extract": 9.7 (NotImplementedError)
    with pytest.raises(ArchiveRefused):
        load_npz(bytes(data))
    with pytest.raises(ArchiveRefused):
        load_npz(b"PK\x03\x04" + bytes(40))


def test_parquet_is_measured_from_its_footer() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"x": np.zeros(100_000)}), buf, compression="zstd")
    assert parquet_table(buf.getvalue()).num_rows == 100_000
    with pytest.raises(ArchiveRefused, match="decodes to"):  # 800 kB from 848 bytes
        parquet_table(buf.getvalue(), max_bytes=100_000)
    buf = io.BytesIO()  # a million copies of one string: a few kB encoded
    pq.write_table(pa.table({"doc": ["x" * 1000] * 1_000_000}), buf, compression="zstd")
    assert len(buf.getvalue()) < 200_000  # 5,000:1
    with pytest.raises(ArchiveRefused, match="decodes to 1,000,000,000 bytes"):
        parquet_table(buf.getvalue())
    with pytest.raises(ArchiveRefused):
        parquet_table(b"PAR1" + bytes(20) + b"PAR1")
