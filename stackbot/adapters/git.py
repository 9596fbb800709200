"""The only module that runs git.

Each tool where it is the better one:

- The git CLI for everything git computes: fetch, push, ``merge-tree --write-tree``,
  ``commit-tree``, ref updates, worktrees. One seam, :func:`_run_git`, turns every failure into
  a :class:`GitError` carrying the command and git's stderr.
- One ``git cat-file --batch`` process kept open for reading objects and resolving refs. We
  drive it ourselves rather than through GitPython's persistent cat-file because requests can
  then be pipelined: a directory level of trees, or a batch of blobs, costs one round trip
  instead of one each (what an integration step's time mostly is, next to merge-tree itself).
- GitPython's object database (gitdb) for the objects stackbot writes itself (a regenerated
  allowlist, the trees above it, and the integration merge commits, byte for byte what
  ``git commit-tree`` writes): they are stored as loose objects in-process, with no process
  started at all.

Trees are parsed and walked in :mod:`stackbot.adapters.git_objects`.
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

from gitdb import IStream, LooseObjectDB  # type: ignore[import-untyped]

from stackbot.adapters.git_objects import (
    MergeTreeResult,
    TreeEntry,
    TreeStore,
    commit_object,
    parse_merge_tree,
)
from stackbot.domain.types import Sha, TreeSha
from stackbot.errors import BadInput, Permanent, RetryLater, StackbotError

# Fixed so git's messages (which merge-tree results carry) read the same everywhere.
_BASE_ENV = {"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0"}
FETCH_REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/pull/*/head:refs/pull/*/head",
    "+refs/tags/*:refs/tags/*",
)


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


class _CatFile:
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


class GitRepository:
    """A repository (bare or not) read and written without a checkout or worktree."""

    def __init__(self, git_dir: Path, timeout: float | None = None) -> None:
        self.git_dir = git_dir
        self.timeout = timeout  # for commands that talk to another repository
        self._objects = LooseObjectDB(str(git_dir / "objects"))
        self._cat_file: _CatFile | None = None
        self._trees = TreeStore(self._load, self._store)
        self._commit_times: dict[str, int] = {}
        self._commit_trees: dict[str, TreeSha] = {}

    @classmethod
    def open(cls, path: Path) -> GitRepository:
        return cls(_git_dir_of(path))

    def close(self) -> None:
        if self._cat_file is not None:
            self._cat_file.close()
            self._cat_file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def git(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return _run_git(self.git_dir, args, **kwargs)

    # -- refs -----------------------------------------------------------------------------

    def rev_parse(self, ref: str) -> Sha:
        """The commit ``ref`` names; :class:`UnknownRef` (a BadInput) when there is none."""
        return self.rev_parse_many([ref])[0]

    def rev_parse_many(self, refs: Sequence[str]) -> list[Sha]:
        """The commits ``refs`` name, resolved together by the open cat-file (same rules as
        rev-parse), so resolving forty PR heads is one round trip and starts no process. The
        first ref that names no commit raises :class:`UnknownRef` (a BadInput)."""
        for ref in refs:
            if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref):
                raise UnknownRef(
                    ["rev-parse", ref], 128, f"{ref!r} is not a ref name", _ref_hint(ref, self)
                )
        found = self._reader().read([f"{ref}^{{commit}}" for ref in refs])
        shas = []
        for ref, got in zip(refs, found, strict=True):
            if got is None:
                raise UnknownRef(
                    ["rev-parse", ref], 128, f"unknown revision {ref}", _ref_hint(ref, self)
                )
            self._note_commit(got[0], got[2])
            shas.append(Sha(got[0]))
        return shas

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
        self.close()  # the open cat-file may hold the old refs

    def list_refs(self, prefix: str) -> dict[str, Sha]:
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)", prefix).stdout.decode()
        return {ref: Sha(sha) for ref, sha in (line.split(" ") for line in out.splitlines())}

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
            hint = (
                "The remote branch moved since stackbot last pushed it (someone else pushed); "
                "nothing was overwritten"
            )
            raise PushRejected(
                rejected.command, rejected.returncode, rejected.stderr, hint
            ) from None

    def merge_base(self, a: Sha, b: Sha) -> Sha | None:
        done = self.git("merge-base", a, b, ok_codes=(0, 1))
        return Sha(done.stdout.decode().strip()) if done.returncode == 0 else None

    def is_ancestor(self, ancestor: Sha, descendant: Sha) -> bool:
        done = self.git("merge-base", "--is-ancestor", ancestor, descendant, ok_codes=(0, 1))
        return done.returncode == 0

    # -- merging --------------------------------------------------------------------------

    def merge_tree(self, ours: Sha, theirs: Sha) -> MergeTreeResult:
        """Merge two commits into a tree without touching any worktree or index."""
        args = ("merge-tree", "--write-tree", "-z", "--messages", ours, theirs)
        done = self.git(*args, ok_codes=(0, 1))
        try:
            return parse_merge_tree(done.stdout, done.returncode)
        except ValueError as error:
            raise GitError(args, done.returncode, f"{error}; {done.stderr.decode()}") from None

    def commit_tree(
        self,
        tree: TreeSha,
        parents: Sequence[Sha],
        message: str,
        *,
        identity: Identity = Identity(),
        timestamp: int | None = None,
    ) -> Sha:
        """Write a commit, byte for byte what ``git commit-tree`` writes, in-process. Its date
        defaults to the newest parent's, so the same merge of the same heads gives the same
        commit SHA every time."""
        if timestamp is None:
            timestamp = max((self.commit_time(p) for p in parents), default=0)
        self.tree_entries(tree)  # the tree must exist, as commit-tree checks
        data = commit_object(tree, parents, identity.name, identity.email, timestamp, message)
        sha = self._store(b"commit", data)
        self._commit_times[sha] = timestamp
        self._commit_trees[sha] = tree
        return sha

    # -- objects --------------------------------------------------------------------------

    def _reader(self) -> _CatFile:
        if self._cat_file is None:
            self._cat_file = _CatFile(self.git_dir)
        return self._cat_file

    def _load(self, shas: Sequence[str]) -> list[bytes]:
        found = self._reader().read(shas)
        missing = [sha for sha, got in zip(shas, found, strict=True) if got is None]
        if missing:
            raise MissingObject(
                ["cat-file", "--batch"], 128, f"objects missing: {', '.join(missing[:5])}"
            )
        return [got[2] for got in found if got is not None]

    def read_object(self, sha: str) -> bytes:
        return self._load([sha])[0]

    def read_blob(self, sha: str) -> bytes:
        return self.read_object(sha)

    def read_blobs(self, shas: Sequence[str]) -> dict[str, bytes]:
        """Many blobs in one round trip of the open cat-file."""
        unique = list(dict.fromkeys(shas))
        return dict(zip(unique, self._load(unique), strict=True))

    def _note_commit(self, sha: str, data: bytes) -> None:
        """Remember a commit's tree and date from its object (both are asked for again)."""
        header = data.split(b"\n\n", 1)[0].split(b"\n")
        self._commit_trees[sha] = TreeSha(header[0].removeprefix(b"tree ").decode())
        for line in header:
            if line.startswith(b"committer "):
                self._commit_times[sha] = int(line.rsplit(b" ", 2)[1])

    def commit_time(self, commit: Sha) -> int:
        if commit not in self._commit_times:
            self._note_commit(commit, self.read_object(commit))
        return self._commit_times.get(commit, 0)

    def tree_of(self, commit: Sha) -> TreeSha:
        if commit not in self._commit_trees:
            self._note_commit(commit, self.read_object(commit))
        return self._commit_trees[commit]

    def tree_entries(self, tree: str) -> tuple[TreeEntry, ...]:
        return self._trees.entries(tree)

    def ls_tree(self, tree: str, prefix: str = "") -> dict[str, Sha]:
        """``{path: blob}`` for the regular files under ``prefix`` (a directory), recursively."""
        sub = self._trees.subtree(tree, prefix) if prefix.strip("/") else tree
        if sub is None:
            return {}
        head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        return {head + path: Sha(sha) for path, sha in self._trees.flatten(sub).items()}

    def blob_at(self, tree: str, path: str) -> Sha | None:
        found = self._trees.blob_at(tree, path)
        return Sha(found) if found else None

    def subtree(self, tree: str, directory: str) -> str | None:
        """The SHA of ``directory``'s tree inside ``tree``, or None when there is none."""
        return self._trees.subtree(tree, directory)

    def changed_paths(self, a: str, b: str, under: str = "") -> set[str]:
        """Paths under the directory ``under`` whose blob differs between two trees (added,
        removed or modified). Equal subtrees are skipped by SHA, so the cost follows the change,
        not the tree."""
        top = under.strip("/")
        left, right = (self._trees.subtree(t, top) or "" for t in (a, b))
        return self._trees.changed(left, right, f"{top}/" if top else "")

    def write_blob(self, data: bytes) -> Sha:
        return self._store(b"blob", data)

    def replace_paths(self, tree: str, files: Mapping[str, bytes | None]) -> TreeSha:
        """A new tree: ``tree`` with each path's content replaced (``None`` removes the path).
        Only the trees above the changed paths are rewritten."""
        blobs = {
            path: None if data is None else self.write_blob(data) for path, data in files.items()
        }
        return TreeSha(self._trees.rewrite(tree, blobs))

    def _store(self, kind: bytes, data: bytes) -> Sha:
        sha = hashlib.sha1(kind + b" %d\0" % len(data) + data).hexdigest()
        if (self.git_dir / "objects" / sha[:2] / sha[2:]).is_file():
            return Sha(sha)  # a re-run writes the same objects again: keep the ones there
        stored = self._objects.store(IStream(kind, len(data), io.BytesIO(data)))
        hexsha = stored.hexsha
        return Sha(hexsha.decode() if isinstance(hexsha, bytes) else hexsha)

    # -- worktrees --------------------------------------------------------------------------

    @contextmanager
    def sparse_worktree(self, commit: Sha, directories: Sequence[str]) -> Iterator[Path]:
        """A temporary worktree of ``commit`` holding only ``directories``, for running a
        repository's own tool; removed afterwards. Sparse checkout is switched on for this one
        command (``-c``) with the patterns in the worktree's own git dir, because ``git
        sparse-checkout`` would move ``core.bare`` out of the mirror's shared config."""
        holder = Path(tempfile.mkdtemp(prefix="stackbot-worktree-"))
        path = holder / "tree"
        self.git("worktree", "add", "--no-checkout", "--detach", str(path), commit)
        try:
            private = Path(
                _run_git(path, ["rev-parse", "--absolute-git-dir"]).stdout.decode().strip()
            )
            (private / "info").mkdir(exist_ok=True)
            patterns = "".join(f"/{d.strip('/')}/\n" for d in directories)
            (private / "info" / "sparse-checkout").write_text(patterns)
            sparse = ["-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false"]
            _run_git(path, [*sparse, "read-tree", "-mu", "HEAD"])
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
        self.close()  # the open cat-file may hold the old refs


def _ref_hint(ref: str, repo: GitRepository) -> str:
    return f"No branch, tag or commit {ref!r} in {repo.git_dir}; fetch it or check the name."


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
