"""The ``pr_command`` task: act on a command in a PR comment, or say in one reply why not.

- ``/ok to test <sha>``: the commenter must be a vetter (configured, a collaborator with one of
  ``settings.vetting.vetter_permissions``, or a member of a trusted org); the SHA must name the
  PR's current head (see :mod:`stackbot.domain.commands`). An accepted approval is stored for
  that commit only and the PR's series is queued for integration.
- ``/stackbot retest [TEST_SET | own:N]`` (vetters): queues ``retest`` and replies naming what
  is retested (the test set; ``own:N`` and its files, N being this PR; or every default set and
  the PR's own test files). ``own:M`` of another PR, and ``own:N`` where there is nothing to
  run, are refused with a reply saying why.
- ``/stackbot status``: replies with the PR's state as stored.
- ``/stackbot restack [--push]`` and ``/stackbot port <branch>``: see
  :mod:`stackbot.services.stack_commands`.

Edited comments count only for ``/ok to test`` naming the current head; anything else in an
edit is ignored silently. Comments without a command are ignored silently.

Replies are fixed texts (nothing the commenter wrote is echoed) and limited, since each one is
one of GitHub's content writes the reports need: a non-vetter gets at most one reply per PR,
and every user at most ``settings.command_replies_per_hour`` an hour per repository
(:mod:`stackbot.db.replies_store`). A command over the limit is still acted on, silently.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import Engine

from gpu_jobs.testsets import OwnTests, load_own_tests, own_test_set_pr
from stackbot.adapters.github.port import GitHubPort
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import overrides_store, replies_store
from stackbot.db.engine import session_scope
from stackbot.domain import tasks
from stackbot.domain.commands import (
    DependsOn,
    NoDependency,
    OkToTest,
    Port,
    Restack,
    Retest,
    Status,
    Unknown,
    command_usage_reply,
    decide_ok_to_test,
    dependency_on_itself_reply,
    dependency_override_refusal,
    parse_command,
    retest_own_refusal,
    retest_refusal,
    retest_reply,
)
from stackbot.domain.report import render_status_reply
from stackbot.domain.stack_lists import declares_dependency
from stackbot.domain.tasks import Integrate, PrCommand, Report, SyncPull
from stackbot.domain.types import RepoName
from stackbot.services import retest as retest_service
from stackbot.services.report_views import build_report_view
from stackbot.services.stack_commands import stack_command_request
from stackbot.services.sync import sync_pull_request
from stackbot.worker.registry import TaskContext, TaskRegistry

log = logging.getLogger(__name__)


@dataclass
class CommandOutcome:
    reply: str | None = None
    follow_ups: list[tasks.TaskPayload] = field(default_factory=list)
    approved_sha: str | None = None
    vetter: bool | None = None  # whether the commenter is a vetter, where already known


def is_vetter(client: GitHubPort, settings: Settings, repo: RepoName, login: str) -> bool:
    """Configured vetters first (no request), then the repository permission, then orgs."""
    vetting = settings.vetting
    if login.lower() in {name.lower() for name in vetting.vetters}:
        return True
    if client.collaborator_permission(repo, login) in vetting.vetter_permissions:
        return True
    return any(client.is_org_member(org, login) for org in vetting.trusted_orgs)


def run_command(
    engine: Engine, client: GitHubPort, settings: Settings, request: PrCommand
) -> CommandOutcome:
    """What a comment asks for: a reply and the tasks to queue (nothing for non-commands)."""
    command = parse_command(request.body)
    if command is None or request.author.endswith("[bot]"):
        return CommandOutcome()  # bots (stackbot itself included) give no commands
    if isinstance(command, OkToTest):
        return ok_to_test(engine, client, settings, request, command)
    if request.edited:
        return CommandOutcome()  # only /ok to test counts in an edit
    if isinstance(command, Retest):
        return retest(engine, client, settings, request, command)
    if isinstance(command, Status):
        return status(engine, client, settings, request)
    if isinstance(command, DependsOn | NoDependency):
        return dependency_override(engine, client, settings, request, command)
    if isinstance(command, Restack | Port):
        vetter = is_vetter(client, settings, request.repo, request.author)
        reply, task = stack_command_request(client, request, command, vetter=vetter)
        return CommandOutcome(reply=reply, follow_ups=[task] if task else [], vetter=vetter)
    assert isinstance(command, Unknown)
    return CommandOutcome(reply=command_usage_reply())


def ok_to_test(
    engine: Engine, client: GitHubPort, settings: Settings, request: PrCommand, command: OkToTest
) -> CommandOutcome:
    if not request.is_pull_request or not is_vetter(client, settings, request.repo, request.author):
        # Refused before looking at the PR: a non-vetter learns nothing about its commits.
        decision = decide_ok_to_test(
            command=command,
            pr_head_sha="",
            commenter=request.author,
            commenter_is_vetter=False,
            is_pull_request=request.is_pull_request,
            edited=request.edited,
        )
        return CommandOutcome(
            reply=decision.reply, vetter=False if request.is_pull_request else None
        )
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
    outcome = CommandOutcome(reply=decision.reply, approved_sha=decision.sha, vetter=True)
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


def retest(
    engine: Engine, client: GitHubPort, settings: Settings, request: PrCommand, command: Retest
) -> CommandOutcome:
    if not is_vetter(client, settings, request.repo, request.author):
        return CommandOutcome(reply=retest_refusal(request.author), vetter=False)
    name, number = command.test_set, request.number
    own = load_own_tests(settings.test_sets_file)
    integrated, own_files = retest_service.own_files_of_head(engine, request.repo, number)
    asked = own_test_set_pr(name) if name is not None else None
    refusal = _retest_refused(settings, number, name, asked, own, own_files, integrated)
    if refusal is not None:
        return CommandOutcome(reply=refusal, vetter=True)
    if asked is not None:
        test_sets: list[str] = []
    else:
        test_sets = [name] if name is not None else list(settings.default_test_sets)
    # Retesting every set runs the PR's own files too: named when it has some (or may have
    # some: its head is not integrated yet).
    every = name is None and (bool(own_files) or not integrated)
    with_own = own is not None and (asked is not None or every)
    reply = retest_reply(
        number, test_sets=test_sets, own=with_own, own_files=own_files, integrated=integrated
    )
    task = tasks.Retest(request.repo, number, test_set=name)
    return CommandOutcome(reply=reply, follow_ups=[task], vetter=True)


def _retest_refused(
    settings: Settings,
    number: int,
    name: str | None,
    asked: int | None,
    own: OwnTests | None,
    own_files: list[str],
    integrated: bool,
) -> str | None:
    """Why a vetter's retest runs nothing (None: it runs)."""
    if asked is not None:  # own:N, the PR's own test files
        if asked != number or own is None or (integrated and not own_files):
            roots = own.roots if own is not None else None
            return retest_own_refusal(number, asked=asked, roots=roots)
        return None
    known = _test_set_names(settings)
    if name is not None and known and name not in known:
        # Only configured names are shown, never the name as written.
        names = ", ".join(f"`{n}`" for n in sorted(known))
        mine = f", and `own:{number}` for this PR's own test files" if own is not None else ""
        return f"There is no such test set; known: {names}{mine}."
    return None


