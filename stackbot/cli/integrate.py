"""``stackbot integrate --repo PATH_OR_URL --base REF (--pr N=REF)... [--series] [--json]``.

One integration run without a server. The repository (a local path, bare or not, or a URL) is
mirrored under the data directory and fetched; each ``--pr`` names a branch, ref or SHA there.
Without ``--series`` the PRs are one stack, merged in the given order, and the run stops at the
first real conflict. With ``--series`` the PRs are independent unless ``--depends N=M`` says PR
N depends on PR M: a conflicting PR is skipped together with every PR that depends on it, and
the rest are merged. Exit status: 0 clean (or resolved), 1 a conflict, an allowlist that fails
its check or a refused push, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import shared_use
from stackbot.config import Settings, load_settings
from stackbot.domain.commands import MAX_PR_NUMBER
from stackbot.domain.integration import (
    AllowlistReport,
    IntegrationRunResult,
    IntegrationStepResult,
    RunKind,
    RunStatus,
)
from stackbot.domain.types import PrNumber
from stackbot.errors import BadInput, StackbotError
from stackbot.services.integration import PushTarget, RunRequest, push_run, run_integration
from stackbot.services.tree_allowlist import ScanTools, TreeAllowlist

EXIT_CLEAN = 0
EXIT_FAILED = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "integrate",
        help="merge PR heads onto a base, regenerating the allowlist, without a checkout",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
    )
    parser.add_argument("--repo", required=True, metavar="PATH_OR_URL", help="the repository")
    parser.add_argument("--base", required=True, metavar="REF", help="the base ref (e.g. main)")
    parser.add_argument(
        "--pr",
        action="append",
        type=_pr_ref,
        default=[],
        metavar="N=REF",
        help="a PR head, in merge order",
    )
    parser.add_argument(
        "--series", action="store_true", help="skip conflicting PRs and their dependents"
    )
    parser.add_argument(
        "--depends",
        action="append",
        type=_dependency,
        default=[],
        metavar="N=M",
        help="with --series: PR N depends on PR M",
    )
    parser.add_argument(
        "--name", help="the run's name, for its refs under refs/stackbot/ (default: from --base)"
    )
    parser.add_argument(
        "--push",
        action="store_true",
        help="push the result to STACKBOT_PUSH_REMOTE, branch STACKBOT_PUSH_BRANCH_PREFIX + name",
    )
    parser.add_argument("--json", action="store_true", help="print the run as JSON")
    parser.set_defaults(handler=_integrate)


def _pr_number(text: str) -> PrNumber | None:
    """``N`` or ``#N`` with N a PR number GitHub can give (1 .. 2**31 - 1), else None."""
    digits = text.removeprefix("#")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 10:
        return None
    number = int(digits)
    return PrNumber(number) if 1 <= number <= MAX_PR_NUMBER else None


def _pr_ref(text: str) -> tuple[PrNumber, str]:
    number, sep, ref = text.partition("=")
    pr = _pr_number(number)
    if not sep or not ref or pr is None:
        raise argparse.ArgumentTypeError(
            f"--pr must be N=REF with N a PR number (1 .. {MAX_PR_NUMBER}), got {text!r}"
        )
    return pr, ref


def _dependency(text: str) -> tuple[PrNumber, PrNumber]:
    child, sep, parent = text.partition("=")
    child_pr, parent_pr = _pr_number(child), _pr_number(parent)
    if not sep or child_pr is None or parent_pr is None:
        raise argparse.ArgumentTypeError(
            f"--depends must be N=M with PR numbers (1 .. {MAX_PR_NUMBER}), got {text!r}"
        )
    return child_pr, parent_pr


def _integrate(args: argparse.Namespace) -> int:
    return exit_on_failure("integrate", _run, args)


def exit_on_failure(command: str, handler: Any, args: argparse.Namespace) -> int:
    """Exit 1 means conflicts (or a disagreeing allowlist) only: bad input, an unreachable
    repository or an unwritable data directory is exit 2 with one line naming what to fix,
    never a traceback."""
    try:
        return int(handler(args))
    except BadInput:
        raise
    except StackbotError as error:
        raise BadInput(one_line(str(error))) from None
    except OSError as error:
        raise BadInput(unwritable(error)) from None


def one_line(text: str) -> str:
    return " ".join(text.split())


