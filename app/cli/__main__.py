"""``python -m app.cli``: the same as the ``benchslice`` command."""

from app.cli import app

app()