def _test_set_names(settings: Settings) -> set[str]:
    from gpu_jobs.testsets import load_test_sets

    return set(load_test_sets(settings.test_sets_file))


def status(
    engine: Engine, client: GitHubPort, settings: Settings, request: PrCommand
) -> CommandOutcome:
    sync_pull_request(engine, client, settings, repo=request.repo, number=request.number)
    with session_scope(engine) as session:
        view = build_report_view(session, settings, repo=request.repo, number=request.number)
    if view is None:  # the PR vanished between the sync and this read
        return CommandOutcome(reply=f"stackbot knows no pull request #{request.number}.")
    return CommandOutcome(reply=render_status_reply(view))


def dependency_override(
    engine: Engine,
    client: GitHubPort,
    settings: Settings,
    request: PrCommand,
    command: DependsOn | NoDependency,
) -> CommandOutcome:
    """Store what the PR's author or a vetter says about one dependency, rebuild the graph."""
    if not request.is_pull_request:
        return CommandOutcome(reply=f"`{_verb(command)}` works on pull requests only.")
    author = client.get_pull(request.repo, request.number).author
    by_author = bool(author) and author.lower() == request.author.lower()
    vetter = None if by_author else is_vetter(client, settings, request.repo, request.author)
    if not (by_author or vetter):
        return CommandOutcome(reply=dependency_override_refusal(request.author), vetter=False)
    if command.parent == request.number:
        return CommandOutcome(reply=dependency_on_itself_reply(), vetter=vetter)
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
    outcome = CommandOutcome(vetter=vetter)
    why = f"{request.author}: {_verb(command)} #{command.parent} on #{request.number}"
    for key in synced.series_keys or (None,):
        outcome.follow_ups.append(Integrate(request.repo, key, request.number, why))
    outcome.follow_ups.append(Report.of(request.repo, synced.related))
    return outcome


def _verb(command: DependsOn | NoDependency) -> str:
    return "/stackbot depends-on" if isinstance(command, DependsOn) else "/stackbot no-dependency"


# -- the task ---------------------------------------------------------------------------------


def handle_pr_command(ctx: TaskContext, request: PrCommand) -> None:
    if parse_command(request.body) is None:
        if request.is_pull_request and declares_dependency(request.body, request.number):
            # It may declare a dependency (the graph build decides whether its writer counts).
            ctx.enqueue_task(SyncPull(request.repo, request.number, "comment"))
        return
    client = ctx.github()
    outcome = run_command(ctx.engine, client, ctx.settings, request)
    # A redo after a crash must not queue integration twice nor reply twice: what the first
    # attempt did is in ctx.state.
    replied = False
    if outcome.reply is not None and not ctx.state.get("replied"):
        if may_reply(ctx, client, request, vetter=outcome.vetter):
            client.create_comment(request.repo, request.number, outcome.reply)
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


def may_reply(
    ctx: TaskContext, client: GitHubPort, request: PrCommand, *, vetter: bool | None
) -> bool:
    """Whether the reply limits allow answering this comment (and record it when they do)."""
    if vetter is None:
        vetter = is_vetter(client, ctx.settings, request.repo, request.author)
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
