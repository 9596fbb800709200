"""``stackbot restack --repo PATH_OR_URL --pr N=REF --old-base REF --onto REF [--json]``.

Replay a child PR's own commits (those not reachable from --old-base, the parent's branch as the
child was built on it) onto --onto, with git merge-tree and no checkout: one new commit per
replayed commit, with the original author and message. Each commit is reported clean, already in
the new base (left out) or conflicting with its paths; files the replay deletes or brings back
compared with a three-way merge of the branch are listed. The new head is kept at
refs/stackbot/restack/N in the mirror. Exit status: 0 clean, 1 a conflict, 2 bad input.
"""

from __future__ import annotations

from typing import Any

from stackbot.adapters.git import GitMirror
from stackbot.cli.onto import OntoRequest, register_onto_command, say
from stackbot.domain.restack import RestackResult, render_restack
from stackbot.services.restack import RestackRequest, restack
from stackbot.services.tree_allowlist import TreeAllowlist


def register(subparsers: Any) -> None:
    register_onto_command(
        subparsers,
        "restack",
        doc=__doc__,
        help="replay a child PR's own commits onto a new base, without a checkout",
        pr_help="the child PR and its head",
        start=(
            "--old-base",
            "the base the child was built on (the parent's branch or its old head)",
        ),
        onto_help="the new base (e.g. main after the merge)",
        work=_restack,
        render=render_restack,
    )


def _restack(mirror: GitMirror, asked: OntoRequest, allowlist: TreeAllowlist) -> RestackResult:
    request = RestackRequest(
        asked.pr, asked.head_ref, asked.start_ref, asked.onto_ref, asked.generated_files
    )
    return restack(mirror, request, allowlist=allowlist, progress=say)
