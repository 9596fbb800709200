"""The ``retarget_children`` task: a PR merged; each open child based on its head branch is
moved to the PR's base and told so (decisions and wording: :mod:`stackbot.domain.retarget`).

Done once even when retried: the children are chosen once and saved in the task's state before
anything is changed (after a base moves, the child no longer looks like a child), a base already
moved is not moved again, and the comment carries a marker that is looked for before posting.
"""

from __future__ import annotations

import logging

from stackbot.domain.retarget import RETARGET_MARKER, children_to_retarget, retarget_comment
from stackbot.domain.tasks import RetargetChildren, SyncPull
from stackbot.domain.types import PrNumber
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)


def handle_retarget_children(ctx: ServiceContext, task: RetargetChildren) -> None:
    client = ctx.services.github()
    parent = client.get_pull(task.repo, task.number)
    if not parent.merged:
        return
    chosen = ctx.state.get("children")
    if chosen is None:
        chosen = {
            str(n): parent.head_ref
            for n in children_to_retarget(task.repo, parent, client.list_open_pulls(task.repo))
        }
        ctx.save_state({"children": chosen})
    marker = RETARGET_MARKER.format(parent=parent.number)
    for number_text, old_base in sorted(chosen.items(), key=lambda item: int(item[0])):
        number = PrNumber(int(number_text))
        child = client.get_pull(task.repo, number)
        if child.is_open and child.base_ref == old_base:
            client.update_pull_base(task.repo, number, parent.base_ref)
            log.info(
                "#%s: base %s → %s (#%s merged)", number, old_base, parent.base_ref, parent.number
            )
        elif child.base_ref != parent.base_ref:
            continue  # closed meanwhile, or someone chose another base: leave it
        said = any(c.body.startswith(marker) for c in client.list_issue_comments(task.repo, number))
        if not said:
            client.create_comment(task.repo, number, retarget_comment(parent, number, old_base))
        ctx.enqueue_task(SyncPull(task.repo, number, "retargeted"))


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(RetargetChildren, handle_retarget_children)
