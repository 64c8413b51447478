"""precomputed_views.payload stored out of line without compression (issue 27, stored pair counts)

The worker's stored pair counts are an m x m matrix (194 MiB at 10,000 models x 1,000 items) that
Postgres's TOAST compression does not shrink but spends seconds trying to (a 191 MiB bytea took
10.3 s to write with the default EXTENDED storage, 2.9 s with EXTERNAL; reads 2.7 s either way).
SQLite has no storage modes: nothing to do there.

Revision ID: c27c9e4b2a18
Revises: c27a5e0f1d64
Create Date: 2026-12-01 21:00:00

"""

from collections.abc import Sequence

from alembic import op

revision: str = "c27c9e4b2a18"
down_revision: str | Sequence[str] | None = "c27a5e0f1d64"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE precomputed_views ALTER COLUMN payload SET STORAGE EXTERNAL")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE precomputed_views ALTER COLUMN payload SET STORAGE EXTENDED")
