"""All ORM models; import each new model module here so Alembic sees its table."""

from app.db.base import Base
from app.db.models.job import TERMINAL_STATUSES, Job, JobStatus

__all__ = ["TERMINAL_STATUSES", "Base", "Job", "JobStatus"]
