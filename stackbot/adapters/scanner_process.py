"""The Python that parses Megatron-LM's files for the allowlist scan, and its processes.

Megatron-LM needs Python >= 3.12 and its files use PEP 701 f-strings (quotes reused inside an
f-string, expressions across lines), which older parsers refuse. Whether a file parses, and so
which reads the allowlist counts, must not depend on the Python stackbot runs on: the scan runs
under a Python >= 3.12, in long-lived processes (:mod:`stackbot.adapters.scanner_server`) that
take blobs in bulk and answer compact outcomes. Which Python:

1. ``STACKBOT_SCANNER_PYTHON`` when set (it must be >= 3.12, or every scan fails saying so);
2. else this process's own when it is >= 3.12;
3. else the first of ``python3.12``, ``python3.13``, ... on ``PATH``, then pyenv's versions
   (``$PYENV_ROOT`` or ``~/.pyenv``), then ``/usr/local/bin`` and ``/usr/bin``;
4. else none: this process scans, and every file its parser refuses is reported unparsed with a
   note naming ``STACKBOT_SCANNER_PYTHON`` (never a silently different allowlist).

A cold scan of a whole tree is split over ``scanner_processes`` processes (default: one per
CPU, at most 4); later scans (a few changed files) use one.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import stackbot
from stackbot.domain.allowlist import Generation, LocalScanner, ScanOutcome
from stackbot.errors import BadInput, RetryLater

log = logging.getLogger(__name__)

MINIMUM = (3, 12)
SETTING = "STACKBOT_SCANNER_PYTHON"
PROBE_TIMEOUT_S = 20.0
CHUNK_BYTES = 256 * 1024  # a request's blobs: small enough that several processes share a scan
CHUNK_FILES = 64
MAX_PROCESSES = 4
_SOURCE_ROOT = str(Path(stackbot.__file__).resolve().parent.parent)
_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from stackbot.adapters.scanner_server import main; main()"
)


@dataclass(frozen=True)
class ScannerPython:
    """An interpreter that can run the scanner, and its version."""

    executable: str
    version: tuple[int, int, int]

    @property
    def grammar(self) -> str:
        return f"py{self.version[0]}.{self.version[1]}"

    @property
    def description(self) -> str:
        return f"Python {'.'.join(map(str, self.version))} ({self.executable})"


def probe(executable: str) -> ScannerPython | None:
    """The version of ``executable``, if it runs as a Python at all."""
    try:
        done = subprocess.run(
            [executable, "-I", "-S", "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        major, minor, micro = (int(part) for part in done.stdout.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return ScannerPython(executable, (major, minor, micro))


def _candidates() -> Iterator[str]:
    minors = range(MINIMUM[1], MINIMUM[1] + 8)
    for minor in minors:
        found = shutil.which(f"python3.{minor}")
        if found:
            yield found
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for minor in minors:
        yield from (str(p / "bin" / "python") for p in sorted(pyenv.glob(f"3.{minor}.*")))
    for directory in ("/usr/local/bin", "/usr/bin"):
        yield from (f"{directory}/python3.{minor}" for minor in minors)


def find_scanner_python(configured: str | None) -> ScannerPython | None:
    """The Python the scan runs under (see the module's docstring); None when there is none.
    A configured one that is missing or too old raises :class:`BadInput` naming the setting."""
    need = ".".join(map(str, MINIMUM))
    if configured:
        found = probe(configured)
        if found is None:
            raise BadInput(
                f"{SETTING}={configured}: cannot run it as Python; set a Python >= {need}"
            )
        if found.version[:2] < MINIMUM:
            raise BadInput(
                f"{SETTING}={configured} is Python {'.'.join(map(str, found.version))}; Megatron-LM's "
                f"files need Python >= {need} to parse: set a Python >= {need}"
            )
        return found
    if sys.version_info[:2] >= MINIMUM:
        return ScannerPython(sys.executable, tuple(sys.version_info[:3]))  # type: ignore[arg-type]
    for executable in dict.fromkeys(_candidates()):
        if os.access(executable, os.X_OK):
            found = probe(executable)
            if found is not None and found.version[:2] >= MINIMUM:
                return found
    return None


def too_old_note() -> str:
    need = ".".join(map(str, MINIMUM))
    return (
        f"parsed by Python {sys.version.split()[0]}, older than the {need} Megatron-LM needs; "
        f"set {SETTING} to a Python >= {need} to read it as Megatron's checker does"
    )


def local_scanner() -> LocalScanner:
    """This process as the scanner, with :func:`too_old_note` when it is older than 3.12."""
    return LocalScanner(note=too_old_note() if sys.version_info[:2] < MINIMUM else None)


class _Server:
    """One scanner process, answering one request at a time."""

    def __init__(self, python: ScannerPython) -> None:
        self.python = python
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        try:
            self.process = subprocess.Popen(
                [python.executable, "-I", "-S", "-c", _BOOTSTRAP, _SOURCE_ROOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as error:
            raise BadInput(
                f"cannot start the allowlist scanner under {python.description}: {error}; "
                f"check {SETTING}"
            ) from None
        hello = self._answer()
        if "python" not in hello:
            raise self._failure("it did not start")

    def scan(self, generation: Generation, sources: Sequence[bytes]) -> list[ScanOutcome]:
        stdin = self._pipe(self.process.stdin)
        header = {"generation": generation.value, "sizes": [len(s) for s in sources]}
        try:
            stdin.write(json.dumps(header).encode() + b"\n")
            for source in sources:
                stdin.write(source)
            stdin.flush()
        except OSError:
            raise self._failure("it stopped reading") from None
        answer = self._answer()
        return [
            ScanOutcome(tuple(entries), tuple(lines), error)
            for entries, lines, error in answer["outcomes"]
        ]

    def _answer(self) -> dict[str, Any]:
        line = self._pipe(self.process.stdout).readline()
        try:
            answer = json.loads(line)
        except ValueError:
            raise self._failure("it died") from None
        if not isinstance(answer, dict):
            raise self._failure("it answered nonsense")
        return answer

    @staticmethod
    def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
        assert stream is not None  # both pipes are opened in __init__
        return stream

    def _failure(self, what: str) -> RetryLater:
        self.close()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        return RetryLater(
            f"the allowlist scanner under {self.python.description} failed: {what}"
            + (f": {' | '.join(tail)}" if tail else "")
            + f" (exit {self.process.returncode}); check {SETTING}"
        )

    def close(self) -> None:
        if self.process.poll() is None:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    stream.close()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _chunks(sources: Sequence[bytes]) -> list[tuple[int, int]]:
    """(start, end) slices of about CHUNK_BYTES or CHUNK_FILES each."""
    slices, start, size = [], 0, 0
    for index, source in enumerate(sources):
        size += len(source)
        if size >= CHUNK_BYTES or index + 1 - start >= CHUNK_FILES:
            slices.append((start, index + 1))
            start, size = index + 1, 0
    if start < len(sources):
        slices.append((start, len(sources)))
    return slices


class ProcessScanner:
    """Scans in long-lived processes under ``python``, started on first use and kept for the
    next scan; one scan at a time (a worker's threads take turns)."""

    def __init__(self, python: ScannerPython, processes: int) -> None:
        self.python = python
        self.processes = max(1, processes)
        self._servers: list[_Server] = []
        self._lock = threading.Lock()

    @property
    def grammar(self) -> str:
        return self.python.grammar

    @property
    def description(self) -> str:
        return self.python.description

    def scan(
        self,
        generation: Generation,
        sources: Sequence[bytes],
        progress: Callable[[int], None] | None = None,
    ) -> list[ScanOutcome]:
        slices = _chunks(sources)
        results: list[list[ScanOutcome] | None] = [None] * len(slices)
        with self._lock:
            wanted = min(self.processes, len(slices))
            while len(self._servers) < wanted:
                self._servers.append(_Server(self.python))
            todo: queue.SimpleQueue[int] = queue.SimpleQueue()
            for index in range(len(slices)):
                todo.put(index)
            done: queue.SimpleQueue[tuple[int, BaseException | None]] = queue.SimpleQueue()
            threads = [
                threading.Thread(
                    target=self._drain,
                    args=(server, generation, sources, slices, todo, results, done),
                    daemon=True,
                )
                for server in self._servers[:wanted]
            ]
            for thread in threads:
                thread.start()
            failure: BaseException | None = None
            finished = 0
            for _ in range(len(slices)):
                index, error = done.get()
                if error is not None:
                    failure = failure or error
                    break
                finished += slices[index][1] - slices[index][0]
                if progress is not None:
                    progress(finished)
            for thread in threads:
                thread.join()
            if failure is not None:
                self._servers = [s for s in self._servers if s.process.poll() is None]
                raise failure
        return [outcome for chunk in results if chunk is not None for outcome in chunk]

    @staticmethod
    def _drain(
        server: _Server,
        generation: Generation,
        sources: Sequence[bytes],
        slices: list[tuple[int, int]],
        todo: queue.SimpleQueue[int],
        results: list[list[ScanOutcome] | None],
        done: queue.SimpleQueue[tuple[int, BaseException | None]],
    ) -> None:
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            start, end = slices[index]
            try:
                results[index] = server.scan(generation, sources[start:end])
            except BaseException as error:  # handed to the scanning thread, which raises it
                done.put((index, error))
                return
            done.put((index, None))

    def close(self) -> None:
        with self._lock:
            for server in self._servers:
                server.close()
            self._servers = []


def default_processes() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_PROCESSES))


def make_scanner(configured: str | None, processes: int = 0) -> ProcessScanner | LocalScanner:
    """The scanner for these settings: processes under a Python >= 3.12, or this process with
    a note on every file it cannot parse when there is no such Python (logged once)."""
    python = find_scanner_python(configured)
    if python is None:
        log.warning("allowlist scan: no Python >= 3.12 found; %s", too_old_note())
        return local_scanner()
    return ProcessScanner(python, processes or default_processes())
