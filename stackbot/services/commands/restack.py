"""``/stackbot restack [--push]`` (the PR's author or a vetter; ``--push`` the author only):
queue the ``restack_pr`` task (:mod:`stackbot.services.stack_commands`), which replays the
PR's own commits onto its base and answers on the PR."""

from __future__ import annotations

from stackbot.domain.commands import Restack, stack_command_on_issue_reply
from stackbot.domain.tasks import RestackPr
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter

router = CommandRouter()


@router.register(Restack)
def restack(ctx: CommandContext, command: Restack) -> CommandOutcome:
    """The restack task for the PR, or a refusal saying who may ask."""
    request = ctx.request
    if not request.is_pull_request:
        return CommandOutcome(reply=stack_command_on_issue_reply())
    vetter = ctx.is_vetter()
    pr = ctx.client.get_pull(request.repo, request.number)
    is_author = pr.author.lower() == request.author.lower()
    if not (is_author or vetter):
        reply = f"@{request.author}, only the author or a vetter can ask for a restack."
        return CommandOutcome(reply=reply)
    if command.push and not is_author:
        reply = "Only the pull request's author can allow a push to its branch (`--push`)."
        return CommandOutcome(reply=reply)
    task = RestackPr(request.repo, request.number, request.author, command.push)
    return CommandOutcome(follow_ups=[task])
