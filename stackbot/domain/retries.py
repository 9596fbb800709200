"""How a test row that was retried after infra failures reads on a PR (issue 13).

A configuration whose job failed for the machine (``infra``: node check failed, a rank lost, a
node failure, a timeout before any test ran) is retried on another node; the row then shows the
newest attempt only. :func:`retry_note` says, in one line, what came before it: "passed on a
retry on gpu-02 after an infra failure on gpu-01 (rank 1 lost, killed by SIGKILL)", or, when no
attempt gave a result, "no result after 2 attempts, both infra failures (gpu-01: …; gpu-02: …)".

The note is a tuple of :class:`NotePart` (text, and the job a part names) so the comment can
link the jobs in Markdown and the dashboard in HTML from the same words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from stackbot.domain.infra_failures import signature_of

INFRA = "infra"
MAX_CAUSE = 60  # characters of an unrecognised infra message kept in the note
MAX_SIGNATURE_LINE = 120  # characters of an infra signature's matched line kept in the note

_RUNNING = frozenset({"queued", "starting", "submitted", "running"})
# What the newest attempt did, as the note's first words.
_ENDED = {
    "passed": "passed",
    "failed": "failed",
    "error": "ended in an error",
    "timeout": "timed out",
    "cancelled": "was cancelled",
}


@dataclass(frozen=True)
class Attempt:
    """One job of a configuration's retry chain (the first job, then each retry of it)."""

    job_id: int
    status: str
    node: str | None = None  # "gpu-01", "gpu-01, gpu-02" for two nodes; None before it ran
    error: str | None = None  # the job's message (an infra job: why the machine failed)
    url: str | None = None  # the job's dashboard page


@dataclass(frozen=True)
class NotePart:
    text: str
    url: str | None = None  # the part names a job: link it here


def retry_chain(newest_id: int, retry_of: dict[int, int | None]) -> list[int]:
    """The ids of ``newest_id``'s chain, oldest first: the job it retries, the one that one
    retries, … (``retry_of`` maps a retry's id to the job it retries; other jobs are absent or
    map to None)."""
    chain = [newest_id]
    while (previous := retry_of.get(chain[-1])) is not None and previous not in chain:
        chain.append(previous)
    return chain[::-1]


def retry_note(attempts: Sequence[Attempt]) -> tuple[NotePart, ...]:
    """The one line that tells what the infra attempts before the newest were; empty when
    there was no earlier attempt (or none of them was infra)."""
    earlier = [a for a in attempts[:-1] if a.status == INFRA]
    if not attempts or not earlier:
        return ()
    newest = attempts[-1]
    if newest.status == INFRA:
        return _no_result([*earlier, newest])
    if newest.status in _RUNNING:
        where = (
            [NotePart("running again on "), _node(newest)]
            if newest.status == "running" and newest.node
            else [NotePart("queued again on another node")]
        )
        return (*where, *_after(earlier))
    ended = _ENDED.get(newest.status, newest.status)
    return (NotePart(f"{ended} on a retry on "), _node(newest), *_after(earlier))


def _no_result(attempts: list[Attempt]) -> tuple[NotePart, ...]:
    count = len(attempts)
    each = "both" if count == 2 else "all"
    parts = [NotePart(f"no result after {count} attempts, {each} infra failures (")]
    for index, attempt in enumerate(attempts):
        if index:
            parts.append(NotePart("; "))
        parts += [_node(attempt), NotePart(f": {infra_cause(attempt.error)}")]
    parts.append(NotePart(")"))
    return tuple(parts)


def _after(earlier: list[Attempt]) -> list[NotePart]:
    parts = [
        NotePart(
            " after an infra failure on " if len(earlier) == 1 else " after infra failures on "
        )
    ]
    for index, attempt in enumerate(earlier):
        if index:
            parts.append(NotePart(" and " if index == len(earlier) - 1 else ", "))
        parts += [_node(attempt), NotePart(f" ({infra_cause(attempt.error)})")]
    return parts


def _node(attempt: Attempt) -> NotePart:
    """The machine an attempt ran on, linking its job (``job 12`` when no node is known)."""
    return NotePart(attempt.node or f"job {attempt.job_id}", attempt.url)


# The infra messages of gpu_jobs and the executors, said in a few words (first match wins).
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"mass failure: (\d+ of \d+ tests failed at once)", r"\1"),
        (r"rank (\d+) was lost \((killed by \w+)\)", r"rank \1 lost, \2"),
        (r"rank (\d+) ended its tests but its JUnit report is missing", r"rank \1's report lost"),
        (r"timed out after \S+ during (\w+), before any test ran", r"timed out in \1, no test ran"),
        (r"node check|node_check", "node-check failed"),
        (r"a node failed under the job", "Slurm node failure"),
        (r"a node failed to boot", "Slurm node failed to boot"),
        (r"preempted", "preempted"),
        (r"before any runner reported", "no runner reported"),
        (r"node\(s\) (\S+) wrote no report", r"node \1 wrote no report"),
        (r"torchrun exited \S+ before any rank started", "torchrun could not start the ranks"),
        (r"setup command", "setup command failed"),
        (r"torch cannot be imported", "torch cannot be imported"),
        (r"probing for CUDA devices failed", "no usable CUDA devices"),
        (r"the runner exited without a report", "the runner exited without a report"),
        (r"the job's result cannot be read", "result unreadable"),
        (r"the executor refused the job", "the executor refused the job"),
    )
)


def infra_cause(message: str | None) -> str:
    """Why the machine failed, in a few words: ``rank 1 lost, killed by SIGKILL``."""
    text = " ".join((message or "").split())
    if not text:
        return "no reason recorded"
    signature = signature_of(text)
    if signature is not None:  # the matched line itself, as the node found it
        line = signature.line
        if len(line) > MAX_SIGNATURE_LINE:
            line = line[: MAX_SIGNATURE_LINE - 1].rstrip() + "…"
        return f"{signature.name} {signature.where}: “{line}”"
    for pattern, words in _CAUSES:
        found = pattern.search(text)
        if found:
            return found.expand(words)
    first = text.split("; ")[0]
    return first if len(first) <= MAX_CAUSE else first[: MAX_CAUSE - 1].rstrip() + "…"


def note_text(parts: Sequence[NotePart]) -> str:
    return "".join(part.text for part in parts)


def note_markdown(parts: Sequence[NotePart]) -> str:
    """The note with each job it names linked (``[gpu-01](…/jobs/12)``)."""
    return "".join(
        f"[{_escape(part.text)}]({part.url})" if part.url else part.text for part in parts
    )


def _escape(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]")
