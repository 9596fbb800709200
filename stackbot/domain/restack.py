"""Restacking a child PR: what was replayed, what conflicted, what a merge would have done
differently, and how that reads.

A restack replays only the child's own commits — those not reachable from the old base (the
parent's branch as the child last saw it) — onto the new base, one new commit per replayed
commit with the original author and message. After a parent is squash-merged the parent's
original commits are still in the child ("ghost commits"); leaving them out is what avoids a
plain rebase's false conflicts.

Nothing may come back or go away silently: the replay's final tree is compared, path by path,
with a three-way merge of the child's branch into the new base (what "Update branch" would
make). A path one has and the other lacks is listed: ``deleted`` (the merge keeps it, the
replay does not — usually the child's own deletion, which the merge turns into a
modify/delete conflict), ``brought back`` (the replay has it, the merge does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from stackbot.domain.integration import Conflict
from stackbot.domain.types import PrNumber, Sha

EXIT_CLEAN = 0
EXIT_CONFLICT = 1


class ReplayOutcome(Enum):
    CLEAN = "clean"
    RESOLVED = "resolved"  # only generated files conflicted; regenerated on the replayed tree
    ALREADY_IN_BASE = "already in base"  # the change is already on the new base: dropped
    CONFLICT = "conflict"
    NOT_REPLAYED = "not replayed"  # after a conflict: nothing to replay it onto


@dataclass(frozen=True)
class ReplayedCommit:
    original: Sha
    subject: str
    author: str
    outcome: ReplayOutcome
    new: Sha | None = None
    conflicts: tuple[Conflict, ...] = ()
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "new": self.new,
            "subject": self.subject,
            "author": self.author,
            "outcome": self.outcome.value,
            "conflicts": [c.to_json() for c in self.conflicts],
            "note": self.note,
        }


class Surprise(Enum):
    DELETED = "deleted"
    BROUGHT_BACK = "brought back"


@dataclass(frozen=True)
class FileSurprise:
    """A path whose presence differs between the replay and a three-way merge."""

    path: str
    change: Surprise
    by: Sha | None = None  # the replayed commit (original SHA) after which it is so
    merge_conflict: str | None = None  # the merge's conflict type on this path, if any

    def sentence(self) -> str:
        who = f" by {self.by[:9]}" if self.by else ""
        if self.change is Surprise.DELETED:
            merge = (
                f"a merge would keep it, conflicting ({self.merge_conflict})"
                if self.merge_conflict
                else "a merge would keep it"
            )
            return f"{self.path}: deleted{who} in the replay; {merge}"
        merge = "a merge would not have it"
        if self.merge_conflict:
            merge += f" (conflict: {self.merge_conflict})"
        return f"{self.path}: brought back{who} by the replay; {merge}"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "change": self.change.value,
            "by": self.by,
            "merge_conflict": self.merge_conflict,
        }


def file_surprises(
    replay_has: dict[str, bool],
    merge_has: dict[str, bool],
    merge_conflicts: dict[str, str],
    first_commit_with_final_state: dict[str, Sha | None],
) -> tuple[FileSurprise, ...]:
    """The paths (among those whose content differs between the two trees) present in one and
    absent from the other, sorted by path."""
    found = []
    for path in sorted(replay_has):
        if replay_has[path] == merge_has.get(path, False):
            continue
        change = Surprise.BROUGHT_BACK if replay_has[path] else Surprise.DELETED
        found.append(
            FileSurprise(
                path, change, first_commit_with_final_state.get(path), merge_conflicts.get(path)
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class RestackResult:
    pr: PrNumber
    head: Sha
    old_base: Sha
    onto: Sha
    onto_ref: str
    commits: tuple[ReplayedCommit, ...]
    new_head: Sha | None  # None when a commit conflicts
    ref_name: str | None = None
    surprises: tuple[FileSurprise, ...] = ()
    merges_left_out: tuple[Sha, ...] = ()
    ghosts: tuple[Sha, ...] = field(default=())  # child commits whose patch is on the new base

    @property
    def clean(self) -> bool:
        return self.new_head is not None

    @property
    def exit_code(self) -> int:
        return EXIT_CLEAN if self.clean else EXIT_CONFLICT

    def to_json(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "head": self.head,
            "old_base": self.old_base,
            "onto": self.onto,
            "onto_ref": self.onto_ref,
            "status": "clean" if self.clean else "conflict",
            "new_head": self.new_head,
            "ref": self.ref_name,
            "commits": [c.to_json() for c in self.commits],
            "surprises": [s.to_json() for s in self.surprises],
            "merges_left_out": list(self.merges_left_out),
            "ghost_commits": list(self.ghosts),
        }


def render_restack(result: RestackResult) -> str:
    own = len(result.commits)
    lines = [
        f"restack of #{result.pr} ({result.head[:9]}) onto {result.onto_ref} "
        f"({result.onto[:9]}): {'clean' if result.clean else 'conflict'}",
        f"{own} own commit{'s' if own != 1 else ''} (not in the old base {result.old_base[:9]})",
    ]
    for position, commit in enumerate(result.commits, start=1):
        head = f"{position:3d}. {commit.original[:9]} {commit.subject[:60]}  {commit.outcome.value}"
        if commit.new:
            head += f" → {commit.new[:9]}"
        lines.append(head)
        if commit.conflicts:
            paths = ", ".join(f"{c.path} ({c.kind})" for c in commit.conflicts)
            lines.append(f"       conflicts: {paths}")
        if commit.note:
            lines.append(f"       {commit.note}")
    for merge in result.merges_left_out:
        lines.append(f"  merge commit {merge[:9]} left out (as git rebase does)")
    if result.surprises:
        lines.append("files the replay treats differently from a merge of the branch:")
        lines += [f"  {s.sentence()}" for s in result.surprises]
    if result.new_head:
        where = f" ({result.ref_name})" if result.ref_name else ""
        lines.append(f"new head {result.new_head}{where}")
    else:
        lines.append("nothing written: resolve the conflict on the branch, then restack again")
    return "\n".join(lines)


def restack_reply(result: RestackResult, *, base_ref: str, pushed_to: str | None, note: str) -> str:
    """The bot's answer to ``/stackbot restack``: per commit, surprises, and what was done."""
    own = len(result.commits)
    lines = [
        f"**stackbot restack** of #{result.pr} onto `{base_ref}` (`{result.onto[:7]}`): "
        f"{'clean' if result.clean else 'a commit conflicts'}.",
        "",
        f"{own} own commit{'s' if own != 1 else ''} (not in `{result.old_base[:7]}`, {note}):",
        "",
    ]
    for commit in result.commits:
        new = f" → `{commit.new[:7]}`" if commit.new else ""
        line = f"- `{commit.original[:7]}` {_plain(commit.subject)}: {commit.outcome.value}{new}"
        if commit.conflicts:
            line += " in " + ", ".join(f"`{c.path}` ({c.kind})" for c in commit.conflicts)
        lines.append(line)
    if result.surprises:
        lines += ["", "Files the replay treats differently from a merge of the branch:", ""]
        lines += [f"- {_plain(s.sentence())}" for s in result.surprises]
    lines.append("")
    if not result.clean:
        lines.append(
            "Nothing was written: resolve the conflicting commit on the branch, then comment "
            "`/stackbot restack` again."
        )
    elif pushed_to:
        lines.append(f"Pushed `{result.new_head[:7] if result.new_head else ''}` to `{pushed_to}`.")
    else:
        lines.append(
            f"The result is `{result.new_head}`; nothing was pushed (the author can allow it with "
            "`/stackbot restack --push`, or push it themselves: "
            f"`git fetch <stackbot's mirror> {result.ref_name}`)."
        )
    return "\n".join(lines)


