"""Every setting is documented in a README table row (so none is a hidden knob)."""

from __future__ import annotations

import re

from app.settings import REPO_ROOT, Settings


def test_every_setting_has_a_row_in_a_readme_table() -> None:
    rows = [
        line.split("|")[1]
        for line in (REPO_ROOT / "README.md").read_text().splitlines()
        if line.startswith("| `")
    ]
    documented = {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}
    env_names = {
        str(field.validation_alias or name).upper() for name, field in Settings.model_fields.items()
    }
    assert env_names - documented == set()
