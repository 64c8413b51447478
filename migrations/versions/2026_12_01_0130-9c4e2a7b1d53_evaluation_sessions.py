"""evaluation_sessions (sequential / adaptive evaluation, issue 12) and irt_fits

Revision ID: 9c4e2a7b1d53
Revises: 3e8b6d2f1c47
Create Date: 2026-12-01 01:30:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9c4e2a7b1d53"
down_revision: str | Sequence[str] | None = "3e8b6d2f1c47"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evaluation_sessions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("model_name", sa.String(length=300), nullable=False),
        sa.Column("baseline_name", sa.String(length=300), nullable=True),
        sa.Column("goal", sa.String(length=16), nullable=False),
        sa.Column("policy", sa.String(length=16), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("margin", sa.Float(), nullable=True),
        sa.Column("precision", sa.Float(), nullable=True),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("max_items", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("store_results", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("items_used", sa.Integer(), nullable=False),
        sa.Column("open_size", sa.Integer(), nullable=False),
        sa.Column("order", sa.LargeBinary(), nullable=False),
        sa.Column("values", sa.LargeBinary(), nullable=False),
        sa.Column("binary", sa.Boolean(), nullable=False),
        sa.Column("baseline_values", sa.LargeBinary(), nullable=True),
        sa.Column("engine_state", sa.LargeBinary(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("stored_result", sa.String(length=32), nullable=True),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_version_id"],
            ["benchmark_versions.id"],
            name=op.f("fk_evaluation_sessions_benchmark_version_id_benchmark_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluation_sessions")),
    )
    with op.batch_alter_table("evaluation_sessions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_evaluation_sessions_benchmark_version_id"),
            ["benchmark_version_id"],
            unique=False,
        )
    op.create_table(
        "irt_fits",
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("dims", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("n_models", sa.Integer(), nullable=False),
        sa.Column("models", sa.JSON(), nullable=False),
        sa.Column("a", sa.LargeBinary(), nullable=False),
        sa.Column("offset", sa.LargeBinary(), nullable=False),
        sa.Column("converged", sa.Boolean(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_version_id"],
            ["benchmark_versions.id"],
            name=op.f("fk_irt_fits_benchmark_version_id_benchmark_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_irt_fits_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("benchmark_version_id", name=op.f("pk_irt_fits")),
    )


def downgrade() -> None:
    op.drop_table("irt_fits")
    with op.batch_alter_table("evaluation_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluation_sessions_benchmark_version_id"))
    op.drop_table("evaluation_sessions")
