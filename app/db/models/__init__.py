"""All ORM models; import each new model module here so Alembic sees its table."""

from app.db.base import Base
from app.db.models.access import ApiKey, AuditEvent, IdempotencyKey, KeyRole, Project
from app.db.models.analysis import Analysis, AnalysisChunk
from app.db.models.benchmark import Benchmark, BenchmarkVersion, PrecomputedView
from app.db.models.evaluation_session import EvaluationSession, IrtFit
from app.db.models.gate import Gate
from app.db.models.job import TERMINAL_STATUSES, Job, JobStatus
from app.db.models.model_result import (
    LanguageModel,
    ModelMetadata,
    ModelResult,
    ModelResultArchive,
)
from app.db.models.subset import Subset, SubsetScore
from app.db.models.web import BrowserSession, ServerSecret

__all__ = [
    "TERMINAL_STATUSES",
    "Analysis",
    "AnalysisChunk",
    "ApiKey",
    "AuditEvent",
    "Base",
    "Benchmark",
    "BenchmarkVersion",
    "BrowserSession",
    "EvaluationSession",
    "Gate",
    "IdempotencyKey",
    "IrtFit",
    "Job",
    "JobStatus",
    "KeyRole",
    "LanguageModel",
    "ModelMetadata",
    "ModelResult",
    "ModelResultArchive",
    "PrecomputedView",
    "Project",
    "ServerSecret",
    "Subset",
    "SubsetScore",
]
