"""All table models; importing this package registers every table on ``SQLModel.metadata``."""

from stackbot.db.models.acted import ActedCommand, CommentCursor
from stackbot.db.models.clock import ReadClock
from stackbot.db.models.github import (
    Approval,
    DependencyEdge,
    PullRequest,
    Report,
    Repository,
    Series,
    SeriesMember,
    WebhookDelivery,
)
from stackbot.db.models.integration import IntegrationRun, IntegrationStep
from stackbot.db.models.jobs import Job, TestFinding, TestResult
from stackbot.db.models.landing import Landing
from stackbot.db.models.maintenance import MaintenanceRun
from stackbot.db.models.nodes import NodeExclusion
from stackbot.db.models.overrides import DependencyOverrideRow
from stackbot.db.models.quarantine import QuarantineEntry
from stackbot.db.models.replies import CommandReply
from stackbot.db.models.tasks import Task

__all__ = [
    "ActedCommand",
    "Approval",
    "CommandReply",
    "CommentCursor",
    "DependencyEdge",
    "DependencyOverrideRow",
    "IntegrationRun",
    "IntegrationStep",
    "Job",
    "Landing",
    "MaintenanceRun",
    "NodeExclusion",
    "PullRequest",
    "QuarantineEntry",
    "ReadClock",
    "Report",
    "Repository",
    "Series",
    "SeriesMember",
    "Task",
    "TestFinding",
    "TestResult",
    "WebhookDelivery",
]
