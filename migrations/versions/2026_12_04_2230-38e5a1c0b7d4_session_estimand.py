"""evaluation_sessions.estimand: which accuracy a session's intervals are about (issue 38)

``benchmark``: the mean over the benchmark's N items (finite-population CS, exact at N; every
session before this revision); ``generalized``: the mean over items like these (no
finite-population correction, never exact).

Revision ID: 38e5a1c0b7d4
Revises: 35b1c0d2e4f6 (chained after main merged issue 37's head)
Create Date: 2026-12-04 22:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "38e5a1c0b7d4"
down_revision: str | Sequence[str] | None = "35b1c0d2e4f6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evaluation_sessions") as batch:
        batch.add_column(
            sa.Column("estimand", sa.String(16), nullable=False, server_default="benchmark")
        )


def downgrade() -> None:
    with op.batch_alter_table("evaluation_sessions") as batch:
        batch.drop_column("estimand")
