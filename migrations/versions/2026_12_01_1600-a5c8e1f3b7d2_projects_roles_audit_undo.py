"""projects own benchmarks; per-project key roles; key life cycle; audit trail; undo

* ``projects`` (+ the ``default`` project, which every existing benchmark joins);
  ``benchmarks.project_id`` (NOT NULL after the back-fill).
* ``api_key_roles``: each existing key keeps its scope as its role on ``default`` (the highest
  of its scopes: admin > write > read); ``api_keys.scopes`` is dropped (the downgrade rebuilds
  it from the roles). ``api_keys`` gains ``instance_admin``, ``expires_at`` and the rotation
  columns (``previous_key_hash``, ``previous_valid_until``, ``rotated_at``).
* ``audit_events``: the append-only trail of writes.
* ``model_result_archive``: replaced or deleted results, kept for restore;
  ``benchmark_versions.retired_at``.

Revision ID: a5c8e1f3b7d2
Revises: e7a3c9d2f4b1
Create Date: 2026-12-01 16:00:00

"""

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a5c8e1f3b7d2"
down_revision: str | Sequence[str] | None = "e7a3c9d2f4b1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_PROJECT = "default"
ROLES = ("read", "write", "admin")

projects = sa.table(
    "projects",
    sa.column("id", sa.Uuid()),
    sa.column("name", sa.String()),
    sa.column("public_read", sa.Boolean()),
)
api_keys = sa.table("api_keys", sa.column("id", sa.Uuid()), sa.column("scopes", sa.JSON()))
key_roles = sa.table(
    "api_key_roles",
    sa.column("key_id", sa.Uuid()),
    sa.column("project_id", sa.Uuid()),
    sa.column("role", sa.String()),
)
benchmarks = sa.table("benchmarks", sa.column("project_id", sa.Uuid()))


