"""Why a rank's pytest ended without results: the last lines of its output that name the error.

pytest ends with exit status 2 when collecting a test file failed, 3 on an internal error, 4 on
a usage error (a ``conftest.py`` that cannot be imported is one: pytest stops before its
session starts, so no JUnit file and no result exist) and 5 when nothing was collected. Each of
these, and a rank that died before any result, is an error of the tree under test (or of the
job's targets), not of the node; what a user must fix is in the rank's own output, e.g.::

    ImportError while loading conftest '/ckpt/tests/unit_tests/conftest.py'.
    tests/unit_tests/conftest.py:12: in <module>
        from tests.unit_tests.test_utilities import Utils
    E   ModuleNotFoundError: No module named 'megatron.training'

:func:`find_cause` turns that into one line (``ModuleNotFoundError: No module named
'megatron.training' while importing tests/unit_tests/conftest.py``) and the excerpt it came
from. A rank's output is read from torchrun's console log (each line prefixed with the local
rank) or, failing that, from the per-rank files torchrun writes with ``--tee``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# pytest's exit statuses other than "ok" and "tests failed".
PYTEST_EXITS: dict[int, str] = {
    2: "collection errors",
    3: "pytest internal error",
    4: "usage error",
    5: "no tests collected",
}
MAX_EXCERPT_LINES = 12
MAX_SUMMARY_CHARS = 300
_TAIL_BYTES = 200_000

_PREFIX = re.compile(r"^\[(default|rank)?(\d+)\]:")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR = re.compile(
    r"^(?:E\s+|INTERNALERROR>\s*)?"
    r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?::.*)?)$"
)
_CONFTEST = re.compile(r"^ImportError while loading conftest '(.+)'\.$")
_COLLECTING = re.compile(r"^_+ ERROR collecting (\S+) _+$")
_TEST_MODULE = re.compile(r"^ImportError while importing test module '(.+)'\.$")
_USAGE = re.compile(r"^ERROR: (.+)$")
_FATAL = re.compile(r"^Fatal Python error: (.+)$")
_SUMMARY = re.compile(r"^=*\s*(?:no tests ran|\d+ (?:deselected|skipped|passed|failed)).*$")


@dataclass(frozen=True)
class Cause:
    """What stopped a rank: one line for messages and the output lines it was read from."""

    summary: str
    excerpt: str
    # True when the output is pytest's own report of a collection, usage or internal error,
    # so the exit status is pytest's rather than the test's (os._exit(4) in a test is not).
    from_pytest: bool


def find_cause(lines: list[str], root: str = "") -> Cause | None:
    """The cause in a rank's output lines (prefixes already stripped); ``root`` (the tree's
    directory) is cut from paths so they read as they do in the tree."""
    lines = [_ANSI.sub("", line).rstrip() for line in lines]
    for finder in (_conftest, _collecting, _internal, _usage, _fatal, _last_error):
        found = finder(lines, root)
        if found is not None:
            return found
    return None


def no_tests_summary(lines: list[str]) -> str:
    """pytest's closing line when nothing ran, e.g. ``82 deselected in 0.41s``."""
    for line in reversed(lines):
        text = _ANSI.sub("", line).strip().strip("=").strip()
        if _SUMMARY.match(text):
            return text
    return ""


def rank_output(phase_dir: Path, console_log: Path, node_rank: int, local_rank: int) -> list[str]:
    """The last lines a rank wrote: from the node's torchrun console log, else from the
    per-rank files torchrun's ``--tee`` left under ``torchrun-logs``."""
    own = []
    for line in _tail(console_log).splitlines():
        match = _PREFIX.match(line)
        if match is None:
            continue
        # A rank's write without a newline (pytest's progress dots) runs into the next line
        # torchrun prefixes: ``[default2]:.[default2]:Fatal Python error: ...``.
        inner = re.compile(rf"\[{match[1] or ''}(\d+)\]:")
        rank, start = int(match[2]), match.end()
        for joined in inner.finditer(line, start):
            if rank == local_rank:
                own.append(line[start : joined.start()])
            rank, start = int(joined[1]), joined.end()
        if rank == local_rank:
            own.append(line[start:])
    if own:
        return own
    found: list[str] = []
    rank_dir = phase_dir / "torchrun-logs" / f"node{node_rank}"
    for path in sorted(rank_dir.glob(f"*/attempt_*/{local_rank}/std*.log")):
        found.extend(_tail(path).splitlines())
    return found


