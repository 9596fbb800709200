"""``/ok to test <sha>``: a vetter approves the PR's current head for testing.

The commenter must be a vetter (configured, a collaborator with one of
``settings.vetting.vetter_permissions``, or a member of a trusted org); the SHA must name the
PR's current head (:func:`stackbot.domain.vetting.decide_ok_to_test`). An accepted approval is
stored for that commit only and the PR's series is queued for integration. The one command
answered in an edited comment too (fixing a typo in the SHA); a refused edit gets no reply.
"""

from __future__ import annotations

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import OkToTest
from stackbot.domain.tasks import Integrate, Report
from stackbot.domain.vetting import decide_ok_to_test
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.sync import sync_pull_request

router = CommandRouter()


@router.register(OkToTest, on_edit=True)
def ok_to_test(ctx: CommandContext, command: OkToTest) -> CommandOutcome:
    """Store a vetter's approval of the PR's current head and queue its integration and
    report; refuse anything else with a reply saying why (none for an edit)."""
    engine, client, settings, request = ctx.engine, ctx.client, ctx.settings, ctx.request
    if not request.is_pull_request or not ctx.is_vetter():
        # Refused before looking at the PR: a non-vetter learns nothing about its commits.
        decision = decide_ok_to_test(
            command=command,
            pr_head_sha="",
            commenter=request.author,
            commenter_is_vetter=False,
            is_pull_request=request.is_pull_request,
            edited=request.edited,
        )
        return CommandOutcome(reply=decision.reply)
    synced = sync_pull_request(engine, client, settings, repo=request.repo, number=request.number)
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=request.repo)
        assert repository is not None and repository.id is not None
        row = store.get_pull(session, repo_id=repository.id, number=request.number)
        assert row is not None
        others = {
            pr.number: pr.head_sha
            for pr in store.list_pulls(session, repo_id=repository.id, open_only=True)
            if pr.number != request.number and pr.head_sha
        }
        decision = decide_ok_to_test(
            command=command,
            pr_head_sha=row.head_sha,
            commenter=request.author,
            commenter_is_vetter=True,
            is_pull_request=True,
            edited=request.edited,
            previous_heads=row.head_history,
            other_pr_heads=others,
            pr_commits=[commit["sha"] for commit in row.commits],
        )
        if decision.accepted:
            assert decision.sha is not None
            store.add_approval(
                session,
                repo_id=repository.id,
                pr_number=request.number,
                sha=decision.sha,
                vetter=request.author,
                kind="ok_to_test",
                comment_id=request.comment_id,
            )
    outcome = CommandOutcome(reply=decision.reply)
    if not (decision.accepted or synced.changed):
        return outcome
    # Queued again for a repeated approval too: a redo after a crash between storing the
    # approval and completing this task must still ask for the integration (dedupe collapses).
    why = f"#{request.number} changed"
    if decision.sha:
        why = f"{request.author} approved {decision.sha[:7]} of #{request.number}"
    for key in synced.series_keys or (None,):
        outcome.follow_ups.append(Integrate(request.repo, key, request.number, why))
    outcome.follow_ups.append(Report.of(request.repo, synced.related))  # the sticky shows it
    return outcome
