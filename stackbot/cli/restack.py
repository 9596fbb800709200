"""``stackbot restack --repo PATH_OR_URL --pr N=REF --old-base REF --onto REF [--json]``.

Replay a child PR's own commits (those not reachable from --old-base, the parent's branch as the
child was built on it) onto --onto, with git merge-tree and no checkout: one new commit per
replayed commit, with the original author and message. Each commit is reported clean, already in
the new base (left out) or conflicting with its paths; files the replay deletes or brings back
compared with a three-way merge of the branch are listed. The new head is kept at
refs/stackbot/restack/N in the mirror. Exit status: 0 clean, 1 a conflict, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from stackbot.cli.integrate import (
    _pr_ref,
    exit_on_failure,
    mirror_and_allowlist,
    settings_or_bad_input,
)
from stackbot.domain.restack import render_restack
from stackbot.services.restack import RestackRequest, restack


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "restack",
        help="replay a child PR's own commits onto a new base, without a checkout",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
    )
    parser.add_argument("--repo", required=True, metavar="PATH_OR_URL", help="the repository")
    parser.add_argument(
        "--pr", required=True, type=_pr_ref, metavar="N=REF", help="the child PR and its head"
    )
    parser.add_argument(
        "--old-base",
        required=True,
        metavar="REF",
        help="the base the child was built on (the parent's branch or its old head)",
    )
    parser.add_argument(
        "--onto", required=True, metavar="REF", help="the new base (e.g. main after the merge)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=_restack)


def _restack(args: argparse.Namespace) -> int:
    return exit_on_failure("restack", _run, args)


def _run(args: argparse.Namespace) -> int:
    settings = settings_or_bad_input()
    number, head_ref = args.pr
    request = RestackRequest(
        pr=number,
        head_ref=head_ref,
        old_base_ref=args.old_base,
        onto_ref=args.onto,
        generated_files=settings.generated_files,
    )
    with mirror_and_allowlist(args.repo, settings, [head_ref, args.old_base, args.onto]) as (
        mirror,
        allowlist,
    ):
        result = restack(mirror, request, allowlist=allowlist, progress=_say)
    print(json.dumps(result.to_json(), indent=2) if args.json else render_restack(result))
    if not args.json and result.ref_name:
        # The commit is in stackbot's mirror, not in --repo: say how to bring it over.
        print(f"to fetch it: git fetch {shlex.quote(str(mirror.git_dir))} {result.ref_name}")
    return result.exit_code


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
