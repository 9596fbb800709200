"""Faithful ports: a PR's change (upstream base → PR head) applied to another branch, and what
happened to each file, in words a reviewer checks against the PR (seed: "faithful dev port of
main PR #7523 at 2a32b86").

Per file the PR changes:

- ``verbatim``: the port removes and adds exactly the lines the PR removes and adds (the
  context around them may differ: the branch's own lines are kept);
- ``adapted``: the port differs from the PR on this file, and the note says how (applied to
  the file's new name on the branch, some of the PR's lines already there, ...);
- ``already present``: the branch already has the PR's change to this file; the port changes
  nothing there;
- ``regenerated``: a generated file (the allowlist), rewritten on the ported tree as the
  repository's checker would, never merged textually.

The commit message lists each group and ends with the trailers ``Upstream-PR: #N``,
``Upstream-Base: <short sha>`` and ``Upstream-Head: <short sha>`` (``git interpret-trailers
--parse`` reads them back). A port with a conflict writes no commit; its report names each
conflicting path and the conflicting lines.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Any

from stackbot.domain.integration import Conflict
from stackbot.domain.types import PrNumber, Sha

EXIT_CLEAN = 0
EXIT_CONFLICT = 1


class FileOutcome(Enum):
    VERBATIM = "verbatim"
    ADAPTED = "adapted"
    ALREADY_PRESENT = "already present"
    REGENERATED = "regenerated"


@dataclass(frozen=True)
class LineChange:
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    binary: bool = False


@dataclass(frozen=True)
class PortedFile:
    path: str  # the PR's path
    outcome: FileOutcome
    note: str | None = None

    def line(self) -> str:
        return f"- {self.path}: {self.note}" if self.note else f"- {self.path}"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "outcome": self.outcome.value, "note": self.note}


def classify_file(
    path: str, pr: LineChange, port: LineChange | None, *, branch_path: str | None = None
) -> PortedFile:
    """Compare what the PR does to ``path`` with what the port does to it (``port`` None:
    the port leaves the file as the branch has it). ``branch_path`` is the file's name on the
    branch when the branch renamed it."""
    renamed = f"applied to {branch_path} (renamed on the branch)" if branch_path else None
    if port is None or (not port.removed and not port.added and not port.binary):
        return PortedFile(path, FileOutcome.ALREADY_PRESENT)
    if pr.binary or port.binary:
        same = pr.binary and port.binary
        if same and not renamed:
            return PortedFile(path, FileOutcome.VERBATIM)
        return PortedFile(path, FileOutcome.ADAPTED, renamed or "binary content merged")
    pr_lines = Counter(("-", t) for t in pr.removed) + Counter(("+", t) for t in pr.added)
    port_lines = Counter(("-", t) for t in port.removed) + Counter(("+", t) for t in port.added)
    if pr_lines == port_lines:
        if renamed:
            return PortedFile(path, FileOutcome.ADAPTED, renamed)
        return PortedFile(path, FileOutcome.VERBATIM)
    missing = sum((pr_lines - port_lines).values())
    extra = sum((port_lines - pr_lines).values())
    total = sum(pr_lines.values())
    notes = [renamed] if renamed else []
    if missing:
        notes.append(
            f"{missing} of the {total} lines the PR removes or adds were already so on the "
            "branch (left as they are)"
        )
    if extra:
        notes.append(f"{extra} line{'s' if extra != 1 else ''} merged with the branch's own")
    return PortedFile(path, FileOutcome.ADAPTED, "; ".join(notes))


@dataclass(frozen=True)
class ConflictedFile:
    conflict: Conflict
    hunks: tuple[tuple[int, tuple[str, ...], tuple[str, ...]], ...] = ()  # (line, branch, PR)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.conflict.to_json(),
            "hunks": [
                {"line": line, "branch": list(ours), "pr": list(theirs)}
                for line, ours, theirs in self.hunks
            ],
        }


@dataclass(frozen=True)
class PortResult:
    pr: PrNumber
    upstream_base: Sha
    head: Sha
    onto: Sha
    onto_ref: str
    files: tuple[PortedFile, ...]
    conflicts: tuple[ConflictedFile, ...]
    commit: Sha | None
    message: str | None
    ref_name: str | None = None
    # With conflicts: merge-tree's tree, the conflicting files holding conflict markers (what the
    # bot's draft pull request carries); never written by the CLI.
    conflicted_tree: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CLEAN if self.commit else EXIT_CONFLICT

    def to_json(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "upstream_base": self.upstream_base,
            "head": self.head,
            "onto": self.onto,
            "onto_ref": self.onto_ref,
            "status": "clean" if self.commit else "conflict",
            "commit": self.commit,
            "ref": self.ref_name,
            "files": [f.to_json() for f in self.files],
            "conflicts": [c.to_json() for c in self.conflicts],
            "message": self.message,
        }


_GROUPS = (
    (FileOutcome.VERBATIM, "Applied verbatim"),
    (FileOutcome.ADAPTED, "Adapted"),
    (FileOutcome.ALREADY_PRESENT, "Already on the branch"),
    (FileOutcome.REGENERATED, "Regenerated"),
)


def port_message(
    *,
    pr: PrNumber,
    subject: str,
    onto_ref: str,
    onto_short: str,
    base_short: str,
    head_short: str,
    files: tuple[PortedFile, ...],
) -> str:
    title = f"Port #{pr} to {onto_ref}: {subject}".strip()
    if len(title) > 72:
        title = title[:71] + "…"
    intro = (
        f"Faithful port of #{pr} at {head_short} (upstream base {base_short}) onto "
        f"{onto_ref} at {onto_short}, applied with git merge-tree."
    )
    lines = [title, "", *textwrap.wrap(intro, 72)]
    for outcome, heading in _GROUPS:
        group = [f for f in files if f.outcome is outcome]
        if group:
            lines += ["", f"{heading} ({len(group)}):", *(f.line() for f in group)]
    lines += [
        "",
        f"Upstream-PR: #{pr}",
        f"Upstream-Base: {base_short}",
        f"Upstream-Head: {head_short}",
    ]
    return "\n".join(lines) + "\n"


def render_port(result: PortResult) -> str:
    status = "clean" if result.commit else "conflict"
    lines = [
        f"port of #{result.pr} ({result.upstream_base[:9]}..{result.head[:9]}) onto "
        f"{result.onto_ref} ({result.onto[:9]}): {status}"
    ]
    for outcome, heading in _GROUPS:
        group = [f for f in result.files if f.outcome is outcome]
        if group:
            lines.append(f"{heading.lower()}:")
            lines += [f"  {f.line()[2:]}" for f in group]
    if result.conflicts:
        lines.append("conflicts (no commit written):")
        for conflicted in result.conflicts:
            lines.append(f"  {conflicted.conflict.path} ({conflicted.conflict.kind})")
            for line, ours, theirs in conflicted.hunks:
                lines.append(f"    at line {line}:")
                lines += [f"      branch| {text}" for text in ours]
                lines += [f"      PR    | {text}" for text in theirs]
    if result.commit:
        where = f" ({result.ref_name})" if result.ref_name else ""
        lines.append(f"commit {result.commit}{where}")
    return "\n".join(lines)


def port_reply(
    result: PortResult, *, pushed_branch: str | None, draft_pr: int | None = None
) -> str:
    """The bot's answer to ``/stackbot port <branch>``."""
    head = (
        f"**stackbot port** of #{result.pr} (`{result.upstream_base[:7]}..{result.head[:7]}`) "
        f"onto `{result.onto_ref}` (`{result.onto[:7]}`): "
    )
    if result.commit is None:
        if draft_pr is not None:
            lines = [
                head + f"conflicts; opened draft pull request #{draft_pr} from "
                f"`{pushed_branch}` with the conflicting files marked, to resolve there.",
                "",
            ]
        else:
            lines = [head + "conflicts; no commit was written.", ""]
        lines += conflict_lines(result)
        if draft_pr is None:
            lines += ["", "Port the conflicting files by hand, or retry once the branch has moved."]
        return "\n".join(lines)
    lines = [
        head + "every file applied.",
        "",
        "```",
        (result.message or "").rstrip().replace("```", "'''"),
        "```",
        "",
    ]
    if pushed_branch:
        lines.append(
            f"Pushed as branch `{pushed_branch}`: open a pull request from it into "
            f"`{result.onto_ref}`."
        )
    return "\n".join(lines)


