"""Bases a PR must not be merged into.

Megatron-LM's guidance for split PRs: a child may be stacked on ``pull-request/<N>`` — the
mirror branch NVIDIA's CI bot makes of PR N after a vetter's ``/ok to test`` — but a PR whose
base is such a branch must never be merged: its squash would land in the bot's branch, not in
``main``. Such a PR gets a failing ``stackbot/base`` check and one comment; once its base is
changed the check passes and the comment says so (edited in place, found by its marker).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from stackbot.domain.types import PrNumber

CHECK_NAME = "stackbot/base"
MARKER = "<!-- stackbot:base -->"
_MIRROR = re.compile(r"^pull-request/(\d+)$")


def protected_pattern(base_ref: str, patterns: Sequence[str]) -> str | None:
    """The first pattern ``base_ref`` matches (None: a base one may merge into)."""
    for pattern in patterns:
        if fnmatch.fnmatchcase(base_ref, pattern):
            return pattern
    return None


def mirrored_pr(base_ref: str) -> PrNumber | None:
    """N for ``pull-request/N`` (the CI bot's mirror of PR N)."""
    found = _MIRROR.match(base_ref)
    return PrNumber(int(found.group(1))) if found else None


@dataclass(frozen=True)
class BaseVerdict:
    conclusion: str  # "failure" | "success"
    title: str
    summary: str


def blocked(base_ref: str, target: str) -> BaseVerdict:
    return BaseVerdict(
        "failure",
        f"Retarget to {target} before merging",
        f"This pull request's base is `{base_ref}`; merging it would land its changes there, "
        f"not in `{target}`. Change the base to `{target}` before merging.",
    )


def cleared(base_ref: str) -> BaseVerdict:
    return BaseVerdict(
        "success", f"Base is {base_ref}", f"This pull request merges into `{base_ref}`."
    )


def base_comment(base_ref: str, target: str) -> str:
    number = mirrored_pr(base_ref)
    what = (
        f"`{base_ref}` is the branch NVIDIA's CI bot mirrors #{number} to after `/ok to test`"
        if number is not None
        else f"`{base_ref}` is a branch pull requests must not be merged into"
    )
    stacked = (
        f" Stacking on it is right while #{number} is reviewed, but merging this pull request "
        f"would land its squash in the bot's branch, not in `{target}`."
        if number is not None
        else ""
    )
    return (
        f"{MARKER}\n**Retarget to `{target}` before merging.** {what}.{stacked} Change this "
        f"pull request's base to `{target}` (Edit, next to the title) once "
        f"{f'#{number} has merged' if number is not None else 'it is ready'}; the "
        f"`{CHECK_NAME}` check fails until then."
    )


def resolved_comment(old_comment_target: str, base_ref: str) -> str:
    return (
        f"{MARKER}\n~~Retarget to `{old_comment_target}` before merging.~~ Done: this pull "
        f"request's base is `{base_ref}` now, and the `{CHECK_NAME}` check passes."
    )
