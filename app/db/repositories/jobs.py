from __future__ import annotations

from app.db.models import Job
from app.db.repositories.base import Repository


class JobRepository(Repository[Job]):
    model = Job