def conflict_lines(result: PortResult) -> list[str]:
    """The conflicting paths with their first hunks (branch side first), as Markdown."""
    lines: list[str] = []
    for conflicted in result.conflicts:
        lines.append(f"- `{conflicted.conflict.path}` ({conflicted.conflict.kind})")
        for line, ours, theirs in conflicted.hunks[:5]:
            lines += [f"  at line {line}:", "  ```"]
            lines.append(f"  <<<<<<< {result.onto_ref}")
            lines += [f"  {_fenced(text)}" for text in ours[:10]]
            lines.append("  =======")
            lines += [f"  {_fenced(text)}" for text in theirs[:10]]
            lines += [f"  >>>>>>> #{result.pr}", "  ```"]
    return lines


def draft_port_message(
    result: PortResult, *, subject: str, base_short: str, head_short: str
) -> str:
    """The commit of a conflicting port's draft branch: merge-tree's result with the conflict
    markers left in, the conflicting paths listed, and the port's trailers."""
    title = f"Draft port #{result.pr} to {result.onto_ref}: {subject}".strip()
    if len(title) > 72:
        title = title[:71] + "…"
    intro = (
        f"Port of #{result.pr} at {head_short} (upstream base {base_short}) onto "
        f"{result.onto_ref}, applied with git merge-tree. These files conflict and hold "
        "conflict markers (<<<<<<< branch / >>>>>>> PR) to resolve before this can merge:"
    )
    paths = [f"- {c.conflict.path} ({c.conflict.kind})" for c in result.conflicts]
    trailers = [
        f"Upstream-PR: #{result.pr}",
        f"Upstream-Base: {base_short}",
        f"Upstream-Head: {head_short}",
    ]
    return "\n".join([title, "", *textwrap.wrap(intro, 72), "", *paths, "", *trailers]) + "\n"


def draft_port_body(result: PortResult) -> str:
    """The description of a conflicting port's draft pull request."""
    lines = [
        f"Draft port of #{result.pr} (`{result.upstream_base[:7]}..{result.head[:7]}`) onto "
        f"`{result.onto_ref}` (`{result.onto[:7]}`), opened by stackbot because "
        f"{len(result.conflicts)} file(s) conflict. The branch holds every file of the port, "
        "the conflicting ones with conflict markers: resolve them, push, and mark the pull "
        "request ready for review.",
        "",
        "Conflicts:",
        "",
        *conflict_lines(result),
    ]
    return "\n".join(lines) + "\n"


def _fenced(text: str) -> str:
    """A line shown inside a fenced block: it must not close the fence."""
    return text.replace("```", "'''")
