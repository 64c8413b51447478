"""model_results.item_costs / cost_source: what each item cost the model (issue 37)

float32 bytes of a (4, n_items) matrix (input tokens, output tokens, seconds, US dollars; NaN =
not reported), and where the figures came from; NULL when the upload carried no cost. The archive
copies both so an undo restores them.

Revision ID: 37c0a1b2d3e4
Revises: c27c9e4b2a18
Create Date: 2026-12-04 22:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "37c0a1b2d3e4"
down_revision: str | Sequence[str] | None = "c27c9e4b2a18"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("model_results", "model_result_archive")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("item_costs", sa.LargeBinary(), nullable=True))
            batch.add_column(sa.Column("cost_source", sa.String(length=64), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cost_source")
            batch.drop_column("item_costs")
