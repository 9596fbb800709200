"""``/stackbot status`` (anyone): reply with the PR's state as stored, after syncing it."""

from __future__ import annotations

from stackbot.db.engine import session_scope
from stackbot.domain.commands import Status
from stackbot.domain.report import render_status_reply
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.report_views import build_report_view
from stackbot.services.sync import sync_pull_request

router = CommandRouter()


@router.register(Status)
def status(ctx: CommandContext, command: Status) -> CommandOutcome:
    """The PR's verdict and results, as its report would show them now."""
    request = ctx.request
    sync_pull_request(
        ctx.engine, ctx.client, ctx.settings, repo=request.repo, number=request.number
    )
    with session_scope(ctx.engine) as session:
        view = build_report_view(session, ctx.settings, repo=request.repo, number=request.number)
    if view is None:  # the PR vanished between the sync and this read
        return CommandOutcome(reply=f"stackbot knows no pull request #{request.number}.")
    return CommandOutcome(reply=render_status_reply(view))
