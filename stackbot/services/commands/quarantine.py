"""``/stackbot quarantine <test>`` and ``/stackbot release <test>`` (maintainers: write access
to the repository): quarantine a test (or renew its quarantine: its expiry starts again) and end
one. Anyone else is refused without their words echoed."""

from __future__ import annotations

from stackbot.db import github_store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import QuarantineTest, ReleaseTest, quarantine_refusal
from stackbot.services import quarantine
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter

router = CommandRouter()
MAINTAINER_PERMISSIONS = frozenset({"admin", "maintain", "write"})


def _maintainer(ctx: CommandContext) -> bool:
    request = ctx.request
    permission = ctx.client.collaborator_permission(request.repo, request.author)
    return permission in MAINTAINER_PERMISSIONS


@router.register(QuarantineTest)
def quarantine_test(ctx: CommandContext, command: QuarantineTest) -> CommandOutcome:
    request = ctx.request
    if not _maintainer(ctx):
        return CommandOutcome(reply=quarantine_refusal(request.author))
    policy = quarantine.policy_of(ctx.settings)
    with session_scope(ctx.engine) as session:
        repo = github_store.get_repository(session, full_name=request.repo)
        if repo is None or repo.id is None:
            return CommandOutcome(reply="stackbot does not track this repository yet.")
        row, renewed = quarantine.quarantine_by_maintainer(
            session, repo.id, command.nodeid, login=request.author, policy=policy
        )
        until = row.expires_at.strftime("%Y-%m-%d")
    if renewed:
        reply = f"Renewed the quarantine of `{command.nodeid}` until {until}."
    else:
        reply = (
            f"Quarantined `{command.nodeid}` until {until}: it still runs and its outcome is "
            "shown, but it decides no verdict (a failure on every run of a tree still counts); "
            f"released after {policy.release_after} clean runs in a row."
        )
    return CommandOutcome(reply=reply)


@router.register(ReleaseTest)
def release_test(ctx: CommandContext, command: ReleaseTest) -> CommandOutcome:
    request = ctx.request
    if not _maintainer(ctx):
        return CommandOutcome(reply=quarantine_refusal(request.author))
    with session_scope(ctx.engine) as session:
        repo = github_store.get_repository(session, full_name=request.repo)
        row = None
        if repo is not None and repo.id is not None:
            row = quarantine.release_by_maintainer(
                session, repo.id, command.nodeid, login=request.author
            )
    if row is None:
        return CommandOutcome(reply=f"`{command.nodeid}` is not quarantined.")
    return CommandOutcome(reply=f"Released `{command.nodeid}`: its failures count again.")
