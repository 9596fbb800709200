"""``/stackbot test-alone`` (vetters, the same rule as ``/ok to test``): queue the
``test_alone`` task (:mod:`stackbot.services.test_alone`), which tests the PR's own stack tree
(main + its ancestors + itself), and reply naming that tree or why it cannot be tested yet."""

from __future__ import annotations

from stackbot.domain import tasks
from stackbot.domain.commands import TestAlone, test_alone_refusal, test_alone_reply
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.test_alone import own_tree

router = CommandRouter()


@router.register(TestAlone)
def test_alone(ctx: CommandContext, command: TestAlone) -> CommandOutcome:
    request = ctx.request
    if not ctx.is_vetter():
        return CommandOutcome(reply=test_alone_refusal(request.author))
    tree = own_tree(ctx.engine, request.repo, request.number)
    reply = test_alone_reply(
        request.number,
        tree=tree.prs if tree else (),
        commit=tree.commit if tree else None,
        base_ref=tree.base_ref if tree else "main",
        waiting=tree.waiting if tree else None,
    )
    testable = tree is not None and tree.commit is not None and tree.waiting is None
    follow_ups: list[tasks.TaskPayload] = (
        [tasks.TestAlone(request.repo, request.number)] if testable else []
    )
    return CommandOutcome(reply=reply, follow_ups=follow_ups)
