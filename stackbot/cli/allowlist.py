"""``stackbot allowlist (regen|check) --repo PATH --rev REV [--format scope|line] [--json]``.

The process-group usage allowlist of one tree, read straight from git objects. The format is
the tree's file's (line-number KEYs: ``line``; scope KEYs: ``scope``), else ``--format``, else
``scope``.

``regen`` prints the file as the tree's checker's ``--update`` would write it (new reads are
reported, never added); exit 1 when a read is new or a file does not parse. ``check`` reports
new reads and stale entries by file and scope, a ``total`` that does not match the entries and
files that do not parse; exit 1 when any is found. Exit 2 on bad input (not a repository, an
unknown revision, a tree without the file for ``check``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from stackbot.adapters.git import GitRepository
from stackbot.cli.integrate import (
    exit_on_failure,
    open_mirror,
    scan_progress,
    settings_or_bad_input,
)
from stackbot.domain.allowlist import AllowlistCheck, Generation, Regeneration
from stackbot.errors import BadInput
from stackbot.services.tree_allowlist import (
    ScanTools,
    TreeAllowlist,
    run_repo_checker,
    tally_text,
)

EXIT_OK = 0
EXIT_FINDINGS = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "allowlist",
        help="regenerate or check the process-group usage allowlist of a tree",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="allowlist_command", metavar="ACTION", required=True)
    for action, help_text, handler in (
        ("regen", "print the allowlist regenerated from the tree", _regen_command),
        ("check", "check the tree's allowlist against the tree", _check_command),
    ):
        sub = actions.add_parser(action, help=help_text)
        sub.add_argument("--repo", required=True, metavar="PATH", help="a repository (path or URL)")
        sub.add_argument("--rev", required=True, metavar="REV", help="a branch, tag or commit")
        sub.add_argument(
            "--format",
            choices=[g.value for g in Generation],
            help="the checker generation, when the tree's file does not tell (default: scope)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON")
        sub.set_defaults(handler=handler)


def _regen_command(args: argparse.Namespace) -> int:
    return exit_on_failure("allowlist regen", _regen, args)


def _check_command(args: argparse.Namespace) -> int:
    return exit_on_failure("allowlist check", _check, args)


def _open(source: str, rev: str) -> GitRepository:
    path = Path(source).expanduser()
    if path.exists():
        return GitRepository.open(path)
    if "://" in source or "@" in source:
        return open_mirror(source, settings_or_bad_input(), [rev])
    raise BadInput(f"--repo {source}: no such directory; pass a repository's path")


def _tree_allowlist(repo: GitRepository) -> tuple[TreeAllowlist, ScanTools]:
    tools = ScanTools.from_settings(settings_or_bad_input())
    allowlist = TreeAllowlist(
        repo, cache=tools.cache, scanner=tools.scanner, progress=scan_progress()
    )
    return allowlist, tools


def _generation(args: argparse.Namespace) -> Generation | None:
    return Generation(args.format) if args.format else None


def _regen(args: argparse.Namespace) -> int:
    with _open(args.repo, args.rev) as repo:
        tree = repo.tree_of(repo.rev_parse(args.rev))
        allowlist, tools = _tree_allowlist(repo)
        try:
            result = allowlist.regenerate_tree(tree, generation=_generation(args))
        finally:
            tools.close()
    regeneration = result.regeneration
    if args.json:
        document = {"path": allowlist.path, "rev": args.rev, **regeneration.to_json()}
        document["file"] = regeneration.data.decode()
        document["previous_error"] = result.file.error
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(regeneration.data.decode())
        for line in _regen_summary(allowlist.path, regeneration, result.file.error):
            print(line, file=sys.stderr)
    return EXIT_FINDINGS if regeneration.needs_human else EXIT_OK


def _regen_summary(path: str, regeneration: Regeneration, error: str | None) -> list[str]:
    lines = []
    if error:
        lines.append(
            f"{path} in the tree does not parse ({error}); regenerated from the tree's reads"
        )
    lines.append(
        f"{path} ({regeneration.generation.value}): total {regeneration.total_before} → "
        f"{regeneration.total_after}, {len(regeneration.stale)} stale entries dropped, "
        f"{len(regeneration.new_reads)} new reads"
    )
    lines += [
        f"  new read (not added; needs a human): {tally_text(t)}" for t in regeneration.new_reads
    ]
    lines += [f"  stale entry dropped: {tally_text(t)}" for t in regeneration.stale]
    lines += [f"  does not parse: {p}: {why}" for p, why in sorted(regeneration.unparsed.items())]
    return lines


def _check(args: argparse.Namespace) -> int:
    with _open(args.repo, args.rev) as repo:
        commit = repo.rev_parse(args.rev)
        allowlist, tools = _tree_allowlist(repo)
        try:
            file, verdict = allowlist.check_tree(repo.tree_of(commit), generation=_generation(args))
        finally:
            tools.close()
        if file.blob is None:
            raise BadInput(f"{args.rev} has no {allowlist.path}; nothing to check")
        checker = settings_or_bad_input().allowlist_checker_command
        ok = verdict is not None and verdict.ok
        opinion = (
            run_repo_checker(repo, commit, checker, path=allowlist.path).describe(ok)
            if checker
            else None
        )
    if args.json:
        document: dict[str, Any] = {"path": allowlist.path, "rev": args.rev, "error": file.error}
        document.update(verdict.to_json() if verdict else {"ok": False})
        document["checker"] = opinion
        print(json.dumps(document, indent=2))
    else:
        print("\n".join(_check_lines(allowlist.path, file.error, verdict, opinion)))
    return EXIT_OK if ok else EXIT_FINDINGS


def _check_lines(
    path: str, error: str | None, verdict: AllowlistCheck | None, opinion: str | None
) -> list[str]:
    if verdict is None:
        return [f"{path} does not parse: {error}"]
    head = "ok" if verdict.ok else "FAILS"
    lines = [
        f"{path} ({verdict.generation.value}): {head}; total {verdict.declared_total}, {verdict.counted_total} entries"
    ]
    if verdict.total_mismatch:
        lines.append(
            f"  total {verdict.declared_total} does not match its {verdict.counted_total} entries"
        )
    lines += [f"  new read: {tally_text(t)}" for t in verdict.new_reads]
    lines += [f"  stale entry: {tally_text(t)}" for t in verdict.stale]
    lines += [f"  does not parse: {p}: {why}" for p, why in sorted(verdict.unparsed.items())]
    if opinion:
        lines.append(f"  {opinion}")
    return lines