def unwritable(error: OSError) -> str:
    """An OSError on stackbot's own files, as one line naming what to fix."""
    where = f" {error.filename}" if error.filename else ""
    return one_line(
        f"cannot write{where} ({error.strerror or error}); set STACKBOT_DATA_DIR to a "
        "writable directory"
    )


def _run(args: argparse.Namespace) -> int:
    if not args.pr:
        raise BadInput("give at least one --pr N=REF (the PR heads to merge, in order)")
    if args.depends and not args.series:
        raise BadInput(
            "--depends only means something with --series (a stack run stops at the first conflict)"
        )
    known = {number for number, _ in args.pr}
    unknown = sorted({n for pair in args.depends for n in pair} - known)
    if unknown:
        raise BadInput(
            f"--depends names PR {', '.join(f'#{n}' for n in unknown)}, which no --pr gives"
        )
    settings = settings_or_bad_input()
    name = args.name or _default_name(args.base)
    push = _push_target(settings, name) if args.push else None
    depends: dict[PrNumber, list[PrNumber]] = {}
    for child, parent in args.depends:
        depends.setdefault(child, []).append(parent)
    request = RunRequest(
        base_ref=args.base,
        prs=args.pr,
        kind=RunKind.SERIES if args.series else RunKind.STACK,
        name=name,
        depends_on=depends,
        generated_files=settings.generated_files,
        checker_command=settings.allowlist_checker_command,
    )
    failure = None
    names = [args.base, *(ref for _, ref in args.pr)]
    with mirror_and_allowlist(args.repo, settings, names) as (mirror, allowlist):
        result = run_integration(mirror, request, allowlist=allowlist, progress=_say)
        if push is not None:
            try:
                result = push_run(mirror, result, push)
            except StackbotError as error:
                failure = f"stackbot integrate: not pushed: {error}"
    print(json.dumps(result.to_json(), indent=2) if args.json else render_run(result))
    if failure:
        _say(failure)
    conflicted = result.status is RunStatus.CONFLICT
    failed = conflicted or failure or (result.allowlist is not None and not result.allowlist.ok)
    return EXIT_FAILED if failed else EXIT_CLEAN


def settings_or_bad_input() -> Settings:
    try:
        return load_settings()
    except (ValueError, OSError) as error:  # pydantic's ValidationError is a ValueError
        raise BadInput(f"the settings are invalid: {error}") from None


@contextmanager
def mirror_and_allowlist(
    source: str, settings: Settings, names: Sequence[str]
) -> Iterator[tuple[GitMirror, TreeAllowlist]]:
    """The mirror of ``source`` with ``names`` fetched, held under its shared maintenance lock
    (a repack waits), and a :class:`TreeAllowlist` on the shared scan cache and scanner
    processes, closed on the way out: what every command that merges in a mirror needs."""
    with (
        open_mirror(source, settings, names) as mirror,
        shared_use(mirror.git_dir, wait_s=settings.maintenance.lock_wait_s),
    ):
        tools = ScanTools.from_settings(settings)
        try:
            yield (
                mirror,
                TreeAllowlist(
                    mirror, cache=tools.cache, scanner=tools.scanner, progress=scan_progress()
                ),
            )
        finally:
            tools.close()


def open_mirror(source: str, settings: Settings, names: Sequence[str]) -> GitMirror:
    """The mirror of ``source`` under the data directory, with what ``names`` (the branches,
    refs and SHAs given on the command line) need fetched, and nothing else."""
    check_names(names)
    settings.mirrors_dir.mkdir(parents=True, exist_ok=True)
    mirror = GitMirror.open_or_clone(
        source, settings.mirrors_dir, timeout=settings.git_fetch_timeout_s
    )
    refs = refs_to_fetch(names)
    what = "every branch and PR head" if refs is None else ", ".join(map(shown, refs))
    # The progress line is ended ("done" / "failed") before anything else is printed, so an
    # error line never reads as the continuation of the fetch.
    _say(f"fetching {shown(mirror.source)} ({what}) into {shown(str(mirror.git_dir))} ...", end="")
    try:
        mirror.fetch(refs)
    except BaseException:
        _say(" failed")
        raise
    _say(" done")
    return mirror


def check_names(names: Sequence[str]) -> None:
    """A name with whitespace or a control character is no ref git can fetch (and would split
    the lines that show it): refused before anything is fetched."""
    for name in names:
        if not name or any(ch.isspace() or not ch.isprintable() for ch in name):
            raise BadInput(
                f"{shown(name)} is not a branch, ref or SHA git can fetch "
                "(no spaces or control characters)"
            )


