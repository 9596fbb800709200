"""Commands people write in PR comments: what counts as one, and the fixed texts of replies.

What counts as a command (deliberately strict, so discussion never triggers anything):

- A command is a line of its own that starts (after at most three spaces) with ``/ok to test``
  or ``/stackbot``. The words are matched case-insensitively with any run of blanks between them.
- Lines inside fenced code blocks (````` ``` ````` or ``~~~``), indented code (four or more leading
  spaces or a tab) and quoted replies (``> /ok to test ...``) are not commands: quoting someone's
  approval must not approve again.
- The first command line of a comment is the comment's command; the rest is ignored.
- ``/ok to test`` takes the next word as the SHA (missing or non-hex SHAs are refused with a
  reply, since the writer clearly meant a command). ``/stackbot retest [TEST_SET]`` (a
  configured test set, or ``own:N``: PR N's own test files, on PR N only),
  ``/stackbot status``, ``/stackbot depends-on #N`` and ``/stackbot no-dependency #N`` (``N``
  alone too), ``/stackbot restack [--push]`` and ``/stackbot port <branch>`` are the other
  commands, each parsed by its rule in ``_VERBS``; any other ``/stackbot`` word (or a known
  verb whose words do not fit) is an :class:`Unknown` command that gets a usage reply.

Each command type has one handler module in :mod:`stackbot.services.commands`.

Replies never render what the commenter wrote (a backtick would close a code span and let the
rest through as markdown: mentions, images): they are fixed texts, showing at most a SHA the
commenter gave once it is known to be hex digits only.

Whether an ``/ok to test`` approves a commit is :mod:`stackbot.domain.vetting`'s decision.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_OK_TO_TEST = re.compile(r"^ {0,3}/ok[ \t]+to[ \t]+test(?:[ \t]+(?P<rest>.*))?$", re.IGNORECASE)
_STACKBOT = re.compile(r"^ {0,3}/stackbot(?:[ \t]+(?P<rest>.*))?$", re.IGNORECASE)


@dataclass(frozen=True)
class OkToTest:
    sha_text: str  # as written; "" when the SHA is missing


@dataclass(frozen=True)
class Retest:
    test_set: str | None


@dataclass(frozen=True)
class Status:
    pass


@dataclass(frozen=True)
class DependsOn:
    """``/stackbot depends-on #N``: this PR depends on N, whatever its text says."""

    parent: int
    line: str  # the command line as written (stored with the override, never echoed)


@dataclass(frozen=True)
class NoDependency:
    """``/stackbot no-dependency #N``: this PR does not depend on N, whatever its text says."""

    parent: int
    line: str


@dataclass(frozen=True)
class Restack:
    """``/stackbot restack [--push]``: replay the PR's own commits onto its base (the PR's
    author or a vetter); ``--push`` (the author only) lets stackbot push the result."""

    push: bool = False


@dataclass(frozen=True)
class Port:
    """``/stackbot port <branch>`` (vetters): a faithful port of the PR onto ``branch``."""

    branch: str


@dataclass(frozen=True)
class TestAlone:
    """``/stackbot test-alone`` (vetters): test the PR's own tree, main + its ancestors +
    itself, which series-first testing leaves to the series tree (issue 24)."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class QuarantineTest:
    """``/stackbot quarantine <test>`` (maintainers): quarantine a test, or renew its
    quarantine."""

    nodeid: str


@dataclass(frozen=True)
class ReleaseTest:
    """``/stackbot release <test>`` (maintainers): end a test's quarantine."""

    nodeid: str


@dataclass(frozen=True)
class Land:
    """``/stackbot land [#N]`` (vetters): land the series, or its prefix up to and including
    #N; ``/stackbot land cancel`` (``cancel``) takes it out of the queue."""

    up_to: int | None = None
    cancel: bool = False


@dataclass(frozen=True)
class Unknown:
    """A ``/stackbot`` line with a word stackbot does not know (answered with usage)."""

    text: str


Command = (
    OkToTest
    | Retest
    | Status
    | DependsOn
    | NoDependency
    | Restack
    | Port
    | TestAlone
    | QuarantineTest
    | ReleaseTest
    | Land
    | Unknown
)

