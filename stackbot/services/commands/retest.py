"""``/stackbot retest [TEST_SET | own:N]`` (vetters): queue the ``retest`` task
(:mod:`stackbot.services.retest`) and reply naming what is retested: the test set; ``own:N``
and its files, N being this PR; or every default set and the PR's own test files. ``own:M`` of
another PR, an unknown test set, and ``own:N`` where there is nothing to run are refused with a
reply saying why."""

from __future__ import annotations

from gpu_jobs.testsets import OwnTests, load_own_tests, load_test_sets, own_test_set_pr
from stackbot.config import Settings
from stackbot.domain import tasks
from stackbot.domain.commands import Retest, retest_own_refusal, retest_refusal, retest_reply
from stackbot.services.commands.router import CommandContext, CommandOutcome, CommandRouter
from stackbot.services.retest import own_files_of_head

router = CommandRouter()


@router.register(Retest)
def retest(ctx: CommandContext, command: Retest) -> CommandOutcome:
    """Queue new jobs for the PR's current tree (a vetter's), or say why nothing runs."""
    settings, request = ctx.settings, ctx.request
    if not ctx.is_vetter():
        return CommandOutcome(reply=retest_refusal(request.author))
    name, number = command.test_set, request.number
    own = load_own_tests(settings.test_sets_file)
    integrated, own_files = own_files_of_head(ctx.engine, request.repo, number)
    asked = own_test_set_pr(name) if name is not None else None
    refusal = _refused(settings, number, name, asked, own, own_files, integrated)
    if refusal is not None:
        return CommandOutcome(reply=refusal)
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
    return CommandOutcome(
        reply=reply, follow_ups=[tasks.Retest(request.repo, number, test_set=name)]
    )


def _refused(
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
    known = set(load_test_sets(settings.test_sets_file))
    if name is not None and known and name not in known:
        # Only configured names are shown, never the name as written.
        names = ", ".join(f"`{n}`" for n in sorted(known))
        mine = f", and `own:{number}` for this PR's own test files" if own is not None else ""
        return f"There is no such test set; known: {names}{mine}."
    return None
