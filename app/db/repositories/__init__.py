from app.db.repositories.base import Repository
from app.db.repositories.jobs import JobRepository

__all__ = ["JobRepository", "Repository"]
