"""benchmarks, benchmark versions, models, model results (packed), api keys, idempotency keys

Revision ID: 569ff45dbd36
Revises: cf7f72a0eea7
Create Date: 2026-11-30 09:10:18.787065

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "569ff45dbd36"
down_revision: str | Sequence[str] | None = "cf7f72a0eea7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                     nullable=False)


def _updated_at() -> sa.Column:
    return sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_hash", sa.String(length=255), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        _created_at(),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("principal", sa.String(length=64), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint("principal", "key", name="uq_idempotency_keys_principal_key"),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_idempotency_keys_created_at"), ["created_at"],
                              unique=False)
    op.create_table(
        "benchmarks",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        _created_at(),
        _updated_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmarks")),
        sa.UniqueConstraint("name", name=op.f("uq_benchmarks_name")),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("params_b", sa.Float(), nullable=True),
        sa.Column("family", sa.String(length=200), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        _created_at(),
        _updated_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
        sa.UniqueConstraint("name", name=op.f("uq_models_name")),
    )
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_models_family"), ["family"], unique=False)
    op.create_table(
        "benchmark_versions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("benchmark_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("item_ids", sa.JSON(), nullable=False),
        sa.Column("subtask_names", sa.JSON(), nullable=False),
        sa.Column("subtask_codes", sa.LargeBinary(), nullable=False),
        sa.Column("items_extra", sa.JSON(), nullable=True),
        _created_at(),
        sa.ForeignKeyConstraint(["benchmark_id"], ["benchmarks.id"],
                                name=op.f("fk_benchmark_versions_benchmark_id_benchmarks"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmark_versions")),
        sa.UniqueConstraint("benchmark_id", "content_hash", name="uq_benchmark_versions_hash"),
        sa.UniqueConstraint("benchmark_id", "version", name="uq_benchmark_versions_version"),
    )
    op.create_table(
        "model_results",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("benchmark_version_id", sa.Uuid(), nullable=False),
        sa.Column("model_id", sa.Uuid(), nullable=False),
        sa.Column("binary", sa.Boolean(), nullable=False),
        sa.Column("correct", sa.LargeBinary(), nullable=False),
        sa.Column("confidence", sa.LargeBinary(), nullable=True),
        sa.Column("coverage", sa.LargeBinary(), nullable=True),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("source_format", sa.String(length=32), nullable=True),
        sa.Column("metric", sa.String(length=64), nullable=True),
        _created_at(),
        _updated_at(),
        sa.ForeignKeyConstraint(["benchmark_version_id"], ["benchmark_versions.id"],
                                name=op.f("fk_model_results_benchmark_version_id_benchmark_versions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"],
                                name=op.f("fk_model_results_model_id_models"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_results")),
        sa.UniqueConstraint("benchmark_version_id", "model_id",
                            name="uq_model_results_version_model"),
    )
    with op.batch_alter_table("model_results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_model_results_model_id"), ["model_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("model_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_model_results_model_id"))
    op.drop_table("model_results")
    op.drop_table("benchmark_versions")
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_models_family"))
    op.drop_table("models")
    op.drop_table("benchmarks")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotency_keys_created_at"))
    op.drop_table("idempotency_keys")
    op.drop_table("api_keys")
