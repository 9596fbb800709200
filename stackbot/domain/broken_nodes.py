"""Broken nodes (issue 26 point 4), pure: which nodes the next submissions leave out.

A node (a Slurm node; a GPU of the local executor's host, ``gpuN``) is *excluded* when its
``infra_count`` latest finished jobs were all infra (the node, not the tests: an infra
signature, a failed node check, a lost rank, a mass failure), with no clean job on it between
them, all within the last ``window_hours``. An excluded node gets
no job (Slurm's ``--exclude``; the local executor leaves that GPU out of its pool) until a node
check submitted to it passes; it is then *re-admitted*. A failed check keeps it excluded and
is added to its evidence; the check is repeated every ``recheck_minutes``.

Defaults, and why:

- ``infra_count = 2`` *in a row*: one infra failure is what the retry on another node already
  absorbs (a network blip, a hub that did not answer). A healthy node's infra failures are
  rare and independent, so two in a row on it happen with the square of that rate (a node with
  1 % transient infra failures: 0.01 % of pairs), while a broken node fails every job: the
  second job placed there is the last. "In a row" rather than "k within a window" also keeps a
  busy healthy node (many jobs, a few transient failures among hundreds of clean ones) in.
- ``window_hours = 72``: what makes two failures one story is that nothing ran cleanly on the
  node between them; the window only keeps stale history out. A lightly loaded cluster may
  place no job on a given node for a day or more, and the longest gap is a weekend (Friday
  evening to Monday morning, about 60 hours), so the window spans one; evidence older than that
  likely predates an administrator's repair.
- ``recheck_minutes = 30``, doubling after each failed check up to ``recheck_max_hours = 24``:
  a node check is one short job on one node (a minute or two of GPU time). A node that
  recovers by itself (a wedged process, a full disk cleaned up) is back within half an hour;
  one that failed several checks waits for a person (a drain, a reboot, a GPU swap), and
  checking it every half hour for days would spend ~13 GPU-hours a day on an 8-GPU node for
  nothing, where the backoff spends under one. A maintainer who repaired a node asks for its
  check at once (``stackbot nodes check NODE``) or re-admits it (``stackbot nodes readmit``).

A multi-node job's infra failure is blamed on the node its message names when it names exactly
one of them (a failed node check, a signature on a rank of that node), else on all of its nodes:
the node checks then re-admit the innocent ones within one recheck.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

EXCLUDED, READMITTED = "excluded", "readmitted"
INFRA = "infra"
# A finished job whose tests ran on the node to an end (passed, failed, a rank's own error):
# the node worked. A timeout says neither (a hung test or a hung node) and is left out.
CLEAN = frozenset({"passed", "failed", "error"})


@dataclass(frozen=True)
class NodePolicy:
    infra_count: int = 2
    window_hours: int = 72
    recheck_minutes: int = 30
    recheck_max_hours: int = 24

    @property
    def window(self) -> timedelta:
        return timedelta(hours=self.window_hours)

    @property
    def recheck(self) -> timedelta:
        return timedelta(minutes=self.recheck_minutes)

    def recheck_after(self, failed_checks: int) -> timedelta:
        """The wait before the next check: ``recheck_minutes``, doubled for each failed check,
        at most ``recheck_max_hours``."""
        cap = timedelta(hours=self.recheck_max_hours)
        doubled: int = 2 ** min(failed_checks, 20)
        return min(self.recheck * doubled, cap)


@dataclass(frozen=True)
class NodeJob:
    """One finished job on one node: what the rule reads."""

    node: str
    job_id: int
    status: str
    at: datetime
    line: str = ""  # the infra signature's line (or the message) that made it infra
    signature: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "job": self.job_id,
            "at": self.at.isoformat(),
            "signature": self.signature,
            "line": self.line,
        }


def node_names(value: str | None) -> list[str]:
    """The nodes of a job's ``node`` field ("n1, n2")."""
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def blamed(nodes: Sequence[str], message: str | None) -> list[str]:
    """The nodes an infra failure of a job on ``nodes`` is blamed on: the one its message names
    when it names exactly one of them, else all."""
    named = [n for n in nodes if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", message or "")]
    return named if len(named) == 1 else list(nodes)


def to_exclude(
    jobs: Iterable[NodeJob],
    *,
    now: datetime,
    policy: NodePolicy,
    held: Iterable[str] = (),
    since: dict[str, datetime] | None = None,
) -> dict[str, list[NodeJob]]:
    """The nodes (not in ``held``: already excluded) whose latest ``infra_count`` finished jobs
    were infra, each with those jobs as its evidence, oldest first. ``since`` maps a node to
    when it was last re-admitted: only jobs finished after that count."""
    held = set(held)
    since = since or {}
    start = now - policy.window
    by_node: dict[str, list[NodeJob]] = {}
    for job in jobs:
        if job.node in held or (job.node in since and job.at <= since[job.node]):
            continue
        if job.at < start or job.at > now:
            continue
        if job.status == INFRA or job.status in CLEAN:
            by_node.setdefault(job.node, []).append(job)
    found: dict[str, list[NodeJob]] = {}
    for node, seen in sorted(by_node.items()):
        seen.sort(key=lambda j: (j.at, j.job_id))
        latest = seen[-policy.infra_count :]
        if len(latest) < policy.infra_count or any(j.status != INFRA for j in latest):
            continue
        found[node] = latest
    return found


def check_due(
    *,
    excluded_at: datetime,
    last_check_at: datetime | None,
    failed_checks: int,
    asked: bool,
    now: datetime,
    policy: NodePolicy,
) -> bool:
    """Whether an excluded node's node check is due: asked for, or the recheck interval
    (backed off for ``failed_checks``) after the exclusion or the last check."""
    if asked:
        return True
    return now - (last_check_at or excluded_at) >= policy.recheck_after(failed_checks)
