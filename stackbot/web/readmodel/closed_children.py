"""The index page's list of PRs GitHub closed when their base branch went, with the commands
that bring each back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from stackbot.db.closed_pulls_store import closed_pulls_by_repository
from stackbot.domain.retarget import closed_children


@dataclass(frozen=True)
class ClosedChildRow:
    repo: str
    number: int
    title: str
    base_ref: str
    parent: int
    parent_base_ref: str
    command: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def closed_child_rows(session: Session) -> list[ClosedChildRow]:
    rows = []
    for repo, pulls in closed_pulls_by_repository(session).items():
        for child in closed_children(repo, pulls):
            rows.append(
                ClosedChildRow(
                    repo,
                    child.number,
                    child.title,
                    child.base_ref,
                    child.parent,
                    child.parent_base_ref,
                    child.recovery_command(),
                )
            )
    return rows
