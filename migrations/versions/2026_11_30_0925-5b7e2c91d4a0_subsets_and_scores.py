"""subsets (content-addressed, packed) and subset scores

Revision ID: 5b7e2c91d4a0
Revises: 569ff45dbd36
Create Date: 2026-11-30 09:25:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5b7e2c91d4a0"
down_revision: str | Sequence[str] | None = "569ff45dbd36"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subsets",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("method", sa.String(length=64), nullable=False),
        sa.Column("size_requested", sa.Integer(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("estimator", sa.String(length=64), nullable=False),
        sa.Column("estimate_on", sa.String(length=16), nullable=False),
        sa.Column("signal", sa.String(length=16), nullable=False),
        sa.Column("n_candidates", sa.Integer(), nullable=False),
        sa.Column("source_models", sa.JSON(), nullable=False),
        sa.Column("indices", sa.LargeBinary(), nullable=False),
        sa.Column("weights", sa.LargeBinary(), nullable=False),
        sa.Column("fitted", sa.LargeBinary(), nullable=True),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.ForeignKeyConstraint(["benchmark_version_id"], ["benchmark_versions.id"],
                                name=op.f("fk_subsets_benchmark_version_id_benchmark_versions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_subsets_job_id_jobs"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subsets")),
    )
    with op.batch_alter_table("subsets") as batch:
        batch.create_index(batch.f("ix_subsets_benchmark_version_id"), ["benchmark_version_id"])
    op.create_table(
        "subset_scores",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("subset_id", sa.String(length=64), nullable=False),
        sa.Column("model_name", sa.String(length=300), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("subset_accuracy", sa.Float(), nullable=False),
        sa.Column("estimates", sa.JSON(), nullable=False),
        sa.Column("baseline", sa.JSON(), nullable=True),
        sa.Column("population_shift", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                  nullable=False),
        sa.ForeignKeyConstraint(["subset_id"], ["subsets.id"],
                                name=op.f("fk_subset_scores_subset_id_subsets"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subset_scores")),
    )
    with op.batch_alter_table("subset_scores") as batch:
        batch.create_index(batch.f("ix_subset_scores_subset_id"), ["subset_id"])
        batch.create_index(batch.f("ix_subset_scores_model_name"), ["model_name"])


def downgrade() -> None:
    with op.batch_alter_table("subset_scores") as batch:
        batch.drop_index(batch.f("ix_subset_scores_model_name"))
        batch.drop_index(batch.f("ix_subset_scores_subset_id"))
    op.drop_table("subset_scores")
    with op.batch_alter_table("subsets") as batch:
        batch.drop_index(batch.f("ix_subsets_benchmark_version_id"))
    op.drop_table("subsets")
