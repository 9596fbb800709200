"""Infrastructure signatures: lines in a rank's output that say the machine failed, not the tests
(issue 26 point 3).

A job that failed, errored or timed out and whose ranks wrote a line matching one of them is
``infra`` (:func:`gpu_jobs.verdict.decide`): retried on another node, never counted, with the
matched line as the job's ``cause`` and in its message (``infra signature nccl-timeout on rank
3: …``). The list is data: ``[[infra_signatures]]`` entries in the test-sets file. The built-in
file (``gpu_jobs/testsets.toml``) holds Megatron-LM's ``is_flaky_failure`` patterns
(``tests/test_utils/python_scripts/launch_jet_workload.py``) and the classes the issue names that
Megatron's list lacks; a deployment's own test-sets file extends it (an entry with a built-in
name replaces it) and can switch built-in entries off with ``disabled_infra_signatures``.

An entry: ``name`` (lowercase words joined by ``-``), ``class`` (one of :data:`CLASSES`),
``pattern`` (a Python regular expression searched in each output line that is not quoted
source code: indented, or pytest's ``>`` line), optionally
``requires`` (a second expression that some line of the same rank's output must match: a
segfault counts only inside NCCL) and ``scope``: ``"job"`` (the default: the line anywhere is
enough) or ``"failures"`` (only when every failing test's own failure message matches it, so a
CUDA out-of-memory counts on an otherwise passing test and not on a job with real failures).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpu_jobs._fields import ContractError, FieldReader

CLASSES = ("nccl", "gpu", "memory", "crash", "network", "hub", "disk", "launcher")
SCOPES = ("job", "failures")
MAX_LINE_CHARS = 300  # of the matched line kept in the message
CONTEXT_LINES = 2  # lines either side of the match in the cause excerpt
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class InfraSignature:
    name: str
    kind: str  # the ``class`` field: one of CLASSES
    pattern: str
    requires: str | None = None
    scope: str = "job"

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    @cached_property
    def requires_regex(self) -> re.Pattern[str] | None:
        return re.compile(self.requires) if self.requires else None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"name": self.name, "class": self.kind, "pattern": self.pattern}
        if self.requires:
            found["requires"] = self.requires
        if self.scope != "job":
            found["scope"] = self.scope
        return found


@dataclass(frozen=True)
class InfraMatch:
    """The first signature found: which, on which rank, the line, and the lines around it."""

    signature: InfraSignature
    rank: int | None  # None: found in the failing tests' messages, not in a rank's output
    line: str
    excerpt: str

    def message(self) -> str:
        where = "in the failing tests" if self.rank is None else f"on rank {self.rank}"
        return f"infra signature {self.signature.name} ({self.signature.kind}) {where}: {self.line}"


def parse_signature(r: FieldReader) -> InfraSignature:
    """One ``[[infra_signatures]]`` entry (``r`` names its place for errors)."""
    name = r.text("name")
    if not _NAME.match(name):
        raise ContractError(r.name("name"), f"{name!r} is not lowercase words joined by '-'")
    kind = r.text("class")
    if kind not in CLASSES:
        raise ContractError(r.name("class"), f"{kind!r} is not one of {', '.join(CLASSES)}")
    scope = r.text("scope", "job")
    if scope not in SCOPES:
        raise ContractError(r.name("scope"), f"{scope!r} is not one of {', '.join(SCOPES)}")
    pattern = r.text("pattern")
    requires = r.opt_text("requires")
    for key, value in (("pattern", pattern), ("requires", requires)):
        if value is None:
            continue
        if not value.strip():
            raise ContractError(r.name(key), "must be a non-empty regular expression")
        try:
            re.compile(value)
        except re.error as error:
            raise ContractError(r.name(key), f"is not a regular expression: {error}") from None
    r.refuse_unknown()
    return InfraSignature(name, kind, pattern, requires, scope)


def parse_signatures(entries: Sequence[FieldReader]) -> tuple[InfraSignature, ...]:
    found: dict[str, InfraSignature] = {}
    for entry in entries:
        signature = parse_signature(entry)
        if signature.name in found:
            raise ContractError(entry.name("name"), f"{signature.name!r} is listed twice")
        found[signature.name] = signature
    return tuple(found.values())


def combine(
    builtin: Iterable[InfraSignature],
    own: Iterable[InfraSignature],
    disabled: Iterable[str],
    where: str = "disabled_infra_signatures",
) -> tuple[InfraSignature, ...]:
    """The built-in list extended by a deployment's own entries (same name: theirs), less the
    disabled names (each must name a signature)."""
    merged = {s.name: s for s in builtin}
    merged.update({s.name: s for s in own})
    off = set(disabled)
    unknown = sorted(off - set(merged))
    if unknown:
        raise ContractError(where, f"{unknown[0]!r} is not the name of an infra signature")
    return tuple(s for name, s in merged.items() if name not in off)


def find_signature(
    rank_lines: Mapping[int, Sequence[str]],
    signatures: Sequence[InfraSignature],
    failure_messages: Sequence[str] = (),
) -> InfraMatch | None:
    """The first signature (in list order) found in the ranks' output (ranks in order).

    ``failure_messages``: the failing tests' own messages; a ``failures``-scoped signature
    counts only when there is at least one and every one of them matches it."""
    cleaned = {
        rank: [_ANSI.sub("", line).rstrip() for line in lines]
        for rank, lines in sorted(rank_lines.items())
    }
    for signature in signatures:
        if signature.scope == "failures" and not (
            failure_messages and all(signature.regex.search(m) for m in failure_messages)
        ):
            continue
        for rank, lines in cleaned.items():
            needed = signature.requires_regex
            if needed is not None and not any(needed.search(line) for line in lines):
                continue
            for index, line in enumerate(lines):
                if not _is_source(line) and signature.regex.search(line):
                    return _match(signature, rank, lines, index)
        if signature.scope == "failures":  # the messages themselves are the evidence
            line = next(m for m in failure_messages if signature.regex.search(m))
            return InfraMatch(signature, None, _clip(line.splitlines()[0]), line)
    return None


def _is_source(line: str) -> bool:
    """A line of source code quoted in a traceback (pytest's ``>`` marks the failing one; Python
    indents them): a test that *mentions* "CUDA out of memory" is no machine failure. What
    libraries and the interpreter write (NCCL's log, pytest's ``E   `` lines) is not indented."""
    return line.startswith((" ", "\t", ">"))


def _match(signature: InfraSignature, rank: int, lines: list[str], index: int) -> InfraMatch:
    start, end = max(0, index - CONTEXT_LINES), min(len(lines), index + CONTEXT_LINES + 1)
    excerpt = f"rank {rank}, matched {signature.name}:\n" + "\n".join(lines[start:end])
    return InfraMatch(signature, rank, _clip(lines[index].strip()), excerpt)


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
