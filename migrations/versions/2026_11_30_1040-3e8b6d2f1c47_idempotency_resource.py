"""idempotency_keys.resource: what a stored response describes, to drop it when that changes

Revision ID: 3e8b6d2f1c47
Revises: a7d1c3e5f920
Create Date: 2026-11-30 10:40:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3e8b6d2f1c47"
down_revision: str | Sequence[str] | None = "a7d1c3e5f920"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("resource", sa.String(length=200), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_idempotency_keys_resource"), ["resource"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotency_keys_resource"))
        batch_op.drop_column("resource")
