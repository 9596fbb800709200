"""The ``pr_command`` task: parse a comment once, send its command to the command's handler
(:data:`ROUTER`, one module per command), then reply within the limits and queue what it asks.
"""

from __future__ import annotations

import logging
from typing import get_args

from stackbot.db import replies_store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import Command, parse_command
from stackbot.domain.stack_lists import declares_dependency
from stackbot.domain.tasks import PrCommand, SyncPull
from stackbot.services.commands import (
    dependency,
    land,
    ok_to_test,
    port,
    quarantine,
    restack,
    retest,
    status,
    test_alone,
    unknown,
)
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

ROUTER = CommandRouter(
    ok_to_test.router,
    retest.router,
    status.router,
    dependency.router,
    restack.router,
    port.router,
    test_alone.router,
    quarantine.router,
    land.router,
    unknown.router,
)
_unrouted = set(get_args(Command)) - ROUTER.commands
assert not _unrouted, f"commands without a handler: {sorted(c.__name__ for c in _unrouted)}"


def answer(ctx: CommandContext, command: Command) -> CommandOutcome:
    """What the comment's command asks for: a reply and the tasks to queue."""
    if ctx.request.author.endswith("[bot]"):
        return CommandOutcome()  # bots (stackbot itself included) give no commands
    return ROUTER.dispatch(ctx, command)


def handle_pr_command(ctx: ServiceContext, request: PrCommand) -> None:
    command = parse_command(request.body)
    if command is None:
        if request.is_pull_request and declares_dependency(request.body, request.number):
            # It may declare a dependency (the graph build decides whether its writer counts).
            ctx.enqueue_task(SyncPull(request.repo, request.number, "comment"))
        return
    asked = CommandContext(ctx.engine, ctx.services.github(), ctx.settings, request)
    outcome = answer(asked, command)
    # A redo after a crash must not queue integration twice nor reply twice: what the first
    # attempt did is in ctx.state.
    replied = False
    if outcome.reply is not None and not ctx.state.get("replied"):
        if may_reply(ctx, asked):
            asked.client.create_comment(request.repo, request.number, outcome.reply)
            replied = True
        ctx.save_state({**ctx.state, "replied": True})
    for task in outcome.follow_ups:
        ctx.enqueue_task(task)
    log.info(
        "%s#%d comment %d by %s: %s",
        request.repo,
        request.number,
        request.comment_id,
        request.author,
        "replied" if replied else f"{len(outcome.follow_ups)} follow-ups",
    )


def may_reply(ctx: ServiceContext, asked: CommandContext) -> bool:
    """Whether the reply limits allow answering this comment (and record it when they do)."""
    request, vetter = asked.request, asked.is_vetter()
    with session_scope(ctx.engine) as session:
        allowed = replies_store.reserve_reply(
            session,
            repo=request.repo,
            pr_number=request.number,
            login=request.author,
            comment_id=request.comment_id,
            vetter=vetter,
            per_hour=ctx.settings.command_replies_per_hour,
        )
    if not allowed:
        log.info(
            "%s#%d comment %d by %s: reply withheld (reply limit)",
            request.repo,
            request.number,
            request.comment_id,
            request.author,
        )
    return allowed


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(PrCommand, handle_pr_command)
