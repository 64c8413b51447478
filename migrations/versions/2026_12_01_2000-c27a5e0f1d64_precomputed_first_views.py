"""Views the worker precomputes after an upload, keyed by version and results stamp (issue 27)

Revision ID: c27a5e0f1d64
Revises: b26f0c3a9d71
Create Date: 2026-12-01 20:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.db.base import UTCDateTime

revision: str = "c27a5e0f1d64"
down_revision: str | Sequence[str] | None = "b26f0c3a9d71"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "precomputed_views",
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("stamp", sa.String(length=80), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_version_id"],
            ["benchmark_versions.id"],
            name="fk_precomputed_views_benchmark_version_id_benchmark_versions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("benchmark_version_id", "name", name="pk_precomputed_views"),
    )


def downgrade() -> None:
    op.drop_table("precomputed_views")
