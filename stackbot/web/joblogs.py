"""Reading a job's log from its output directory (written by ``python -m gpu_jobs run``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LOG_NAMES = ("runner.log", "job.log", "log.txt", "slurm.out")
MAX_LOG_BYTES = 2 * 1024 * 1024


def log_path(out_dir: str | None) -> Path | None:
    if not out_dir:
        return None
    directory = Path(out_dir)
    for name in LOG_NAMES:
        if (directory / name).is_file():
            return directory / name
    logs = sorted(directory.glob("*.log")) if directory.is_dir() else []
    return logs[0] if logs else None


def read_log(out_dir: str | None, *, max_bytes: int = MAX_LOG_BYTES) -> str:
    path = log_path(out_dir)
    if path is None:
        return ""
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size > max_bytes:
            handle.seek(size - max_bytes)
        data = handle.read()
    text = data.decode("utf-8", errors="replace")
    return text if size <= max_bytes else f"[… {size - max_bytes} earlier bytes not shown]\n" + text


# What a reader wants from a log's end: pytest's verdict, a failure, an error; never the
# runner's bookkeeping ("result written to …").
_USEFUL = re.compile(r"\d+ (passed|failed|error)|FAILED|Error|error:|Traceback|timed out|killed")
_NOISE = re.compile(r"result written to|^\s*$")


def tail_line(out_dir: str | None) -> str:
    path = log_path(out_dir)
    if path is None:
        return ""
    with path.open("rb") as handle:
        size = path.stat().st_size
        handle.seek(max(0, size - 16384))
        lines = [
            line.strip()
            for line in handle.read().decode("utf-8", errors="replace").splitlines()
            if not _NOISE.search(line)
        ]
    useful = [line for line in lines if _USEFUL.search(line)]
    chosen = useful[-1] if useful else (lines[-1] if lines else "")
    return chosen[:160]


# The lines a reader of a failed job looks for first (as Prow's Spyglass highlights them):
# pytest's failures and errors, tracebacks, exceptions, a runner's failed verdict, a timeout
# or a killed rank; never a count of zero ("0 failed").
_FAILING = re.compile(
    r"(?<![\w-])(?:FAILED|ERROR|Traceback \(most recent call last\)|[A-Z]\w*(?:Error|Exception)\b"
    r"|[1-9]\d* (?:failed|errors?)\b|result: (?:failed|error|infra|timeout)\b|timed out|killed"
    r"|^E {3})"
)


@dataclass(frozen=True)
class LogLine:
    number: int  # 1-based, the anchor #L<number>
    text: str
    failing: bool


def log_lines(text: str) -> list[LogLine]:
    """A log's lines, numbered, each marked when it tells of a failure."""
    return [
        LogLine(number, line, bool(_FAILING.search(line)))
        for number, line in enumerate(text.splitlines(), start=1)
    ]
