"""model_results: repeated samples (K, per-item within variance) and evaluation configuration

Revision ID: d4f1a8c2b6e9
Revises: 9c4e2a7b1d53
Create Date: 2026-12-01 02:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d4f1a8c2b6e9"
down_revision: str | Sequence[str] | None = "9c4e2a7b1d53"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model_results") as batch:
        batch.add_column(sa.Column("samples_per_item", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("within_variance", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("config_fingerprint", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("eval_config", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_results") as batch:
        batch.drop_column("eval_config")
        batch.drop_column("config_fingerprint")
        batch.drop_column("within_variance")
        batch.drop_column("samples_per_item")
