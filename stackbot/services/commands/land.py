"""``/stackbot land [#N]`` and ``/stackbot land cancel`` (vetters): queue the series (or its
prefix up to #N) for landing, or take it out (:mod:`stackbot.services.landing` does the rest).

The landing is written here, keyed by the command's comment, so a redone ``pr_command`` task
finds it instead of queueing a second one; one landing per series is active at a time.
"""

from __future__ import annotations

from stackbot.db import github_store, landing_store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import Land, land_refusal, stack_command_on_issue_reply
from stackbot.domain.landing import LandingEntry, LandingState, landing_order
from stackbot.domain.landing_text import (
    already_landing_reply,
    cancel_reply,
    landing_reply,
    nothing_to_land_reply,
)
from stackbot.domain.tasks import Land as LandTask
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter

router = CommandRouter()


@router.register(Land)
def land(ctx: CommandContext, command: Land) -> CommandOutcome:
    request = ctx.request
    if not request.is_pull_request:
        return CommandOutcome(reply=stack_command_on_issue_reply())
    if not ctx.is_vetter():
        return CommandOutcome(reply=land_refusal(request.author))
    with session_scope(ctx.engine) as session:
        repo = github_store.get_repository(session, full_name=request.repo)
        keys = (
            github_store.series_keys_of(session, repo_id=repo.id, number=request.number)
            if repo is not None and repo.id is not None
            else []
        )
        if repo is None or repo.id is None or not keys:
            return CommandOutcome(reply=nothing_to_land_reply(request.number, None))
        base_ref = repo.default_branch
        active = landing_store.active_landing(session, repo_id=repo.id, series_key=keys[0])
        if command.cancel:
            if active is None:
                return CommandOutcome(reply=cancel_reply(None, []))
            merged = [e.number for e in landing_store.entries_of(active) if e.state == "merged"]
            landing_store.save_landing(
                session,
                active,
                state=LandingState.CANCELLED,
                reason=f"cancelled by @{request.author}",
            )
            view = landing_store.landing_view(active, base_ref)
            return CommandOutcome(
                reply=cancel_reply(view, merged),
                follow_ups=[LandTask(request.repo, view.id)],
            )
        mine = landing_store.landing_of_comment(
            session, repo_id=repo.id, comment_id=request.comment_id
        )
        if mine is not None:  # a redo of this very command
            return CommandOutcome(reply=landing_reply(landing_store.landing_view(mine, base_ref)))
        if active is not None:
            return CommandOutcome(
                reply=already_landing_reply(landing_store.landing_view(active, base_ref))
            )
        series = github_store.get_series(session, repo_id=repo.id, key=keys[0])
        open_prs = {
            p.number for p in github_store.list_pulls(session, repo_id=repo.id, open_only=True)
        }
        left_out = landing_store.left_out_of_series(session, repo_id=repo.id, series_key=keys[0])
        order = landing_order(
            series.order if series is not None else [], open_prs, command.up_to, left_out
        )
        if not order:
            return CommandOutcome(
                reply=nothing_to_land_reply(request.number, command.up_to, left_out)
            )
        heads = {
            p.number: p.head_sha
            for p in github_store.list_pulls(session, repo_id=repo.id, open_only=True)
        }
        row = landing_store.add_landing(
            session,
            repo_id=repo.id,
            series_key=keys[0],
            up_to=command.up_to,
            requested_on=request.number,
            requested_by=request.author,
            comment_id=request.comment_id,
            merge_method=ctx.settings.landing.method_for(request.repo),
            entries=[LandingEntry(n, heads.get(n, "")) for n in order],
        )
        view = landing_store.landing_view(row, base_ref)
    left = {n: why for n, why in left_out.items() if n in open_prs}
    return CommandOutcome(
        reply=landing_reply(view, left), follow_ups=[LandTask(request.repo, view.id)]
    )
