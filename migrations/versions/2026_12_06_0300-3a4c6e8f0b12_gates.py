"""gates: release gates, one decision for a suite of benchmarks (issue 34)

Revision ID: 3a4c6e8f0b12
Revises: 38e5a1c0b7d4
Create Date: 2026-12-06 03:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3a4c6e8f0b12"
down_revision: str | Sequence[str] | None = "38e5a1c0b7d4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gates",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),  # fmt: skip
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),  # fmt: skip
        sa.Column("project_id", sa.Uuid(), sa.ForeignKey("projects.id", ondelete="CASCADE"),
                  nullable=False),  # fmt: skip
        sa.Column("model_name", sa.String(300), nullable=False),
        sa.Column("rule", sa.String(40), nullable=False),
        sa.Column("prediction", sa.String(16), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("benchmarks", sa.JSON(), nullable=False),
        sa.Column("items_used", sa.Integer(), nullable=False),
        sa.Column("items_total", sa.Integer(), nullable=False),
        sa.Column("baseline_values", sa.LargeBinary(), nullable=False),
        sa.Column("engine_state", sa.LargeBinary(), nullable=False),
        sa.Column("open_counts", sa.JSON(), nullable=False),
        sa.Column("open_items", sa.LargeBinary(), nullable=False),
        sa.Column("values", sa.LargeBinary(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
    )
    op.create_index("ix_gates_project_id", "gates", ["project_id"])
    op.create_index("ix_gates_project_created", "gates", ["project_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_gates_project_created", table_name="gates")
    op.drop_index("ix_gates_project_id", table_name="gates")
    op.drop_table("gates")
