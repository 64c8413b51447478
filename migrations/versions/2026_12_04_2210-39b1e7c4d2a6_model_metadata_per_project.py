"""model metadata per project (issue 39): ``model_metadata`` (project, model) holds params_b,
family and tags; ``models`` keeps only the name

Before, ``models.params_b`` / ``family`` / ``tags`` were shared by every project: project B's
upload of a model changed what project A saw of it (and showed B A's values). The upgrade gives
every project that holds results (current or archived) of a model its own copy of the shared
values, so every project sees exactly what it saw before, then drops the shared columns. The
downgrade puts back, per model, the copy updated last (the shared row cannot hold several).

Revision ID: 39b1e7c4d2a6
Revises: 37c0a1b2d3e4
Create Date: 2026-12-04 22:00:00

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "39b1e7c4d2a6"
down_revision: str | Sequence[str] | None = "37c0a1b2d3e4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (project, model) pairs with results, current or archived
_PAIRS = """
    SELECT b.project_id AS project_id, r.model_id AS model_id
      FROM model_results r
      JOIN benchmark_versions v ON v.id = r.benchmark_version_id
      JOIN benchmarks b ON b.id = v.benchmark_id
    UNION
    SELECT b.project_id, a.model_id
      FROM model_result_archive a
      JOIN benchmark_versions v ON v.id = a.benchmark_version_id
      JOIN benchmarks b ON b.id = v.benchmark_id
"""


def upgrade() -> None:
    op.create_table(
        "model_metadata",
        sa.Column("project_id", sa.Uuid(), nullable=False),
        sa.Column("model_id", sa.Uuid(), nullable=False),
        sa.Column("params_b", sa.Float(), nullable=True),
        sa.Column("family", sa.String(length=200), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
            name=op.f("fk_model_metadata_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_model_metadata_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("project_id", "model_id", name=op.f("pk_model_metadata")),
    )
    with op.batch_alter_table("model_metadata") as batch:
        batch.create_index(batch.f("ix_model_metadata_model_id"), ["model_id"], unique=False)
    op.execute(
        "INSERT INTO model_metadata "
        "(project_id, model_id, params_b, family, tags, created_at, updated_at) "
        "SELECT p.project_id, m.id, m.params_b, m.family, m.tags, m.created_at, m.updated_at "
        f"FROM ({_PAIRS}) p JOIN models m ON m.id = p.model_id"
    )
    with op.batch_alter_table("models") as batch:
        batch.drop_index(batch.f("ix_models_family"))
        batch.drop_column("tags")
        batch.drop_column("family")
        batch.drop_column("params_b")


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("params_b", sa.Float(), nullable=True))
        batch.add_column(sa.Column("family", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("tags", sa.JSON(), nullable=True))
    latest = (
        "(SELECT {col} FROM model_metadata d WHERE d.model_id = models.id "
        "ORDER BY d.updated_at DESC LIMIT 1)"
    )
    op.execute(
        "UPDATE models SET "
        + ", ".join(f"{col} = {latest.format(col=col)}" for col in ("params_b", "family", "tags"))
    )
    op.execute("UPDATE models SET tags = '[]' WHERE tags IS NULL")
    with op.batch_alter_table("models") as batch:
        batch.alter_column("tags", existing_type=sa.JSON(), nullable=False)
        batch.create_index(batch.f("ix_models_family"), ["family"], unique=False)
    with op.batch_alter_table("model_metadata") as batch:
        batch.drop_index(batch.f("ix_model_metadata_model_id"))
    op.drop_table("model_metadata")
