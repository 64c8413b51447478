"""Write the app's OpenAPI document to openapi/openapi.json (`make openapi`).

Usage: python openapi/export.py [--check]   (--check exits 1 when the committed file is stale)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC_PATH = ROOT / "openapi" / "openapi.json"


def render() -> str:
    sys.path.insert(0, str(ROOT))
    from app.main import create_app

    spec = create_app().openapi()
    return json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = SPEC_PATH.read_text() if SPEC_PATH.exists() else ""
        if current != text:
            print(f"{SPEC_PATH} is out of date: run `make openapi`", file=sys.stderr)
            return 1
        return 0
    SPEC_PATH.write_text(text)
    print(f"wrote {SPEC_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
