"""How git is run: the one subprocess seam (:func:`run_git`), the error kinds its failures
become, and the long-lived ``git cat-file --batch`` reader. With :mod:`stackbot.adapters.git`
(which uses these), the only code that starts git.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from stackbot.errors import BadInput, Permanent, RetryLater, StackbotError

# Fixed so git's messages (which merge-tree results carry) read the same everywhere.
_BASE_ENV = {"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0"}


class GitError(StackbotError):
    """A git command failed; the message names the command and quotes git's stderr."""

    def __init__(
        self, command: Sequence[str], returncode: int, stderr: str, hint: str = ""
    ) -> None:
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr = stderr.strip()
        text = f"`git {' '.join(self.command)}` failed (exit {returncode}): {self.stderr or 'no output'}"
        super().__init__(f"{text}. {hint}" if hint else text)


class NotARepository(GitError, BadInput):
    pass


class UnknownRef(GitError, BadInput):
    pass


class GitUnavailable(GitError, RetryLater):
    """Network trouble, a timeout or a lock held by another git: worth retrying."""


class PushRejected(GitError, Permanent):
    """The remote branch moved since it was fetched: someone else pushed; nothing was clobbered."""


class MissingObject(GitError, Permanent):
    pass


_CLASSIFIERS: tuple[tuple[re.Pattern[str], type[GitError]], ...] = (
    (
        re.compile(r"not a git repository|does not appear to be a git repository", re.I),
        NotARepository,
    ),
    (
        re.compile(
            r"unknown revision|bad revision|not a valid object name|not something we can merge|"
            r"needed a single revision|invalid reference|couldn't find remote ref|"
            r"not a valid commit name|ambiguous argument",
            re.I,
        ),
        UnknownRef,
    ),
    (
        re.compile(
            r"could not resolve host|connection (refused|reset|timed out)|unable to access|"
            r"early eof|remote end hung up|cannot lock ref|unable to create .*\.lock|timed out",
            re.I,
        ),
        GitUnavailable,
    ),
    (re.compile(r"stale info|\[rejected\]|failed to push some refs", re.I), PushRejected),
)


def _error_for(command: Sequence[str], returncode: int, stderr: str, hint: str = "") -> GitError:
    for pattern, kind in _CLASSIFIERS:
        if pattern.search(stderr):
            return kind(command, returncode, stderr, hint)
    return GitError(command, returncode, stderr, hint)


def run_git(
    cwd: Path,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    ok_codes: Sequence[int] = (0,),
    hint: str = "",
) -> subprocess.CompletedProcess[bytes]:
    """The seam: run ``git args`` in ``cwd``; any exit status outside ``ok_codes`` raises."""
    full_env = {**os.environ, **_BASE_ENV, **(env or {})}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=full_env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitUnavailable(args, -1, f"timed out after {timeout:g}s", hint) from exc
    except FileNotFoundError as exc:
        if not cwd.is_dir():
            raise NotARepository(args, -1, f"{cwd} does not exist", hint) from exc
        raise GitError(args, -1, "git is not installed: install git >= 2.38") from exc
    if done.returncode not in ok_codes:
        raise _error_for(args, done.returncode, done.stderr.decode(errors="replace"), hint)
    return done


class CatFile:
    """One ``git cat-file --batch`` process; a batch of names is written at once and the
    answers read back in order."""

    CHUNK = 256  # names per write: their text stays well inside a pipe buffer (no deadlock)

    def __init__(self, git_dir: Path) -> None:
        self._process = subprocess.Popen(
            ["git", "cat-file", "--batch"],
            cwd=git_dir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **_BASE_ENV},
        )

    def read(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """(sha, type, content) per name, None for a name that names no object."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        found: list[tuple[str, str, bytes] | None] = []
        for start in range(0, len(names), self.CHUNK):
            chunk = names[start : start + self.CHUNK]
            stdin.write(b"".join(name.encode() + b"\n" for name in chunk))
            stdin.flush()
            for _ in chunk:
                header = stdout.readline().split()
                if not header:
                    raise GitError(["cat-file", "--batch"], -1, "git cat-file ended unexpectedly")
                if len(header) != 3 or header[1] not in _OBJECT_TYPES:
                    found.append(None)  # "<name> missing" or "<name> ambiguous"
                    continue
                data = stdout.read(int(header[2]) + 1)[:-1]
                found.append((header[0].decode(), header[1].decode(), data))
        return found

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


_OBJECT_TYPES = (b"blob", b"tree", b"commit", b"tag")


# -- where repositories are -------------------------------------------------------------


def git_dir_of(path: Path) -> Path:
    if not path.is_dir():
        raise NotARepository(
            ["rev-parse", "--git-dir"],
            128,
            f"{path} is not a directory",
            "Pass the path of a git repository.",
        )
    hint = f"{path} is not a git repository; pass a repository's path or URL."
    done = run_git(path, ["rev-parse", "--absolute-git-dir"], hint=hint)
    return Path(done.stdout.decode().strip())


_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:)", re.I)


def resolve_source(source: str) -> str:
    if _URL.match(source):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise NotARepository(
            ["clone"], 128, f"{source} does not exist", "Pass a repository's path or URL."
        )
    return str(git_dir_of(path.resolve()))


def mirror_name(source: str) -> str:
    tail = source.rstrip("/").removesuffix("/.git").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-.") or "repo"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return f"{slug.removesuffix('.git')}-{digest}.git"


# -- fetching ----------------------------------------------------------------------------

# A fetch from the mirror's source of the refspecs that follow.
FETCH_ONE = ("--quiet", "--no-tags", "--end-of-options", "origin")
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")


def refspec(ref: str) -> str:
    """A full SHA is fetched as itself; a full ref name into the same name here."""
    if _FULL_SHA.fullmatch(ref):
        return ref
    if not ref.startswith("refs/") or ref.endswith("/") or "*" in ref:
        raise BadInput(f"{ref!r} is not a full ref name (refs/...) or a full commit SHA")
    return f"+{ref}:{ref}"
