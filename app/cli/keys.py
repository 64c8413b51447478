"""``benchslice keys`` and ``benchslice projects``: API keys with per-project roles, and the
projects that own benchmarks (local admin commands, against the configured database)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

keys_app = typer.Typer(
    help="Manage API keys (stored hashed; a new key is printed once).", no_args_is_help=True
)
projects_app = typer.Typer(
    help="Manage projects (each benchmark belongs to one; keys get roles on them).",
    no_args_is_help=True,
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


def _fail(detail: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {detail}", err=True)
    return typer.Exit(code)


def _pair_roles(projects: list[str], roles: list[str]) -> dict[str, str]:
    """``--project`` and ``--role`` as ``{project: role}``: one role applies to every project,
    or one role per project in order; no ``--project`` means the ``default`` project."""
    from app.services.access.keys import roles_from_pairs
    from app.services.access.projects import DEFAULT_PROJECT

    projects = projects or [DEFAULT_PROJECT]
    roles = roles or ["read"]
    if len(roles) == 1:
        roles = roles * len(projects)
    if len(roles) != len(projects):
        raise _fail("give one --role, or one --role per --project (in the same order)")
    return roles_from_pairs(zip(projects, roles, strict=True))


@keys_app.command(
    "create",
    epilog="Example: `benchslice keys create --name team-a-ci --project team-a --role write`",
)
def create(
    name: str = typer.Option(..., "--name", help="What the key is for, e.g. ci"),
    project: list[str] = typer.Option(
        [], "--project", help="Project the role is on (repeatable; default: default)"
    ),
    role: list[str] = typer.Option(
        [],
        "--role",
        help="read, write or admin (admin ⊃ write ⊃ read): one for every --project, or one "
        "per --project in order",
    ),
    scope: list[str] = typer.Option(
        [], "--scope", hidden=True, help="The pre-project spelling of --role"
    ),
    instance_admin: bool = typer.Option(
        False, "--instance-admin", help="Every role on every project (and the whole audit trail)"
    ),
    expires_in_days: float | None = typer.Option(
        None, "--expires-in-days", min=0.0, help="The key stops working after this many days"
    ),
) -> None:
    """Create a key and print it once (it cannot be shown again)."""
    from app.errors import DomainError
    from app.services.access.keys import create_key, describe_roles

    if any(s not in ("read", "write", "admin") for s in scope):
        raise _fail(f"unknown scope(s) {scope}; choose from read, write, admin")
    roles = role or ([max(scope, key=("read", "write", "admin").index)] if scope else [])
    expires = (
        datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days is not None else None
    )
    try:
        mapping = {} if instance_admin and not (project or roles) else _pair_roles(project, roles)
        with _session() as session:
            row, token = create_key(
                session, name, mapping, instance_admin=instance_admin, expires_at=expires
            )
            prefix, described = row.prefix, ",".join(describe_roles(row))
    except DomainError as exc:
        raise _fail(exc.detail) from None
    typer.echo(token)
    typer.echo(
        f"created key {prefix!r} ({name}, roles: {described}); store it now, it is not shown again",
        err=True,
    )


def _state(row: object, now: datetime) -> str:
    if row.revoked:  # type: ignore[attr-defined]
        return "revoked"
    expires = row.expires_at  # type: ignore[attr-defined]
    return "expired" if expires is not None and expires <= now else "active"


@keys_app.command("list", epilog="Example: `benchslice keys list`")
def list_() -> None:
    """List keys: prefix, name, project roles, state, expiry, last use; never the keys."""
    from app.services.access.keys import describe_roles, list_keys

    now = datetime.now(UTC)
    typer.echo("prefix\tname\troles\tstate\texpires\tlast used\trotated")
    with _session() as session:
        for k in list_keys(session):
            used = k.last_used_at.isoformat() if k.last_used_at else "never"
            expires = k.expires_at.isoformat() if k.expires_at else "never"
            rotated = k.rotated_at.isoformat() if k.rotated_at else "-"
            roles = ",".join(describe_roles(k)) or "-"
            typer.echo(
                f"{k.prefix}\t{k.name}\t{roles}\t{_state(k, now)}\t{expires}\t{used}\t{rotated}"
            )


@keys_app.command("rotate", epilog="Example: `benchslice keys rotate 3f9a1c2b7d4e --grace-hours 2`")
def rotate(
    prefix: str = typer.Argument(..., help="The key's prefix (from `keys list`)"),
    grace_hours: float = typer.Option(
        24.0, "--grace-hours", min=0.0, help="How long the old secret keeps working"
    ),
) -> None:
    """Give a key a new secret (same prefix and roles) and print it once; the old secret keeps
    working for the grace period."""
    from app.errors import DomainError
    from app.services.access.keys import rotate_key

    try:
        with _session() as session:
            row, token = rotate_key(session, prefix, grace=timedelta(hours=grace_hours))
            until = row.previous_valid_until
    except DomainError as exc:
        raise _fail(exc.detail, 1) from None
    typer.echo(token)
    old = f"until {until.isoformat()}" if until else "no longer"
    typer.echo(f"rotated {prefix}; the old secret works {old}", err=True)


@keys_app.command(
    "grant", epilog="Example: `benchslice keys grant 3f9a1c2b7d4e --project team-b --role read`"
)
def grant(
    prefix: str = typer.Argument(..., help="The key's prefix (from `keys list`)"),
    project: list[str] = typer.Option(..., "--project", help="Project (repeatable)"),
    role: list[str] = typer.Option(..., "--role", help="read, write or admin"),
) -> None:
    """Give an existing key a role on more projects (or change its role there)."""
    from app.errors import DomainError
    from app.services.access.keys import describe_roles, find_key, set_roles

    try:
        mapping = _pair_roles(project, role)
        with _session() as session:
            row = set_roles(session, find_key(session, prefix), mapping)
            described = ",".join(describe_roles(row))
    except DomainError as exc:
        raise _fail(exc.detail, 1) from None
    typer.echo(f"{prefix}\t{described}")


@keys_app.command("revoke", epilog="Example: `benchslice keys revoke 3f9a1c2b7d4e`")
def revoke(prefix: str = typer.Argument(..., help="The key's prefix (from `keys list`)")) -> None:
    """Revoke a key at once."""
    from app.errors import DomainError
    from app.services.access.keys import revoke_key

    try:
        with _session() as session:
            revoke_key(session, prefix)
    except DomainError as exc:
        raise _fail(exc.detail, 1) from None
    typer.echo(f"revoked {prefix}")


@projects_app.command("create", epilog="Example: `benchslice projects create team-a`")
def create_project(
    name: str = typer.Argument(..., help="Lower-case letters, digits, '.', '_', '-'"),
    public: bool = typer.Option(
        False, "--public", help="Every valid key may read this project's benchmarks"
    ),
) -> None:
    """Create a project."""
    from app.errors import DomainError
    from app.services.access.projects import create_project as create_

    try:
        with _session() as session:
            create_(session, name, public_read=public)
    except DomainError as exc:
        raise _fail(exc.detail, 1) from None
    typer.echo(f"created project {name}" + (" (public read)" if public else ""))


@projects_app.command("list", epilog="Example: `benchslice projects list`")
def list_projects() -> None:
    """List projects: name, public read, benchmarks, keys with a role."""
    from app.services.access.projects import default_project, list_projects, usage

    typer.echo("name\tpublic read\tbenchmarks\tkeys")
    with _session() as session:
        default_project(session)
        counts = usage(session)
        for p in list_projects(session):
            n_bench, n_keys = counts.get(p.id, (0, 0))
            typer.echo(f"{p.name}\t{'yes' if p.public_read else 'no'}\t{n_bench}\t{n_keys}")


@projects_app.command("set-public", epilog="Example: `benchslice projects set-public team-a --off`")
def set_public(
    name: str = typer.Argument(..., help="The project"),
    on: bool = typer.Option(True, "--on/--off", help="Readable by every valid key, or not"),
) -> None:
    """Make a project's benchmarks readable by every key (or only by its own keys)."""
    from app.errors import DomainError
    from app.services.access.projects import get_by_name, set_public_read

    try:
        with _session() as session:
            set_public_read(session, get_by_name(session, name), on)
    except DomainError as exc:
        raise _fail(exc.detail, 1) from None
    typer.echo(f"project {name}: public read {'on' if on else 'off'}")
