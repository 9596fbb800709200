"""Excluded nodes (issue 26 point 4) on the quarantine page and at ``/api/nodes``: which nodes
get no jobs, since when, the infra jobs in a row that excluded them (with their signature
lines), the node checks since, and the nodes re-admitted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import nodes_store
from stackbot.domain.broken_nodes import EXCLUDED, NodePolicy
from stackbot.services import broken_nodes


@dataclass(frozen=True)
class NodeRow:
    node: str
    state: str
    excluded_at: datetime
    evidence: tuple[dict[str, Any], ...]
    checks: tuple[dict[str, Any], ...]
    check_running: bool
    check_asked: bool
    ended_at: datetime | None
    ended_by: str | None
    end_note: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "state": self.state,
            "excluded_at": self.excluded_at.isoformat(),
            "evidence": list(self.evidence),
            "checks": list(self.checks),
            "check_running": self.check_running,
            "check_asked": self.check_asked,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "ended_by": self.ended_by,
            "end_note": self.end_note,
        }


@dataclass(frozen=True)
class NodesView:
    excluded: tuple[NodeRow, ...]
    readmitted: tuple[NodeRow, ...]
    policy: NodePolicy

    def to_json(self) -> dict[str, Any]:
        return {
            "excluded": [r.to_json() for r in self.excluded],
            "readmitted": [r.to_json() for r in self.readmitted],
            "rule": {
                "infra_count": self.policy.infra_count,
                "window_hours": self.policy.window_hours,
                "recheck_minutes": self.policy.recheck_minutes,
                "recheck_max_hours": self.policy.recheck_max_hours,
            },
        }


def nodes_view(session: Session, *, settings: Settings | None) -> NodesView:
    policy = broken_nodes.policy_of(settings) if settings is not None else NodePolicy()
    rows = [
        NodeRow(
            node=row.node,
            state=row.state,
            excluded_at=broken_nodes.aware(row.excluded_at),
            evidence=tuple(row.evidence or ()),
            checks=tuple(row.checks or ()),
            check_running=row.check_handle is not None,
            check_asked=row.check_asked,
            ended_at=broken_nodes.aware(row.ended_at) if row.ended_at else None,
            ended_by=row.ended_by,
            end_note=row.end_note,
        )
        for row in nodes_store.exclusions(session)
    ]
    return NodesView(
        excluded=tuple(r for r in rows if r.state == EXCLUDED),
        readmitted=tuple(r for r in rows if r.state != EXCLUDED),
        policy=policy,
    )
