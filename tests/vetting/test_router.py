"""The command router: one handler per command type, edits answered only where registered."""

from __future__ import annotations

from typing import Any, cast, get_args

import pytest

from stackbot.domain.commands import Command, OkToTest, Status
from stackbot.domain.tasks import PrCommand
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.commands.task import ROUTER


def _context(action: str) -> CommandContext:
    request = PrCommand("o/r", 1, comment_id=7, author="alice", body="", action=action)
    return CommandContext(cast(Any, None), cast(Any, None), cast(Any, None), request)


def test_every_command_type_has_a_handler() -> None:
    assert ROUTER.commands == set(get_args(Command))


def test_an_edit_is_answered_only_by_a_handler_registered_on_edit() -> None:
    router = CommandRouter()

    @router.register(Status)
    def status(ctx: CommandContext, command: Status) -> CommandOutcome:
        return CommandOutcome(reply="status")

    @router.register(OkToTest, on_edit=True)
    def ok(ctx: CommandContext, command: OkToTest) -> CommandOutcome:
        return CommandOutcome(reply="ok")

    joined = CommandRouter(router)
    assert joined.dispatch(_context("created"), Status()).reply == "status"
    assert joined.dispatch(_context("edited"), Status()) == CommandOutcome()
    assert joined.dispatch(_context("edited"), OkToTest("abc1234")).reply == "ok"


def test_two_handlers_for_one_command_are_refused() -> None:
    first, second = CommandRouter(), CommandRouter()
    first.register(Status)(lambda ctx, command: CommandOutcome())
    second.register(Status)(lambda ctx, command: CommandOutcome())
    with pytest.raises(ValueError, match="two handlers for Status"):
        CommandRouter(first, second)
