"""``/stackbot depends-on #N`` and ``/stackbot no-dependency #N`` (the PR's author or a vetter):
an override of one dependency edge, whatever the PR's text says. Stored with the command line
as written (never echoed), then the PR is synced so the graph and its integrations follow."""

from __future__ import annotations

from stackbot.db import github_store as store
from stackbot.db import overrides_store
from stackbot.db.engine import session_scope
from stackbot.domain.commands import (
    DependsOn,
    NoDependency,
    dependency_on_itself_reply,
    dependency_override_refusal,
)
from stackbot.domain.tasks import Integrate, Report
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.sync import sync_pull_request

router = CommandRouter()


@router.register(DependsOn, NoDependency)
def dependency_override(ctx: CommandContext, command: DependsOn | NoDependency) -> CommandOutcome:
    """Store what the PR's author or a vetter says about one dependency, rebuild the graph."""
    engine, client, settings, request = ctx.engine, ctx.client, ctx.settings, ctx.request
    if not request.is_pull_request:
        return CommandOutcome(reply=f"`{_verb(command)}` works on pull requests only.")
    author = client.get_pull(request.repo, request.number).author
    by_author = bool(author) and author.lower() == request.author.lower()
    if not (by_author or ctx.is_vetter()):
        return CommandOutcome(reply=dependency_override_refusal(request.author))
    if command.parent == request.number:
        return CommandOutcome(reply=dependency_on_itself_reply())
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=request.repo)
        if repository is None:
            repository = store.upsert_repository(
                session, full_name=request.repo, clone_url=client.clone_url(request.repo)
            )
        assert repository.id is not None
        overrides_store.save_override(
            session,
            repo_id=repository.id,
            child=request.number,
            parent=command.parent,
            kind="depends_on" if isinstance(command, DependsOn) else "no_dependency",
            login=request.author,
            comment_id=request.comment_id,
            text=command.line,
        )
    synced = sync_pull_request(engine, client, settings, repo=request.repo, number=request.number)
    # Queued on a redo too (dedupe collapses): the graph changed, so its integrations may have.
    outcome = CommandOutcome()
    why = f"{request.author}: {_verb(command)} #{command.parent} on #{request.number}"
    for key in synced.series_keys or (None,):
        outcome.follow_ups.append(Integrate(request.repo, key, request.number, why))
    outcome.follow_ups.append(Report.of(request.repo, synced.related))
    return outcome


def _verb(command: DependsOn | NoDependency) -> str:
    return "/stackbot depends-on" if isinstance(command, DependsOn) else "/stackbot no-dependency"