def _conftest(lines: list[str], root: str) -> Cause | None:
    start = _last_index(lines, _CONFTEST)
    if start is None:
        return None
    path = _relative(_CONFTEST.match(lines[start])[1], root)  # type: ignore[index]
    return _with_error(lines, start, f"while importing {path}", root)


def _collecting(lines: list[str], root: str) -> Cause | None:
    start = _first_index(lines, _COLLECTING)
    if start is None:
        return None
    path = _relative(_COLLECTING.match(lines[start])[1], root)  # type: ignore[index]
    return _with_error(lines, start, f"while collecting {path}", root)


def _internal(lines: list[str], root: str) -> Cause | None:
    internal = [i for i, line in enumerate(lines) if line.startswith("INTERNALERROR>")]
    if not internal:
        return None
    error = next((i for i in reversed(internal) if _ERROR.match(lines[i])), internal[-1])
    summary = lines[error].removeprefix("INTERNALERROR>").strip()
    start = max(internal[0], error - 10)
    return _cause(f"pytest internal error: {summary}", lines, start, error, root, from_pytest=True)


def _usage(lines: list[str], root: str) -> Cause | None:
    at = _last_index(lines, _USAGE)
    if at is None:
        return None
    summary = _USAGE.match(lines[at])[1]  # type: ignore[index]
    end = at
    if at + 1 < len(lines) and lines[at + 1].strip().startswith("("):
        end = at + 1  # "ERROR: not found: x.py::t" is followed by "(no match in any of [...])"
        summary += " " + lines[end].strip()
    return _cause(_relative(summary, root), lines, at, end, root, from_pytest=True)


def _fatal(lines: list[str], root: str) -> Cause | None:
    at = _last_index(lines, _FATAL)
    if at is None:
        return None
    return _cause(lines[at], lines, at, min(len(lines) - 1, at + 6), root)


def _last_error(lines: list[str], root: str) -> Cause | None:
    at = _last_index(lines, _ERROR)
    if at is None:
        return None
    summary = _ERROR.match(lines[at])[1]  # type: ignore[index]
    return _cause(_relative(summary, root), lines, max(0, at - 8), at, root)


def _with_error(lines: list[str], start: int, where: str, root: str) -> Cause:
    """The error line that follows ``start`` (pytest's ``E   SomeError: ...``) + ``where``."""
    error, end = None, min(len(lines) - 1, start + 40)
    for i in range(start + 1, end + 1):
        if i > start + 1 and (_CONFTEST.match(lines[i]) or _COLLECTING.match(lines[i])):
            end = i - 1
            break
        match = _ERROR.match(lines[i])
        if match:
            error, end = match[1], i
    summary = f"{error} {where}" if error else f"{lines[start].strip()} ({where})"
    return _cause(summary, lines, start, end, root, from_pytest=True)


def _cause(
    summary: str, lines: list[str], start: int, end: int, root: str, *, from_pytest: bool = False
) -> Cause:
    # The tree's own directory is cut from the excerpt too: it is the node's path, not the
    # tree's, and the dashboard shows no paths of the machines behind it.
    excerpt = [_relative(line, root) for line in lines[start : end + 1] if line.strip()]
    if len(excerpt) > MAX_EXCERPT_LINES:
        excerpt = [excerpt[0], "...", *excerpt[-(MAX_EXCERPT_LINES - 2) :]]
    summary = " ".join(summary.split())
    if len(summary) > MAX_SUMMARY_CHARS:
        summary = summary[: MAX_SUMMARY_CHARS - 3] + "..."
    return Cause(summary, "\n".join(excerpt), from_pytest)


def _relative(text: str, root: str) -> str:
    root = root.rstrip("/")
    return text.replace(root + "/", "") if root else text


def _last_index(lines: list[str], pattern: re.Pattern[str]) -> int | None:
    return next((i for i in range(len(lines) - 1, -1, -1) if pattern.match(lines[i])), None)


def _first_index(lines: list[str], pattern: re.Pattern[str]) -> int | None:
    return next((i for i, line in enumerate(lines) if pattern.match(line)), None)


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - _TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
