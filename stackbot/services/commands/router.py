"""Command type → handler, as bedevere routes events: each command module keeps its own
:class:`CommandRouter` and registers its handler there (``@router.register(Status)``); the
``pr_command`` task (:mod:`stackbot.services.commands.task`) joins them into one router that
sends each parsed command to its handler.

A handler gets a :class:`CommandContext` (the comment, the database, GitHub, the settings, and
whether the commenter is a vetter, asked of GitHub at most once) and the parsed command, and
returns a :class:`CommandOutcome`: the reply and the tasks to queue. It never replies itself: the
task applies the reply limits and writes the reply once, even when the task is redone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Engine

from stackbot.adapters.github.port import GitHubPort
from stackbot.config import Settings
from stackbot.domain.commands import Command
from stackbot.domain.tasks import PrCommand, TaskPayload
from stackbot.domain.types import RepoName


@dataclass
class CommandOutcome:
    """What a command asks for: a reply (None: answer nothing) and the tasks to queue."""

    reply: str | None = None
    follow_ups: list[TaskPayload] = field(default_factory=list)


def is_vetter(client: GitHubPort, settings: Settings, repo: RepoName, login: str) -> bool:
    """Configured vetters first (no request), then the repository permission, then orgs."""
    vetting = settings.vetting
    if login.lower() in {name.lower() for name in vetting.vetters}:
        return True
    if client.collaborator_permission(repo, login) in vetting.vetter_permissions:
        return True
    return any(client.is_org_member(org, login) for org in vetting.trusted_orgs)


@dataclass
class CommandContext:
    """One comment's command being answered: the comment, and what a handler acts with."""

    engine: Engine
    client: GitHubPort
    settings: Settings
    request: PrCommand
    vetter: bool | None = None  # whether the commenter is a vetter, once asked

    def is_vetter(self) -> bool:
        """Whether the commenter is a vetter (see :func:`is_vetter`), asked at most once."""
        if self.vetter is None:
            request = self.request
            self.vetter = is_vetter(self.client, self.settings, request.repo, request.author)
        return self.vetter


CommandHandler = Callable[[CommandContext, Any], CommandOutcome]
H = TypeVar("H", bound=CommandHandler)


@dataclass(frozen=True)
class Route:
    handler: CommandHandler
    on_edit: bool  # whether an edited comment's command is answered too


class CommandRouter:
    """Command type → its handler; built from other routers, or filled with :meth:`register`."""

    def __init__(self, *routers: CommandRouter) -> None:
        self._routes: dict[type[Command], Route] = {}
        for router in routers:
            for kind, route in router._routes.items():
                self._add(kind, route)

    def register(self, *kinds: type[Command], on_edit: bool = False) -> Callable[[H], H]:
        """Decorate the handler of ``kinds``. Edited comments are ignored silently, except by
        a handler registered ``on_edit``."""

        def decorate(handler: H) -> H:
            for kind in kinds:
                self._add(kind, Route(handler, on_edit))
            return handler

        return decorate

    def _add(self, kind: type[Command], route: Route) -> None:
        if kind in self._routes:
            raise ValueError(f"two handlers for {kind.__name__}")
        self._routes[kind] = route

    @property
    def commands(self) -> frozenset[type[Command]]:
        """The command types this router has a handler for."""
        return frozenset(self._routes)

    def dispatch(self, ctx: CommandContext, command: Command) -> CommandOutcome:
        """The handler's outcome for ``command`` (nothing, for an edit it does not answer)."""
        route = self._routes[type(command)]
        if ctx.request.edited and not route.on_edit:
            return CommandOutcome()
        return route.handler(ctx, command)