def _plain(text: str) -> str:
    """A commit subject or path as plain text in markdown: no mentions, links or code spans."""
    return text.replace("`", "'").replace("@", "@\u200b").replace("[", "\\[").replace("<", "&lt;")


GHOST_MARKER = "<!-- stackbot:ghosts -->"


def ghost_comment(number: int, base_ref: str, ghosts: tuple[tuple[str, str], ...]) -> str:
    """The sticky note offering a restack: ``ghosts`` are (sha, subject) of this PR's commits
    whose change ``base_ref`` already has under another commit (a squash- or rebase-merged
    parent)."""
    listed = "\n".join(f"- `{sha[:7]}` {_plain(subject)}" for sha, subject in ghosts[:20])
    more = f"\n- … and {len(ghosts) - 20} more" if len(ghosts) > 20 else ""
    count = len(ghosts)
    return (
        f"{GHOST_MARKER}\n**{count} commit{'s' if count != 1 else ''} of this pull request "
        f"{'are' if count != 1 else 'is'} already on `{base_ref}`** under another SHA (a parent "
        f"that was squash- or rebase-merged), so {'they show' if count != 1 else 'it shows'} "
        f"again in this pull request's diff and can conflict:\n\n{listed}{more}\n\n"
        f"Comment `/stackbot restack` to replay only this pull request's own commits onto "
        f"`{base_ref}` (the author or a vetter; add `--push` as the author to let stackbot push "
        f"the result to the branch)."
    )


def ghosts_gone_comment(base_ref: str) -> str:
    return (
        f"{GHOST_MARKER}\n~~Commits already on `{base_ref}`.~~ None any more: this pull "
        f"request holds only its own commits."
    )
