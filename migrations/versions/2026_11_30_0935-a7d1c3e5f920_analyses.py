"""analyses (MDAD + agreement curves per benchmark version) and their chunks of runs

Revision ID: a7d1c3e5f920
Revises: 5b7e2c91d4a0
Create Date: 2026-11-30 09:35:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7d1c3e5f920"
down_revision: str | Sequence[str] | None = "5b7e2c91d4a0"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "analyses",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("methods", sa.JSON(), nullable=False),
        sa.Column("sizes", sa.JSON(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("n_sources", sa.Integer(), nullable=False),
        sa.Column("n_targets", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("gap", sa.Float(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("protocol", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["benchmark_version_id"],
            ["benchmark_versions.id"],
            name=op.f("fk_analyses_benchmark_version_id_benchmark_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_analyses_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_analyses")),
        sa.UniqueConstraint("job_id", name=op.f("uq_analyses_job_id")),
    )
    with op.batch_alter_table("analyses", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_analyses_benchmark_version_id"), ["benchmark_version_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_analyses_created_at"), ["created_at"], unique=False)
    op.create_table(
        "analysis_chunks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("run_start", sa.Integer(), nullable=False),
        sa.Column("run_stop", sa.Integer(), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_analysis_chunks_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_analysis_chunks")),
        sa.UniqueConstraint("job_id", "run_start", name="uq_analysis_chunks_job_run"),
    )
    with op.batch_alter_table("analysis_chunks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_analysis_chunks_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("analysis_chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_analysis_chunks_job_id"))
    op.drop_table("analysis_chunks")
    with op.batch_alter_table("analyses", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_analyses_created_at"))
        batch_op.drop_index(batch_op.f("ix_analyses_benchmark_version_id"))
    op.drop_table("analyses")
