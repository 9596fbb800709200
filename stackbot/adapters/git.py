"""The only module that runs git.

Two tools, each where it is the better one:

- The git CLI for everything git computes: fetch, push, ``merge-tree --write-tree``,
  ``commit-tree``, ref updates, worktrees. One seam, :func:`_run_git`, turns every failure into
  a :class:`GitError` carrying the command and git's stderr.
- GitPython (and its gitdb) for object access: reads go through GitPython's persistent
  ``git cat-file --batch`` process (one process for thousands of blobs instead of one each), and
  the few blobs and trees stackbot writes (a regenerated allowlist and the trees above it) are
  stored as loose objects in-process, which costs no process start at all. Trees are parsed here
  and cached by SHA: a tree never changes, so an integration run re-reads only the directories a
  merge changed.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import git as gitpython
from gitdb import IStream, LooseObjectDB  # type: ignore[import-untyped]

from stackbot.domain.integration import Conflict
from stackbot.domain.types import Sha, TreeSha, is_full_sha
from stackbot.errors import BadInput, Permanent, RetryLater, StackbotError

# Fixed so git's messages (which merge-tree results carry) read the same everywhere.
_BASE_ENV = {"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0"}
FETCH_REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/pull/*/head:refs/pull/*/head",
    "+refs/tags/*:refs/tags/*",
)
REGULAR_FILE_MODES = (b"100644", b"100755")
TREE_MODE = b"40000"
_TREE_CACHE_LIMIT = 200_000


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


def _run_git(
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


@dataclass(frozen=True)
class MergeTreeResult:
    tree: TreeSha
    clean: bool
    conflicts: tuple[Conflict, ...]
    messages: tuple[str, ...]


@dataclass(frozen=True)
class PushUpdate:
    """Push ``local_ref`` to ``refs/heads/<branch>`` only if the remote branch is still at
    ``expected_old`` (``None``: only if it does not exist yet)."""

    local_ref: str
    branch: str
    expected_old: Sha | None


@dataclass(frozen=True)
class Identity:
    name: str = "stackbot"
    email: str = "stackbot@users.noreply.localhost"


_STAGE_LINE = re.compile(rb"^(\d{6}) ([0-9a-f]{40}) ([123])\t(.*)$", re.S)


def parse_merge_tree(output: bytes, returncode: int) -> MergeTreeResult:
    """Parse ``git merge-tree --write-tree -z --messages`` (git 2.38+): the tree, the conflicted
    file info (``mode sha stage<TAB>path``), an empty field, then the messages, each
    ``<n>NUL<path>NUL...<type>NUL<text>NUL``."""
    fields = output.split(b"\0")
    tree = fields[0].decode()
    if not is_full_sha(tree):
        raise GitError(["merge-tree"], returncode, f"unexpected output: {output[:200]!r}")
    staged: dict[str, None] = {}
    i = 1
    while i < len(fields) and (match := _STAGE_LINE.match(fields[i])):
        staged.setdefault(_decode_path(match.group(4)), None)
        i += 1
    if i < len(fields) and fields[i] == b"":
        i += 1
    kinds: dict[str, str] = {}
    extra: list[Conflict] = []
    messages: list[str] = []
    while i < len(fields) and fields[i].isdigit():
        count = int(fields[i])
        paths = [_decode_path(p) for p in fields[i + 1 : i + 1 + count]]
        kind = fields[i + 1 + count].decode(errors="replace")
        messages.append(fields[i + 2 + count].decode(errors="replace").strip())
        i += 3 + count
        if not kind.startswith("CONFLICT"):
            continue
        kind = kind.removeprefix("CONFLICT").strip().strip("()")
        hit = [p for p in paths if p in staged]
        for path in hit:
            kinds.setdefault(path, kind)
        if not hit and paths:
            extra.append(Conflict(paths[0], kind))
    conflicts = tuple(Conflict(p, kinds.get(p, "unknown")) for p in staged) + tuple(extra)
    clean = returncode == 0 and not conflicts
    return MergeTreeResult(TreeSha(tree), clean, conflicts, tuple(messages))


def _decode_path(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def _encode_path(path: str) -> bytes:
    return path.encode("utf-8", errors="surrogateescape")


TreeEntry = tuple[bytes, bytes, str]  # (mode, name, hex sha)


def parse_tree(data: bytes) -> tuple[TreeEntry, ...]:
    entries: list[TreeEntry] = []
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        entries.append((data[pos:space], data[space + 1 : nul], data[nul + 1 : nul + 21].hex()))
        pos = nul + 21
    return tuple(entries)


def serialize_tree(entries: Sequence[TreeEntry]) -> bytes:
    # git orders entries by name, a directory's name compared as if it ended in "/".
    ordered = sorted(entries, key=lambda e: e[1] + (b"/" if e[0] == TREE_MODE else b""))
    return b"".join(mode + b" " + name + b"\0" + bytes.fromhex(sha) for mode, name, sha in ordered)


class GitRepository:
    """A repository (bare or not) read and written without a checkout or worktree."""

    def __init__(self, git_dir: Path, timeout: float | None = None) -> None:
        self.git_dir = git_dir
        self.timeout = timeout  # for commands that talk to another repository
        self._objects = LooseObjectDB(str(git_dir / "objects"))
        self._gitpython: gitpython.Repo | None = None
        self._trees: dict[str, tuple[TreeEntry, ...]] = {}
        self._flat: dict[str, dict[str, Sha]] = {}

    @classmethod
    def open(cls, path: Path) -> GitRepository:
        return cls(_git_dir_of(path))

    def close(self) -> None:
        if self._gitpython is not None:
            self._gitpython.close()
            self._gitpython = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def git(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return _run_git(self.git_dir, args, **kwargs)

    # -- refs -----------------------------------------------------------------------------

    def rev_parse(self, ref: str) -> Sha:
        """The commit ``ref`` names; :class:`UnknownRef` (a BadInput) when there is none."""
        if not ref or ref.startswith("-"):
            raise UnknownRef(["rev-parse", ref], 128, f"{ref!r} is not a ref name")
        hint = f"No branch, tag or commit {ref!r} in {self.git_dir}; fetch it or check the name."
        done = self.git(
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{ref}^{{commit}}",
            ok_codes=(0, 1),
            hint=hint,
        )
        if done.returncode != 0:
            raise UnknownRef(
                ["rev-parse", "--verify", ref], done.returncode, f"unknown revision {ref}", hint
            )
        return Sha(done.stdout.decode().strip())

    def try_rev_parse(self, ref: str) -> Sha | None:
        try:
            return self.rev_parse(ref)
        except UnknownRef:
            return None

    def update_refs(self, refs: Mapping[str, Sha], *, delete: Sequence[str] = ()) -> None:
        """Set (and delete) refs in one transaction."""
        script = "".join(f"update {ref} {sha}\n" for ref, sha in refs.items())
        script += "".join(f"delete {ref}\n" for ref in delete)
        self.git("update-ref", "--stdin", stdin=script.encode())

    def push(self, remote: str, updates: Sequence[PushUpdate]) -> None:
        """Lease-protected push: each branch moves only if it is still where we last saw it."""
        args = ["push", remote]
        for update in updates:
            args.append(
                f"--force-with-lease=refs/heads/{update.branch}:{update.expected_old or ''}"
            )
        args += [f"{u.local_ref}:refs/heads/{u.branch}" for u in updates]
        try:
            self.git(*args, timeout=self.timeout)
        except PushRejected as rejected:
            hint = "The remote branch moved since stackbot last pushed it (someone else pushed); nothing was overwritten"
            raise PushRejected(
                rejected.command, rejected.returncode, rejected.stderr, hint
            ) from None

    def list_refs(self, prefix: str) -> dict[str, Sha]:
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)", prefix).stdout.decode()
        return {ref: Sha(sha) for ref, sha in (line.split(" ") for line in out.splitlines())}

    def merge_base(self, a: Sha, b: Sha) -> Sha | None:
        done = self.git("merge-base", a, b, ok_codes=(0, 1))
        return Sha(done.stdout.decode().strip()) if done.returncode == 0 else None

    def is_ancestor(self, ancestor: Sha, descendant: Sha) -> bool:
        return (
            self.git(
                "merge-base", "--is-ancestor", ancestor, descendant, ok_codes=(0, 1)
            ).returncode
            == 0
        )

    # -- merging --------------------------------------------------------------------------

    def merge_tree(self, ours: Sha, theirs: Sha) -> MergeTreeResult:
        """Merge two commits into a tree without touching any worktree or index."""
        done = self.git(
            "merge-tree", "--write-tree", "-z", "--messages", ours, theirs, ok_codes=(0, 1)
        )
        return parse_merge_tree(done.stdout, done.returncode)

    def commit_tree(
        self,
        tree: TreeSha,
        parents: Sequence[Sha],
        message: str,
        *,
        identity: Identity = Identity(),
        timestamp: int | None = None,
    ) -> Sha:
        """Write a commit. Its date defaults to the newest parent's, so the same merge of the
        same heads gives the same commit SHA every time."""
        when = (
            timestamp
            if timestamp is not None
            else max((self.commit_time(p) for p in parents), default=0)
        )
        date = f"@{when} +0000"
        env = {
            "GIT_AUTHOR_NAME": identity.name,
            "GIT_AUTHOR_EMAIL": identity.email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": identity.name,
            "GIT_COMMITTER_EMAIL": identity.email,
            "GIT_COMMITTER_DATE": date,
        }
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        done = self.git(*args, "-F", "-", stdin=message.encode(), env=env)
        return Sha(done.stdout.decode().strip())

    # -- objects --------------------------------------------------------------------------

    def read_object(self, sha: str) -> tuple[str, bytes]:
        if self._gitpython is None:
            self._gitpython = gitpython.Repo(self.git_dir)
        try:
            _, kind, _, data = self._gitpython.git.get_object_data(sha)
        except (ValueError, gitpython.GitCommandError) as exc:
            raise MissingObject(
                ["cat-file", "--batch"], 128, f"object {sha} is missing: {exc}"
            ) from exc
        return kind.decode() if isinstance(kind, bytes) else str(kind), data

    def read_blob(self, sha: str) -> bytes:
        return self.read_object(sha)[1]

    def read_blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        """Many blobs through the one persistent ``cat-file --batch`` process."""
        return {sha: self.read_blob(sha) for sha in dict.fromkeys(shas)}

    def commit_time(self, commit: Sha) -> int:
        for line in self.read_object(commit)[1].split(b"\n"):
            if line.startswith(b"committer "):
                return int(line.rsplit(b" ", 2)[1])
            if not line:
                break
        return 0

    def tree_of(self, commit: Sha) -> TreeSha:
        header = self.read_object(commit)[1].split(b"\n", 1)[0]
        return TreeSha(header.removeprefix(b"tree ").decode())

    def tree_entries(self, tree: str) -> tuple[TreeEntry, ...]:
        cached = self._trees.get(tree)
        if cached is None:
            if len(self._trees) > _TREE_CACHE_LIMIT:
                self._trees.clear()
                self._flat.clear()
            cached = parse_tree(self.read_object(tree)[1])
            self._trees[tree] = cached
        return cached

    def ls_tree(self, tree: str, prefix: str = "") -> dict[str, Sha]:
        """``{path: blob}`` for the regular files under ``prefix`` (a directory), recursively."""
        sub = self._subtree(tree, prefix)
        if sub is None:
            return {}
        head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        return {head + path: sha for path, sha in self._flatten(sub).items()}

    def blob_at(self, tree: str, path: str) -> Sha | None:
        parent, _, name = path.rpartition("/")
        sub = self._subtree(tree, parent)
        if sub is None:
            return None
        raw = _encode_path(name)
        for mode, entry, sha in self.tree_entries(sub):
            if entry == raw and mode in REGULAR_FILE_MODES:
                return Sha(sha)
        return None

    def changed_paths(self, a: str, b: str, prefix: str = "") -> set[str]:
        """Paths whose blob differs between two trees (added, removed or modified); a tree
        SHA of ``""`` is the empty tree."""
        if a == b:
            return set()
        left = {name: (mode, sha) for mode, name, sha in self.tree_entries(a)} if a else {}
        right = {name: (mode, sha) for mode, name, sha in self.tree_entries(b)} if b else {}
        changed: set[str] = set()
        for name in left.keys() | right.keys():
            old, new = left.get(name), right.get(name)
            if old == new:
                continue
            path = prefix + _decode_path(name)
            sides = [side for side in (old, new) if side is not None]
            if any(mode == TREE_MODE for mode, _ in sides):
                old_tree = old[1] if old and old[0] == TREE_MODE else ""
                new_tree = new[1] if new and new[0] == TREE_MODE else ""
                changed |= self.changed_paths(old_tree, new_tree, path + "/")
            if any(mode != TREE_MODE for mode, _ in sides):
                changed.add(path)
        return changed

    def write_blob(self, data: bytes) -> Sha:
        return self._store(b"blob", data)

    def replace_paths(self, tree: str, files: Mapping[str, bytes | None]) -> TreeSha:
        """A new tree: ``tree`` with each path's content replaced (``None`` removes the path).
        Only the trees above the changed paths are rewritten."""
        blobs = {
            path: (None if data is None else self.write_blob(data)) for path, data in files.items()
        }
        return TreeSha(self._rewrite(tree, blobs))

    def _rewrite(self, tree: str, blobs: Mapping[str, Sha | None]) -> str:
        entries = {
            name: (mode, sha) for mode, name, sha in (self.tree_entries(tree) if tree else ())
        }
        below: dict[bytes, dict[str, Sha | None]] = {}
        for path, blob in blobs.items():
            first, _, rest = path.partition("/")
            if rest:
                below.setdefault(_encode_path(first), {})[rest] = blob
            elif blob is None:
                entries.pop(_encode_path(first), None)
            else:
                mode = entries.get(_encode_path(first), (b"100644", ""))[0]
                entries[_encode_path(first)] = (
                    mode if mode in REGULAR_FILE_MODES else b"100644",
                    blob,
                )
        for name, sub_blobs in below.items():
            mode, sha = entries.get(name, (TREE_MODE, ""))
            new_sub = self._rewrite(sha if mode == TREE_MODE else "", sub_blobs)
            if self.tree_entries(new_sub):
                entries[name] = (TREE_MODE, new_sub)
            else:
                entries.pop(name, None)
        return self._store(b"tree", serialize_tree([(m, n, s) for n, (m, s) in entries.items()]))

    def _store(self, kind: bytes, data: bytes) -> Sha:
        stored = self._objects.store(IStream(kind, len(data), io.BytesIO(data)))
        sha = Sha(stored.hexsha.decode() if isinstance(stored.hexsha, bytes) else stored.hexsha)
        if kind == b"tree":
            self._trees[sha] = parse_tree(data)
        return sha

    def _subtree(self, tree: str, directory: str) -> str | None:
        current = tree
        for part in [p for p in directory.split("/") if p]:
            raw = _encode_path(part)
            found = [
                sha
                for mode, name, sha in self.tree_entries(current)
                if name == raw and mode == TREE_MODE
            ]
            if not found:
                return None
            current = found[0]
        return current

    def _flatten(self, tree: str) -> dict[str, Sha]:
        cached = self._flat.get(tree)
        if cached is not None:
            return cached
        flat: dict[str, Sha] = {}
        for mode, name, sha in self.tree_entries(tree):
            path = _decode_path(name)
            if mode == TREE_MODE:
                flat.update({f"{path}/{sub}": blob for sub, blob in self._flatten(sha).items()})
            elif mode in REGULAR_FILE_MODES:
                flat[path] = Sha(sha)
        self._flat[tree] = flat
        return flat

    # -- worktrees --------------------------------------------------------------------------

    @contextmanager
    def sparse_worktree(self, commit: Sha, directories: Sequence[str]) -> Iterator[Path]:
        """A temporary worktree of ``commit`` holding only ``directories`` (cone mode, so the
        top-level files come too), for running a repository's own tool; removed afterwards."""
        holder = Path(tempfile.mkdtemp(prefix="stackbot-worktree-"))
        path = holder / "tree"
        self.git("worktree", "add", "--no-checkout", "--detach", str(path), commit)
        try:
            _run_git(path, ["sparse-checkout", "set", "--cone", *directories])
            _run_git(path, ["checkout", "--quiet", "--detach", commit])
            yield path
        finally:
            self.git("worktree", "remove", "--force", str(path), ok_codes=(0, 128))
            shutil.rmtree(holder, ignore_errors=True)
            self.git("worktree", "prune")