def shown(text: str) -> str:
    """``text`` for one output line: as it is when printable without spaces, else quoted with
    its escapes (a newline in a ref never splits the line)."""
    plain = text and all(ch.isprintable() and not ch.isspace() for ch in text)
    return text if plain else json.dumps(text)


def refs_to_fetch(names: Sequence[str]) -> list[str] | None:
    """What to fetch for names given as ``--base``/``--pr``/``--rev``: a full ref or SHA as it
    is, ``pull/N/head`` under ``refs/``, any other name as a branch. An abbreviated SHA cannot
    be fetched by itself: then every branch and PR head is (None)."""
    refs: list[str] = []
    for name in names:
        if re.fullmatch(r"[0-9a-fA-F]{7,39}", name):
            return None
        if name.startswith("refs/") or re.fullmatch(r"[0-9a-fA-F]{40}", name):
            refs.append(name)
        elif re.fullmatch(r"pull/\d+/head", name):
            refs.append(f"refs/{name}")
        else:
            refs.append(f"refs/heads/{name}")
    return refs


def _default_name(base: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-.")[:100] or "run"


def _push_target(settings: Settings, name: str) -> PushTarget:
    if not settings.push_remote:
        raise BadInput(
            "--push needs STACKBOT_PUSH_REMOTE (a remote URL, or 'origin' for the repository itself)"
        )
    return PushTarget(settings.push_remote, f"{settings.push_branch_prefix}{name}")


def _say(line: str, end: str = "\n") -> None:
    print(line, file=sys.stderr, flush=True, end=end)


def scan_progress(every: int = 500) -> Any:
    """Report a long allowlist scan every ``every`` files (the first scan of a big tree)."""

    def progress(done: int, total: int) -> None:
        if total >= every and (done % every == 0 or done == total):
            _say(f"  allowlist scan: {done}/{total} files")

    return progress


def render_run(result: IntegrationRunResult) -> str:
    ref = f" ({result.ref_name})" if result.ref_name else ""
    lines = [
        f"{result.kind.value} run {result.name}{ref}: {result.status.value}",
        f"base {result.base_ref} {result.base_sha[:12]}",
    ]
    for step in result.steps:
        lines.extend(_render_step(step))
    lines.append(f"final tree {result.final_tree[:12]}  commit {result.final_commit[:12]}")
    if result.pushed_to:
        lines.append(f"pushed to {result.pushed_to}")
    if result.allowlist is not None:
        lines.extend(render_report(result.allowlist))
    return "\n".join(lines)


def _render_step(step: IntegrationStepResult) -> list[str]:
    head = f"{step.position:3d}. #{step.pr} {step.head_sha[:9]}  {step.outcome.value}"
    if step.commit:
        head += f"  tree {step.tree[:9] if step.tree else '-'}  commit {step.commit[:9]}"
    lines = [head]
    if step.skipped_reason:
        lines.append(f"       skipped: {step.skipped_reason}")
    if step.conflicts:
        paths = ", ".join(f"{c.path} ({c.kind})" for c in step.conflicts)
        with_ = (
            f"  — with {', '.join(f'#{n}' for n in step.conflicts_with)}"
            if step.conflicts_with
            else ""
        )
        lines.append(f"       conflicts: {paths}{with_}")
    if step.resolution:
        lines.append(f"       resolution: {step.resolution}")
    elif step.allowlist is not None and step.allowlist.rewritten:
        lines.append(
            f"       allowlist regenerated: total {step.allowlist.total_before} → {step.allowlist.total_after}"
        )
    return lines


def render_report(report: AllowlistReport) -> list[str]:
    delta = (
        f", {report.delta:+d} from the base's {report.base_total}"
        if report.delta is not None
        else ""
    )
    verdict = "ok" if report.ok else "FAILS its check"
    lines = [f"allowlist {report.path} ({report.format}): total {report.total}{delta}; {verdict}"]
    if report.total != report.entries:
        lines.append(f"  total {report.total} does not match its {report.entries} entries")
    lines += [f"  new read: {text}" for text in report.new_reads]
    lines += [f"  stale entry: {text}" for text in report.stale]
    lines += [f"  does not parse: {text}" for text in report.unparsed]
    if report.checker:
        lines.append(f"  {report.checker}")
    return lines
