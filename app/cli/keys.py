"""``benchslice keys``: create, list and revoke API keys (admin, against the configured DB)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

keys_app = typer.Typer(
    help="Manage API keys (stored hashed; a new key is printed once).", no_args_is_help=True
)


@contextmanager
def _session() -> Iterator[Session]:
    from app.db.session import make_engine, make_sessionmaker
    from app.settings import get_settings

    engine = make_engine(get_settings())
    try:
        with make_sessionmaker(engine)() as session, session.begin():
            yield session
    finally:
        engine.dispose()


@keys_app.command("create", epilog="Example: `benchslice keys create --name ci --scope write`")
def create(
    name: str = typer.Option(..., "--name", help="What the key is for, e.g. ci"),
    scope: list[str] = typer.Option(
        ["read"], "--scope", help="read, write or admin (repeatable; admin ⊃ write ⊃ read)"
    ),
) -> None:
    """Create a key and print it once (it cannot be shown again)."""
    from app.errors import DomainError
    from app.services.platform.keys import create_key

    try:
        with _session() as session:
            row, token = create_key(session, name, scope)
            prefix, scopes = row.prefix, ",".join(row.scopes)
    except DomainError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(2) from None
    typer.echo(token)
    typer.echo(
        f"created key {prefix!r} ({name}, scopes: {scopes}); store it now, it is not shown again",
        err=True,
    )


@keys_app.command("list", epilog="Example: `benchslice keys list`")
def list_() -> None:
    """List keys (prefix, name, scopes, last use); never the keys themselves."""
    from app.services.platform.keys import list_keys

    with _session() as session:
        for k in list_keys(session):
            state = "revoked" if k.revoked else "active"
            used = k.last_used_at.isoformat() if k.last_used_at else "never"
            typer.echo(f"{k.prefix}\t{k.name}\t{','.join(k.scopes)}\t{state}\tlast used {used}")


@keys_app.command("revoke", epilog="Example: `benchslice keys revoke 3f9a1c2b7d4e`")
def revoke(prefix: str = typer.Argument(..., help="The key's prefix (from `keys list`)")) -> None:
    """Revoke a key at once."""
    from app.errors import DomainError
    from app.services.platform.keys import revoke_key

    try:
        with _session() as session:
            revoke_key(session, prefix)
    except DomainError as exc:
        typer.echo(f"error: {exc.detail}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"revoked {prefix}")