USAGE = (
    "Commands: `/ok to test <sha>` (vetters: test this commit), "
    "`/stackbot retest [TEST_SET | own:N]` (vetters), `/stackbot status`, "
    "`/stackbot depends-on #N` and `/stackbot no-dependency #N` (the PR's author or vetters), "
    "`/stackbot restack [--push]` (the author or a vetter), `/stackbot port <branch>` (vetters), "
    "`/stackbot test-alone` (vetters: test this PR's own tree, without the PRs above it), "
    "`/stackbot quarantine <test>` and `/stackbot release <test>` (maintainers), "
    "`/stackbot land [#N]` and `/stackbot land cancel` (vetters)."
)
_PR_NUMBER = re.compile(r"#?(?P<number>[1-9]\d{0,9})")
MAX_PR_NUMBER = 2**31 - 1
# A branch name a port may target: git's rules, narrowed (no "..", no leading "-" or "/").
_BRANCH = re.compile(r"^(?!.*\.\.)(?!.*//)[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}(?<![./])$")


def parse_command(body: str) -> Command | None:
    """The first command line of a comment body, or None when the comment holds none."""
    fence: str | None = None
    for raw in body.splitlines():
        line = raw.rstrip()
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        if line.startswith(("    ", "\t")):
            continue
        command = _parse_line(line)
        if command is not None:
            return command
    return None


def _parse_line(line: str) -> Command | None:
    ok = _OK_TO_TEST.match(line)
    if ok:
        words = (ok.group("rest") or "").split()
        return OkToTest(sha_text=words[0] if words else "")
    bot = _STACKBOT.match(line)
    if not bot:
        return None
    words = (bot.group("rest") or "").split()
    rule = _VERBS.get(words[0].lower()) if words else None
    command = rule(words[1:], line.strip()) if rule is not None else None
    return command if command is not None else Unknown(text=line.strip())


# -- one parse rule per ``/stackbot`` verb: (the words after the verb, the line) -> the
# command, or None when they do not fit (an Unknown command, answered with usage).


def _retest(args: list[str], line: str) -> Command | None:
    return Retest(test_set=args[0] if args else None) if len(args) <= 1 else None


def _status(args: list[str], line: str) -> Command | None:
    return Status() if not args else None


def _parent(args: list[str]) -> int | None:
    number = _PR_NUMBER.fullmatch(args[0]) if len(args) == 1 else None
    if number is None or int(number.group("number")) > MAX_PR_NUMBER:
        return None
    return int(number.group("number"))


def _depends_on(args: list[str], line: str) -> Command | None:
    parent = _parent(args)
    return DependsOn(parent=parent, line=line) if parent is not None else None


def _no_dependency(args: list[str], line: str) -> Command | None:
    parent = _parent(args)
    return NoDependency(parent=parent, line=line) if parent is not None else None


def _restack(args: list[str], line: str) -> Command | None:
    return Restack(push=bool(args)) if args in ([], ["--push"]) else None


def _port(args: list[str], line: str) -> Command | None:
    return Port(branch=args[0]) if len(args) == 1 and _BRANCH.match(args[0]) else None


def _land(args: list[str], line: str) -> Command | None:
    if not args:
        return Land()
    if [a.lower() for a in args] == ["cancel"]:
        return Land(cancel=True)
    number = _parent(args)
    return Land(up_to=number) if number is not None else None


def _test_alone(args: list[str], line: str) -> Command | None:
    return TestAlone() if not args else None


# A pytest node id a maintainer may name: a test file path, then ::-separated names, with an
# optional parameter id in brackets (plain characters only, so a reply can show it).
_NODEID = re.compile(
    r"^[A-Za-z0-9_./-]{1,400}\.py(::[A-Za-z0-9_]{1,200}){1,3}(\[[A-Za-z0-9_.,=+-]{0,200}\])?$"
)


def _quarantine(args: list[str], line: str) -> Command | None:
    return QuarantineTest(args[0]) if len(args) == 1 and _NODEID.match(args[0]) else None


def _release(args: list[str], line: str) -> Command | None:
    return ReleaseTest(args[0]) if len(args) == 1 and _NODEID.match(args[0]) else None


_VERBS: dict[str, Callable[[list[str], str], Command | None]] = {
    "land": _land,
    "test-alone": _test_alone,
    "quarantine": _quarantine,
    "release": _release,
    "retest": _retest,
    "status": _status,
    "depends-on": _depends_on,
    "no-dependency": _no_dependency,
    "restack": _restack,
    "port": _port,
}


def command_usage_reply() -> str:
    """The reply to an :class:`Unknown` command: a fixed text (never the command's words)."""
    return f"stackbot does not know that command. {USAGE}"


def test_alone_refusal(commenter: str) -> str:
    return (
        f"@{commenter}, only vetters (write access, or listed as vetters in stackbot's "
        "configuration) can ask for a test of this PR's own tree."
    )


