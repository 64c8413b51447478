"""Cells safe to open in a spreadsheet (CSV and Markdown exports).

A text cell beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)``, ``@SUM(...)``, DDE).
Item ids, subtasks and model names come from uploads, so every export writes such cells with a
leading ``'`` (the OWASP "CSV injection" advice): the spreadsheet shows the text, not a formula.
Numbers are written as numbers (a negative difference stays ``-0.05``): only text is changed.
"""

from __future__ import annotations

from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_text(value: str) -> str:
    """``value`` with a leading ``'`` when a spreadsheet would read it as a formula."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def safe_cell(value: Any) -> Any:
    """A CSV cell: text neutralised by :func:`safe_text`, numbers and booleans as they are."""
    return safe_text(value) if isinstance(value, str) else value


def safe_row(values: Any) -> list[Any]:
    return [safe_cell(v) for v in values]
