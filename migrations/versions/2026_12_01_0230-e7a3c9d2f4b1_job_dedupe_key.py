"""jobs.dedupe_key: identical subset/analysis requests share one active job (single flight)

A partial unique index allows one queued or running job per key; terminal jobs leave it, so a
failed or cancelled computation can be asked for again.

Revision ID: e7a3c9d2f4b1
Revises: d4f1a8c2b6e9
Create Date: 2026-12-01 02:30:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e7a3c9d2f4b1"
down_revision: str | Sequence[str] | None = "d4f1a8c2b6e9"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "uq_jobs_dedupe_active"
ACTIVE = "dedupe_key IS NOT NULL AND status IN ('queued', 'running')"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("dedupe_key", sa.String(length=64), nullable=True))
    op.create_index(
        INDEX,
        "jobs",
        ["dedupe_key"],
        unique=True,
        postgresql_where=sa.text(ACTIVE),
        sqlite_where=sa.text(ACTIVE),
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("dedupe_key")