def test_alone_reply(
    number: int, *, tree: Sequence[int], commit: str | None, base_ref: str, waiting: str | None
) -> str:
    """The answer to a vetter's ``/stackbot test-alone``: which tree is tested (its PRs and
    commit), or why it cannot be yet. ``tree`` is empty while the PR's current head is not
    integrated; ``waiting`` says which PRs of it still need an approval."""
    if not tree:
        return (
            f"#{number}'s current head is not integrated yet: ask again once its comment shows "
            "its stack integration."
        )
    prs = ", ".join(f"#{n}" for n in tree)
    what = f"#{number}'s own tree, {base_ref} + {prs}"
    if commit is None:
        return f"{what}, does not merge cleanly, so it cannot be tested: its comment says why."
    if waiting is not None:
        return f"{what}, cannot be tested yet: {waiting}."
    return (
        f"Testing {what} (`{commit[:7]}`), without the PRs above it: the configured test sets "
        "and its own test files, reusing any result of an identical tree. Its comment and check "
        "runs will name this tree."
    )


def quarantine_refusal(commenter: str) -> str:
    return (
        f"@{commenter}, only maintainers (write access to the repository) can quarantine or "
        "release a test."
    )


def land_refusal(commenter: str) -> str:
    return (
        f"@{commenter}, only vetters (write access, or listed as vetters in stackbot's "
        "configuration) can land a series."
    )


def retest_refusal(commenter: str) -> str:
    return (
        f"@{commenter}, only vetters (write access, or listed as vetters in stackbot's "
        "configuration) can ask for a retest."
    )


# A path shown in a reply: plain path characters only, since a file name is the PR author's
# text (a backtick would close the code span around it).
_SHOWN_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$")
MAX_NAMED_FILES = 10


def retest_reply(
    number: int,
    *,
    test_sets: Sequence[str],
    own: bool,
    own_files: Sequence[str] = (),
    integrated: bool = True,
) -> str:
    """The answer to an accepted ``/stackbot retest``, naming what is retested: the configured
    test sets (names from the configuration, never the comment's words) and, with ``own``,
    ``own:N``, the PR's own test files, with their paths where known."""
    parts = [f"`{name}`" for name in test_sets]
    if own:
        files = f": {_paths(own_files)}" if own_files else ""
        parts.append(f"`own:{number}` (#{number}'s own test files{files})")
    what = _joined(parts) or "nothing"
    if not integrated:
        return (
            f"#{number}'s current head is not integrated yet: {what} will be tested on its "
            "tree once it is."
        )
    return f"Retesting {what} on #{number}'s current tree: new jobs, no earlier result reused."


def retest_own_refusal(number: int, *, asked: int | None, roots: Sequence[str] | None) -> str:
    """Why ``/stackbot retest own:M`` runs nothing: M is another PR (``asked``), the
    repository runs no PR's own test files (``roots`` None), or this PR has none under
    ``roots``."""
    if asked is not None and asked != number:
        return (
            f"`own:{asked}` is #{asked}'s own test files; on #{number}, "
            f"`/stackbot retest own:{number}` retests this PR's own test files."
        )
    if roots is None:
        return (
            "This repository does not run PRs' own test files (its test-set file has no "
            f"`[own_tests]` table): `own:{number}` has nothing to retest."
        )
    where = _joined([f"`{root}`" for root in roots if _SHOWN_PATH.match(root)]) or "the roots"
    return (
        f"#{number} adds or modifies no test file under {where} on its current head: "
        f"`own:{number}` has nothing to retest."
    )


def _paths(paths: Sequence[str]) -> str:
    shown = [f"`{path}`" for path in paths if _SHOWN_PATH.match(path)][:MAX_NAMED_FILES]
    rest = len(paths) - len(shown)
    if rest:
        shown.append(f"{rest} more file{'' if rest == 1 else 's'}")
    return ", ".join(shown)


def _joined(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def dependency_override_refusal(commenter: str) -> str:
    return (
        f"@{commenter}, only the PR's author and vetters can change what it depends on "
        "(`/stackbot depends-on #N`, `/stackbot no-dependency #N`)."
    )


def dependency_on_itself_reply() -> str:
    return "A pull request cannot depend on itself; name another PR."


def stack_command_on_issue_reply() -> str:
    """The reply to ``/stackbot restack`` or ``port`` written on an issue."""
    return "That command works on pull requests only; this is an issue."
