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

from typing import Any

from stackbot.adapters.git import GitMirror
from stackbot.cli.onto import OntoRequest, register_onto_command, say
from stackbot.domain.port import PortResult, render_port
from stackbot.services.port import PortRequest, port
from stackbot.services.tree_allowlist import TreeAllowlist


def register(subparsers: Any) -> None:
    register_onto_command(
        subparsers,
        "port",
        doc=__doc__,
        help="apply a PR's change to another branch as one commit with Upstream-* trailers",
        pr_help="the PR and its head",
        start=(
            "--upstream-base",
            "where the PR's change starts (its merge base with its own base branch)",
        ),
        onto_help="the branch to port to",
        work=_port,
        render=render_port,
    )


def _port(mirror: GitMirror, asked: OntoRequest, allowlist: TreeAllowlist) -> PortResult:
    request = PortRequest(
        asked.pr, asked.head_ref, asked.start_ref, asked.onto_ref, asked.generated_files
    )
    return port(mirror, request, allowlist=allowlist, progress=say)
