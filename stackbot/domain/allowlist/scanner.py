"""Scan one file of a tree for reads of global process-group state, as each checker would.

``scan_current`` is the current checker (scope KEYs, duplicates kept); ``scan_first_generation``
the first (line KEYs, deduplicated). Both take the blob's bytes and read them the way both
checkers read files: strict UTF-8 text with universal newlines, so a coding cookie is ignored and
a UTF-8 BOM stays in the text, where Python's parser rejects it. Such a file stops the current
checker and is skipped by the first, and stackbot reports it the same way rather than reading
what the checker cannot.

Most files read nothing, and parsing them into Python objects is most of a full scan's time
(the AST's millions of objects also wake the garbage collector again and again). A read is a
call whose resolved name ends in an accessor's or the shim's name, and that name is spelled out
in the file (at the call, or in the import that binds the called name), so a file whose text
holds no such name reads nothing: it only has to parse, which ``compile`` tells at a third of
``ast.parse``'s cost. Anything ``compile`` refuses goes through ``ast.parse`` as before, so the
outcome (the parser's own error included) is exactly the full scan's; the tests compare both.
"""

from __future__ import annotations

import ast
import gc
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from stackbot.domain.allowlist.first_generation import first_generation_reads
from stackbot.domain.allowlist.model import Generation
from stackbot.domain.allowlist.scopes import current_reads

# Part of every scan cache key: bump it whenever what a scan returns changes.
SCANNER_VERSION = "3"

SCAN_PREFIX = "megatron/core/"
EXEMPT_PATHS = frozenset(
    {"megatron/core/parallel_state.py", "megatron/core/process_groups_config.py"}
)


def is_scanned_path(path: str) -> bool:
    """``megatron/core/**/*.py`` except the two modules allowed to read global state."""
    return path.startswith(SCAN_PREFIX) and path.endswith(".py") and path not in EXEMPT_PATHS


@dataclass(frozen=True)
class ScanOutcome:
    """The reads of one file: ``entries`` sorted as strings, ``lines[i]`` where ``entries[i]``
    was read (for telling a human where to look), or ``error`` when the file does not parse."""

    entries: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"entries": list(self.entries), "lines": list(self.lines), "error": self.error}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScanOutcome:
        """The inverse of :meth:`to_json`, for caches that persist outcomes."""
        return cls(
            entries=tuple(str(e) for e in data["entries"]),
            lines=tuple(int(n) for n in data["lines"]),
            error=None if data["error"] is None else str(data["error"]),
        )


Reads = list[tuple[int, str]]


def _checker_text(source: bytes) -> str:
    """What ``Path.read_text(encoding="utf-8")`` gives the checker: BOM kept, newlines
    translated (inside string literals too, which moves no line)."""
    return source.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _parse(source: str | bytes) -> ast.Module | str:
    """The module, or the reason it does not parse (without the path: outcomes are cached per
    blob, and one blob can live at several paths)."""
    try:
        text = _checker_text(source) if isinstance(source, bytes) else source
    except UnicodeDecodeError as error:
        return f"not valid UTF-8 (the checker reads files as UTF-8): {error}"
    try:
        return ast.parse(text)
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}" if error.lineno else str(error.msg)
    except ValueError as error:  # null bytes
        return str(error)
    except (RecursionError, MemoryError):
        return "the file is too deeply nested for Python's parser"


# Every name a read can be made through, in either generation: an accessor (``get_`` and one
# of the endings of either generation) or the shim. A superset is fine; missing one is not.
_READ_NAME = (
    r"get_\w*(?:_group|_groups|_gloo|_rank|_ranks|_world_size|_src_rank)\b|use_mpu_process_groups"
)
_READ_NAME_BYTES = re.compile(_READ_NAME.encode())
_READ_NAME_TEXT = re.compile(_READ_NAME, re.ASCII)


def may_read(source: bytes) -> bool:
    """False only when ``source`` cannot hold a read, whatever it imports. Python folds each
    identifier with NFKC (a full-width ``ｇet_x_group`` is ``get_x_group``), so non-ASCII text is
    searched folded; folding the whole text keeps every identifier's folded form in it, since
    the characters around an identifier (operators, spaces, quotes) are ASCII in valid code."""
    if source.isascii():
        return _READ_NAME_BYTES.search(source) is not None
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        return True  # ast.parse reports it
    return _READ_NAME_TEXT.search(unicodedata.normalize("NFKC", text)) is not None


def _compiles(source: bytes) -> bool:
    """Whether ``source`` certainly parses: ``compile`` parses with the same parser, then does
    more (and may refuse more: ``return`` outside a function, a warning turned error), so True
    is certain and False only means "ask ``ast.parse``"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(_checker_text(source), "<blob>", "exec", dont_inherit=True)
    except Exception:  # every refusal is settled by ast.parse below
        return False
    return True


def _scan(source: str | bytes, find: Callable[[ast.Module], Reads], dedupe: bool) -> ScanOutcome:
    if isinstance(source, bytes) and not may_read(source) and _compiles(source):
        return ScanOutcome()
    module = _parse(source)
    if isinstance(module, str):
        return ScanOutcome(error=module)
    try:
        reads = find(module)
    except RecursionError:
        return ScanOutcome(error="the file is too deeply nested to scan")
    pairs = sorted(
        {(entry, line) for line, entry in reads} if dedupe else [(e, n) for n, e in reads]
    )
    return ScanOutcome(tuple(e for e, _ in pairs), tuple(n for _, n in pairs))


def scan_current(path: str, source: str | bytes) -> ScanOutcome:
    """The current checker's entries for one file; a file that does not parse stops that
    checker, so its ``error`` must be reported as unparsed."""
    del path  # the outcome depends on the content only, so it can be cached per blob
    return _scan(source, current_reads, dedupe=False)


def scan_first_generation(path: str, source: str | bytes) -> ScanOutcome:
    """The first checker's entries for one file, deduplicated; that checker skips a file that
    does not parse (no entries), and ``error`` says it was skipped."""
    del path
    return _scan(source, first_generation_reads, dedupe=True)


SCANNERS: dict[Generation, Callable[[str, str | bytes], ScanOutcome]] = {
    Generation.SCOPE: scan_current,
    Generation.LINE: scan_first_generation,
}


@contextmanager
def _without_gc() -> Iterator[None]:
    """ASTs hold no reference cycles, so the collector only costs time while they are built
    (a third of a full scan); it is switched back on afterwards if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def scan_sources(generation: Generation, sources: Sequence[bytes]) -> list[ScanOutcome]:
    """The outcome of each blob, as that generation's checker reads it."""
    scan = SCANNERS[generation]
    with _without_gc():
        return [scan("", source) for source in sources]
