"""The ``process_delivery`` task: turn one recorded webhook delivery into the work it asks for.

``pull_request`` → ``sync_pull``; ``issue_comment`` on a PR → ``pr_command``; ``push`` to a
base branch → ``base_moved``; ``check_run`` rerequested → ``retest``; ``installation`` → the
installation id on the repositories; ``ping`` → nothing. The follow-up tasks, the delivery's
new status and the task's completion commit together, so a redo cannot queue twice.
"""

from __future__ import annotations

import json
import logging

from sqlmodel import Session

from stackbot.db import deliveries_store as inbox
from stackbot.domain.events import (
    InstallationEvent,
    PushEvent,
    UnknownEvent,
    ignore_reason,
    parse_event,
    route_event,
    storable,
)
from stackbot.domain.tasks import ProcessDelivery
from stackbot.errors import BadInput, Permanent
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

# Installation actions after which the app can no longer act on the repositories.
UNINSTALLED = frozenset({"deleted", "suspend"})


def process_delivery(ctx: ServiceContext, task: ProcessDelivery) -> None:
    row_id = task.delivery
    delivery = inbox.load_delivery(ctx.engine, row_id)
    if delivery is None:
        raise Permanent(f"webhook delivery row {row_id} does not exist")
    try:
        event = parse_event(delivery.event, json.loads(delivery.body))
    except (ValueError, BadInput) as error:
        # A signed delivery GitHub would never send (an id of 2**63, a NUL in a login): refused
        # here, once, with its reason; never a task retried until dead.
        refusal = storable(f"cannot parse the stored body: {error}")
        log.warning("webhook delivery row %d (%s) refused: %s", row_id, delivery.event, refusal)
        _finish(ctx, row_id, inbox.FAILED, refusal)
        return
    reason = ignore_reason(event)
    if reason is not None or isinstance(event, UnknownEvent):
        _finish(ctx, row_id, inbox.IGNORED, reason)
        return
    if isinstance(event, InstallationEvent):
        installation_id = None if event.action in UNINSTALLED else event.installation_id
        ctx.on_completion(lambda s: _log_installation(s, installation_id, event.repos))
    bases: frozenset[str] = frozenset()
    if isinstance(event, PushEvent):
        bases = inbox.open_base_branches(ctx.engine, event.repo)
    follow_ups = route_event(event, base_branches=bases)
    ctx.follow_ups.extend(follow_ups)
    if isinstance(event, PushEvent) and not follow_ups:
        _finish(
            ctx, row_id, inbox.IGNORED, f"push to {event.branch}, which no pull request targets"
        )
        return
    _finish(ctx, row_id, inbox.PROCESSED, None)


def _finish(ctx: ServiceContext, row_id: int, status: str, reason: str | None) -> None:
    text = None if reason is None else storable(reason)
    ctx.on_completion(lambda session: inbox.mark_delivery(session, row_id, status, text))


def _log_installation(
    session: Session, installation_id: int | None, repos: tuple[str, ...]
) -> None:
    updated = inbox.record_installation(session, installation_id, repos)
    log.info(
        "installation %s recorded on %d of %d repositories", installation_id, updated, len(repos)
    )


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(ProcessDelivery, process_delivery)
