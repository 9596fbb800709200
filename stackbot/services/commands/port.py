"""``/stackbot port <branch>`` (vetters): queue the ``port_pr`` task
(:mod:`stackbot.services.stack_commands`), which ports the PR's change onto ``branch`` and
answers on the PR."""

from __future__ import annotations

from stackbot.domain.commands import Port, stack_command_on_issue_reply
from stackbot.domain.tasks import PortPr
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter

router = CommandRouter()


@router.register(Port)
def port(ctx: CommandContext, command: Port) -> CommandOutcome:
    """The port task for the PR, or a refusal for anyone but a vetter."""
    request = ctx.request
    if not request.is_pull_request:
        return CommandOutcome(reply=stack_command_on_issue_reply())
    if not ctx.is_vetter():
        return CommandOutcome(
            reply=f"@{request.author}, only vetters (write access, or listed as vetters in "
            "stackbot's configuration) can ask for a port."
        )
    return CommandOutcome(
        follow_ups=[PortPr(request.repo, request.number, command.branch, request.author)]
    )
