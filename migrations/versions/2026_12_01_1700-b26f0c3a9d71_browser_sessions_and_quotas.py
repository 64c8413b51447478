"""Browser sessions, shared server secrets, and the key that submitted each job (quotas)

Revision ID: b26f0c3a9d71
Revises: a5c8e1f3b7d2
Create Date: 2026-12-01 16:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.base import UTCDateTime

revision: str = "b26f0c3a9d71"
down_revision: str | Sequence[str] | None = "a5c8e1f3b7d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "browser_sessions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name="fk_browser_sessions_key_id_api_keys",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_browser_sessions"),
        sa.UniqueConstraint("token_hash", name="uq_browser_sessions_token_hash"),
    )
    op.create_index("ix_browser_sessions_key_id", "browser_sessions", ["key_id"])
    op.create_index("ix_browser_sessions_expires_at", "browser_sessions", ["expires_at"])
    op.create_table(
        "server_secrets",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_server_secrets"),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))
    op.create_index("ix_jobs_owner", "jobs", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_jobs_owner", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("owner")
    op.drop_table("server_secrets")
    op.drop_index("ix_browser_sessions_expires_at", table_name="browser_sessions")
    op.drop_index("ix_browser_sessions_key_id", table_name="browser_sessions")
    op.drop_table("browser_sessions")