def _now() -> sa.Column:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "projects",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("public_read", sa.Boolean(), nullable=False),
        _now(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    default_id = uuid.uuid4()
    bind.execute(
        projects.insert().values(id=default_id, name=DEFAULT_PROJECT, public_read=False)
    )

    with op.batch_alter_table("benchmarks") as batch:
        batch.add_column(sa.Column("project_id", sa.Uuid(), nullable=True))
    bind.execute(benchmarks.update().values(project_id=default_id))
    with op.batch_alter_table("benchmarks") as batch:
        batch.alter_column("project_id", existing_type=sa.Uuid(), nullable=False)
        batch.create_foreign_key(
            op.f("fk_benchmarks_project_id_projects"),
            "projects",
            ["project_id"],
            ["id"],
            ondelete="RESTRICT",
        )
        batch.create_index(op.f("ix_benchmarks_project_id"), ["project_id"], unique=False)

    op.create_table(
        "api_key_roles",
        sa.Column("key_id", sa.Uuid(), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_api_key_roles_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_api_key_roles_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("key_id", "project_id", name=op.f("pk_api_key_roles")),
    )
    op.create_index(
        op.f("ix_api_key_roles_project_id"), "api_key_roles", ["project_id"], unique=False
    )
    rows = bind.execute(sa.select(api_keys.c.id, api_keys.c.scopes)).all()
    for key_id, scopes in rows:
        held = [s for s in (scopes or []) if s in ROLES]
        role = max(held, key=ROLES.index) if held else "read"
        bind.execute(key_roles.insert().values(key_id=key_id, project_id=default_id, role=role))
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(
            sa.Column("instance_admin", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("previous_key_hash", sa.String(length=255), nullable=True))
        batch.add_column(
            sa.Column("previous_valid_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch.add_column(sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=True))
        batch.drop_column("scopes")
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("instance_admin", existing_type=sa.Boolean(), server_default=None)

    with op.batch_alter_table("benchmark_versions") as batch:
        batch.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("key_id", sa.String(length=64), nullable=False),
        sa.Column("key_name", sa.String(length=200), nullable=False),
        sa.Column("project_id", sa.Uuid(), nullable=True),
        sa.Column("project_name", sa.String(length=100), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("benchmark_id", sa.Uuid(), nullable=True),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(op.f("ix_audit_events_at"), "audit_events", ["at"], unique=False)
    op.create_index(op.f("ix_audit_events_key_id"), "audit_events", ["key_id"], unique=False)
    op.create_index(op.f("ix_audit_events_action"), "audit_events", ["action"], unique=False)
    op.create_index(
        "ix_audit_events_project_id_id", "audit_events", ["project_id", "id"], unique=False
    )
    op.create_index(
        "ix_audit_events_benchmark_id", "audit_events", ["benchmark_id"], unique=False
    )

    op.create_table(
        "model_result_archive",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("model_id", sa.Uuid(), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("result_id", sa.Uuid(), nullable=False),
        sa.Column("result_created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("binary", sa.Boolean(), nullable=False),
        sa.Column("correct", sa.LargeBinary(), nullable=False),
        sa.Column("confidence", sa.LargeBinary(), nullable=True),
        sa.Column("coverage", sa.LargeBinary(), nullable=True),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("source_format", sa.String(length=32), nullable=True),
        sa.Column("metric", sa.String(length=64), nullable=True),
        sa.Column("samples_per_item", sa.Integer(), nullable=True),
        sa.Column("within_variance", sa.LargeBinary(), nullable=True),
        sa.Column("config_fingerprint", sa.String(length=64), nullable=True),
        sa.Column("eval_config", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["benchmark_version_id"],
            ["benchmark_versions.id"],
            name=op.f("fk_model_result_archive_benchmark_version_id_benchmark_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_result_archive_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_result_archive")),
    )
    op.create_index(
        "ix_model_result_archive_version_model",
        "model_result_archive",
        ["benchmark_version_id", "model_id"],
        unique=False,
    )
    op.create_index(
        op.f("ix_model_result_archive_archived_at"),
        "model_result_archive",
        ["archived_at"],
        unique=False,
    )


def downgrade() -> None:
    bind = op.get_bind()
    op.drop_index(op.f("ix_model_result_archive_archived_at"), table_name="model_result_archive")
    op.drop_index("ix_model_result_archive_version_model", table_name="model_result_archive")
    op.drop_table("model_result_archive")
    for name in (
        "ix_audit_events_benchmark_id",
        "ix_audit_events_project_id_id",
        op.f("ix_audit_events_action"),
        op.f("ix_audit_events_key_id"),
        op.f("ix_audit_events_at"),
    ):
        op.drop_index(name, table_name="audit_events")
    op.drop_table("audit_events")
    with op.batch_alter_table("benchmark_versions") as batch:
        batch.drop_column("retired_at")

    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("scopes", sa.JSON(), nullable=True))
    best: dict[object, str] = {}  # a key's highest role on any project becomes its scope
    for key_id, role in bind.execute(sa.select(key_roles.c.key_id, key_roles.c.role)).all():
        role = role if role in ROLES else "read"
        if ROLES.index(role) >= ROLES.index(best.get(key_id, "read")):
            best[key_id] = role
    for key_id in bind.execute(sa.select(api_keys.c.id)).scalars().all():
        scopes = [best.get(key_id, "read")]
        bind.execute(api_keys.update().where(api_keys.c.id == key_id).values(scopes=scopes))
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("scopes", existing_type=sa.JSON(), nullable=False)
        batch.drop_column("rotated_at")
        batch.drop_column("previous_valid_until")
        batch.drop_column("previous_key_hash")
        batch.drop_column("expires_at")
        batch.drop_column("instance_admin")
    op.drop_index(op.f("ix_api_key_roles_project_id"), table_name="api_key_roles")
    op.drop_table("api_key_roles")

    with op.batch_alter_table("benchmarks") as batch:
        batch.drop_index(op.f("ix_benchmarks_project_id"))
        batch.drop_constraint(op.f("fk_benchmarks_project_id_projects"), type_="foreignkey")
        batch.drop_column("project_id")
    op.drop_table("projects")
