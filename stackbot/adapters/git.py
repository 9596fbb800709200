"""The git adapter: bare repositories and mirrors (with :mod:`stackbot.adapters.git_process`,
which holds the subprocess seam, the only code that runs git).

Each tool where it is the better one:

- The git CLI for everything git computes: fetch, push, ``merge-tree --write-tree``,
  ``commit-tree``, ref updates, worktrees. One seam, :func:`~stackbot.adapters.git_process.run_git`, turns every failure into
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
from stackbot.adapters.git_process import (
    FETCH_ONE,
    CatFile,
    GitError,
    GitUnavailable,
    MissingObject,
    NotARepository,
    PushRejected,
    UnknownRef,
    git_dir_of,
    mirror_name,
    refspec,
    resolve_source,
    run_git,
)
from stackbot.domain.types import Sha, TreeSha

__all__ = [
    "FETCH_REFSPECS",
    "GitError",
    "GitMirror",
    "GitRepository",
    "GitUnavailable",
    "Identity",
    "MissingObject",
    "NotARepository",
    "PushRejected",
    "PushUpdate",
    "UnknownRef",
]

FETCH_REFSPECS = (
    "+refs/heads/*:refs/heads/*",
    "+refs/pull/*/head:refs/pull/*/head",
    "+refs/tags/*:refs/tags/*",
)


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


class GitRepository:
    """A repository (bare or not) read and written without a checkout or worktree."""

    def __init__(self, git_dir: Path, timeout: float | None = None) -> None:
        self.git_dir = git_dir
        self.timeout = timeout  # for commands that talk to another repository
        self._objects = LooseObjectDB(str(git_dir / "objects"))
        self._cat_file: CatFile | None = None
        self._trees = TreeStore(self._load, self._store)
        self._commit_times: dict[str, int] = {}
        self._commit_trees: dict[str, TreeSha] = {}

    @classmethod
    def open(cls, path: Path) -> GitRepository:
        return cls(git_dir_of(path))

    def close(self) -> None:
        if self._cat_file is not None:
            self._cat_file.close()
            self._cat_file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def git(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return run_git(self.git_dir, args, **kwargs)

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
        args = ["push"]
        for update in updates:
            args.append(
                f"--force-with-lease=refs/heads/{update.branch}:{update.expected_old or ''}"
            )
        # Options end before the remote and refspecs: none of them may read as an option.
        args += ["--end-of-options", remote]
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
        done = self.git("merge-base", "--end-of-options", a, b, ok_codes=(0, 1))
        return Sha(done.stdout.decode().strip()) if done.returncode == 0 else None

    def is_ancestor(self, ancestor: Sha, descendant: Sha) -> bool:
        done = self.git(
            "merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant, ok_codes=(0, 1)
        )
        return done.returncode == 0

    # -- merging --------------------------------------------------------------------------

    def merge_tree(self, ours: Sha, theirs: Sha) -> MergeTreeResult:
        """Merge two commits into a tree without touching any worktree or index."""
        args = ("merge-tree", "--write-tree", "-z", "--messages", "--end-of-options", ours, theirs)
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

    def _reader(self) -> CatFile:
        if self._cat_file is None:
            self._cat_file = CatFile(self.git_dir)
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

    def write_object(self, kind: bytes, data: bytes) -> Sha:
        """Store an object of ``kind`` (``b"commit"``, ...) exactly as ``data`` holds it."""
        return self._store(kind, data)

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
                run_git(path, ["rev-parse", "--absolute-git-dir"]).stdout.decode().strip()
            )
            (private / "info").mkdir(exist_ok=True)
            patterns = "".join(f"/{d.strip('/')}/\n" for d in directories)
            (private / "info" / "sparse-checkout").write_text(patterns)
            sparse = ["-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=false"]
            run_git(path, [*sparse, "read-tree", "-mu", "HEAD"])
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
        resolved = resolve_source(source)
        path = mirrors_dir / mirror_name(resolved)
        if not (path / "HEAD").is_file():
            path.mkdir(parents=True, exist_ok=True)
            run_git(path, ["init", "--quiet", "--bare"])
        run_git(path, ["config", "remote.origin.url", resolved])
        run_git(path, ["config", "--replace-all", "remote.origin.fetch", FETCH_REFSPECS[0]])
        run_git(path, ["config", "gc.auto", "0"])  # a gc must not race a running merge
        return cls(path, resolved, timeout)

    def fetch(self, refs: Sequence[str] | None = None) -> None:
        """Bring the mirror up to date from the source, in one fetch: only ``refs`` (full ref
        names such as ``refs/pull/8035/head``, or full SHAs), so one broken ref among thousands
        of PRs cannot stop a run, and a ref that fails is named; with None, every branch and PR
        head, pruned."""
        hint = f"Could not fetch {self.source}; check the URL and network access, then retry."
        options: tuple[str, ...] = FETCH_ONE
        if refs is None:
            options, specs = ("--prune", *FETCH_ONE), list(FETCH_REFSPECS)
        else:
            specs = [refspec(ref) for ref in dict.fromkeys(refs)]
        try:
            self.git("fetch", *options, *specs, timeout=self.timeout, hint=hint)
        except GitError as error:
            failing = [] if refs is None else [s for s in specs if not self._fetches(s)]
            if failing and len(failing) < len(specs):  # all failing: the source, not a ref
                names = ", ".join(spec.lstrip("+").split(":")[0] for spec in failing)
                hint = f"{names} could not be fetched from {self.source}"
            raise type(error)(error.command, error.returncode, error.stderr, hint) from None
        finally:
            self.close()  # the open cat-file may hold the old refs

    def _fetches(self, spec: str) -> bool:
        """Whether ``spec`` alone can be fetched (to name what a failed fetch stumbled on)."""
        try:
            self.git("fetch", *FETCH_ONE, spec, timeout=self.timeout)
        except GitError:
            return False
        return True


def _ref_hint(ref: str, repo: GitRepository) -> str:
    return f"No branch, tag or commit {ref!r} in {repo.git_dir}; fetch it or check the name."