class GitMirror(GitRepository):
    """A bare mirror of a repository under the data directory, fetched on demand."""

    def __init__(self, git_dir: Path, source: str, timeout: float | None) -> None:
        super().__init__(git_dir, timeout)
        self.source = source

    @classmethod
    def open_or_clone(
        cls, source: str, mirrors_dir: Path, *, timeout: float | None = None
    ) -> GitMirror:
        """Open (creating it if needed) the mirror of ``source``, a URL or a local path.
        Call :meth:`fetch` to bring it up to date."""
        resolved = _resolve_source(source)
        path = mirrors_dir / _mirror_name(resolved)
        if not (path / "HEAD").is_file():
            path.mkdir(parents=True, exist_ok=True)
            _run_git(path, ["init", "--quiet", "--bare"])
        _run_git(path, ["config", "remote.origin.url", resolved])
        _run_git(path, ["config", "--replace-all", "remote.origin.fetch", FETCH_REFSPECS[0]])
        _run_git(path, ["config", "gc.auto", "0"])  # a gc must not race a running merge
        return cls(path, resolved, timeout)

    def fetch(self) -> None:
        """``+refs/heads/*`` and ``+refs/pull/*/head`` (and tags) from the source, pruned."""
        hint = f"Could not fetch {self.source}; check the URL and network access, then retry."
        self.git(
            "fetch",
            "--quiet",
            "--prune",
            "--no-tags",
            "origin",
            *FETCH_REFSPECS,
            timeout=self.timeout,
            hint=hint,
        )
        self._trees.clear()
        self._flat.clear()


def _git_dir_of(path: Path) -> Path:
    if not path.is_dir():
        raise NotARepository(
            ["rev-parse", "--git-dir"],
            128,
            f"{path} is not a directory",
            "Pass the path of a git repository.",
        )
    hint = f"{path} is not a git repository; pass a repository's path or URL."
    done = _run_git(path, ["rev-parse", "--absolute-git-dir"], hint=hint)
    return Path(done.stdout.decode().strip())


_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:)", re.I)


def _resolve_source(source: str) -> str:
    if _URL.match(source):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise NotARepository(
            ["clone"], 128, f"{source} does not exist", "Pass a repository's path or URL."
        )
    return str(_git_dir_of(path.resolve()))


def _mirror_name(source: str) -> str:
    tail = source.rstrip("/").removesuffix("/.git").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-.") or "repo"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return f"{slug.removesuffix('.git')}-{digest}.git"
