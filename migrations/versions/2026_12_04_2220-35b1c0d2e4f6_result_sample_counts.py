"""model_results.sample_counts: samples behind each item's mean when they vary (issue 35)

K samples per item are stored as K samples, not K items: ``samples_per_item`` (K) and the per-item
``within_variance`` already exist; ``sample_counts`` (int32 little-endian bytes, one per item, 0
where not covered) holds the per-item number of samples when it is not K for every item (an
errored epoch missing). NULL: every covered item has ``samples_per_item`` samples. The archive
copies it like every other result column.

Revision ID: 35b1c0d2e4f6
Revises: 39b1e7c4d2a6
Create Date: 2026-12-04 22:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "35b1c0d2e4f6"
down_revision: str | Sequence[str] | None = "39b1e7c4d2a6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("model_results", "model_result_archive"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("sample_counts", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    for table in ("model_results", "model_result_archive"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("sample_counts")
