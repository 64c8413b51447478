"""tiktoken's ``o200k_base`` file, offline: mockllm counts tokens with it.

The quicktok-v1 wheel (a dev dependency) ships the o200k vocabulary as a binary table
(``u32 count``, then ``u16 length, bytes, u32 rank`` per token). Written back in tiktoken's text
format it is byte for byte OpenAI's ``o200k_base.tiktoken``: the sha256 tiktoken pins is
checked before the file is used. ``python tests/support/o200k.py`` prints a TIKTOKEN_CACHE_DIR
holding it.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import sys
import tempfile
from importlib import resources
from pathlib import Path

URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken's pin


def tiktoken_cache_dir(root: Path | None = None) -> Path:
    """A directory tiktoken reads (``TIKTOKEN_CACHE_DIR``) with ``o200k_base`` in it."""
    root = root or Path(tempfile.gettempdir()) / "benchslice-tiktoken"
    target = root / hashlib.sha1(URL.encode()).hexdigest()  # tiktoken's cache file name
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == SHA256:
        return root
    table = (resources.files("quicktok") / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", table, 0)
    offset, ranks = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", table, offset)
        token = table[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", table, offset + 2 + length)
        offset += 6 + length
        ranks.append((rank, token))
    text = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in sorted(ranks))
    if hashlib.sha256(text).hexdigest() != SHA256:
        raise RuntimeError("quicktok's o200k table does not rebuild tiktoken's o200k_base")
    root.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(text)
    tmp.replace(target)
    return root


if __name__ == "__main__":
    sys.stdout.write(f"{tiktoken_cache_dir()}\n")
