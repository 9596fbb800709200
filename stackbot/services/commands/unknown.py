"""Any other ``/stackbot`` word: the usage reply (a fixed text, never the comment's words)."""

from __future__ import annotations

from stackbot.domain.commands import Unknown, command_usage_reply
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter

router = CommandRouter()


@router.register(Unknown)
def unknown(ctx: CommandContext, command: Unknown) -> CommandOutcome:
    """The list of commands stackbot knows."""
    return CommandOutcome(reply=command_usage_reply())
