"""``stackbot port --repo PATH_OR_URL --pr N=REF --upstream-base REF --onto REF [--json]``.

A faithful port: the PR's change (the diff from --upstream-base to the PR's head) applied onto
--onto with git merge-tree, no checkout, and the allowlist regenerated on the result as
integration runs do. One commit is written on top of --onto (kept at
refs/stackbot/port/N/ONTO in the mirror); its message lists per file what applied verbatim, what
needed adaptation and what the branch already had, and ends with the trailers Upstream-PR,
Upstream-Base and Upstream-Head. Exit status: 0 every file applied, 1 a conflict (no commit; the
conflicting paths and lines are listed), 2 bad input.
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
from stackbot.domain.port import render_port
from stackbot.services.port import PortRequest, port


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "port",
        help="apply a PR's change to another branch as one commit with Upstream-* trailers",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None,
    )
    parser.add_argument("--repo", required=True, metavar="PATH_OR_URL", help="the repository")
    parser.add_argument(
        "--pr", required=True, type=_pr_ref, metavar="N=REF", help="the PR and its head"
    )
    parser.add_argument(
        "--upstream-base",
        required=True,
        metavar="REF",
        help="where the PR's change starts (its merge base with its own base branch)",
    )
    parser.add_argument("--onto", required=True, metavar="REF", help="the branch to port to")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(handler=_port)


def _port(args: argparse.Namespace) -> int:
    return exit_on_failure("port", _run, args)


def _run(args: argparse.Namespace) -> int:
    settings = settings_or_bad_input()
    number, head_ref = args.pr
    request = PortRequest(
        pr=number,
        head_ref=head_ref,
        upstream_base_ref=args.upstream_base,
        onto_ref=args.onto,
        generated_files=settings.generated_files,
    )
    with mirror_and_allowlist(args.repo, settings, [head_ref, args.upstream_base, args.onto]) as (
        mirror,
        allowlist,
    ):
        result = port(mirror, request, allowlist=allowlist, progress=_say)
    print(json.dumps(result.to_json(), indent=2) if args.json else render_port(result))
    if not args.json and result.ref_name:
        # The commit is in stackbot's mirror, not in --repo: say how to bring it over.
        print(f"to fetch it: git fetch {shlex.quote(str(mirror.git_dir))} {result.ref_name}")
    return result.exit_code


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
