"""git's object and output formats, parsed and written in Python (this module runs nothing;
``stackbot.adapters.git`` runs git and uses these)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from stackbot.domain.integration import Conflict
from stackbot.domain.types import TreeSha, is_full_sha

REGULAR_FILE_MODES = (b"100644", b"100755")
TREE_MODE = b"40000"

TreeEntry = tuple[bytes, bytes, str]  # (mode, name, hex sha)


def decode_path(raw: bytes) -> str:
    # git paths are bytes; surrogateescape keeps a non-UTF-8 name round-trippable.
    return raw.decode("utf-8", errors="surrogateescape")


def encode_path(path: str) -> bytes:
    return path.encode("utf-8", errors="surrogateescape")


def blob_sha(data: bytes) -> str:
    """The SHA git gives a blob of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def parse_tree(data: bytes) -> tuple[TreeEntry, ...]:
    """A tree object's entries: ``<mode> <name>\\0<20-byte sha>`` each."""
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


def commit_object(
    tree: str, parents: Sequence[str], name: str, email: str, timestamp: int, message: str
) -> bytes:
    """A commit object's content as ``git commit-tree`` writes it (UTC dates)."""
    if any(c in name + email for c in "<>\n"):
        raise ValueError(f"an identity cannot contain '<', '>' or a newline: {name} <{email}>")
    person = f"{name} <{email}> {timestamp} +0000"
    lines = [
        f"tree {tree}",
        *(f"parent {p}" for p in parents),
        f"author {person}",
        f"committer {person}",
    ]
    return ("\n".join(lines) + "\n\n" + message).encode()


@dataclass(frozen=True)
class MergeTreeResult:
    tree: TreeSha
    clean: bool
    conflicts: tuple[Conflict, ...]
    messages: tuple[str, ...]


_STAGE_LINE = re.compile(rb"^(\d{6}) ([0-9a-f]{40}) ([123])\t(.*)$", re.S)


def parse_merge_tree(output: bytes, returncode: int) -> MergeTreeResult:
    """Parse ``git merge-tree --write-tree -z --messages`` (git 2.38+): the tree, the conflicted
    file info (``mode sha stage<TAB>path``), an empty field, then the messages, each
    ``<n>NUL<path>NUL...<type>NUL<text>NUL``. A conflicted path takes the type of the first
    CONFLICT message naming it; a CONFLICT message naming no staged path (a rename's old name,
    say) adds its first path. Raises ValueError on output of another shape."""
    fields = output.split(b"\0")
    tree = fields[0].decode(errors="replace")
    if not is_full_sha(tree):
        raise ValueError(f"unexpected merge-tree output: {output[:200]!r}")
    staged: dict[str, None] = {}
    i = 1
    while i < len(fields) and (match := _STAGE_LINE.match(fields[i])):
        staged.setdefault(decode_path(match.group(4)), None)
        i += 1
    if i < len(fields) and fields[i] == b"":
        i += 1
    kinds: dict[str, str] = {}
    extra: list[Conflict] = []
    messages: list[str] = []
    while i < len(fields) and fields[i].isdigit():
        count = int(fields[i])
        paths = [decode_path(p) for p in fields[i + 1 : i + 1 + count]]
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


LoadObjects = Callable[[Sequence[str]], Sequence[bytes]]  # object SHAs -> their contents
StoreObject = Callable[[bytes, bytes], str]  # (kind, data) -> SHA


class TreeStore:
    """Trees read (through ``load``, many per round trip) and written (through ``store``),
    cached by SHA: a tree never changes, so walking the next merged tree reads only the
    directories the merge changed."""

    CACHE_LIMIT = 200_000

    def __init__(self, load: LoadObjects, store: StoreObject) -> None:
        self._load = load
        self._store = store
        self._entries: dict[str, tuple[TreeEntry, ...]] = {}
        self._flat: dict[str, dict[str, str]] = {}

    def entries(self, tree: str) -> tuple[TreeEntry, ...]:
        if tree not in self._entries:
            self.prefetch([tree])
        return self._entries[tree]

    def prefetch(self, trees: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(trees) if t and t not in self._entries]
        if not missing:
            return
        if len(self._entries) > self.CACHE_LIMIT:
            self._entries.clear()
            self._flat.clear()
        for tree, data in zip(missing, self._load(missing), strict=True):
            self._entries[tree] = parse_tree(data)

    def write(self, entries: Sequence[TreeEntry]) -> str:
        data = serialize_tree(entries)
        sha = self._store(b"tree", data)
        self._entries[sha] = parse_tree(data)
        return sha

    def subtree(self, tree: str, directory: str) -> str | None:
        current = tree
        for part in [p for p in directory.split("/") if p]:
            if not current:
                return None
            raw = encode_path(part)
            found = [s for m, n, s in self.entries(current) if n == raw and m == TREE_MODE]
            current = found[0] if found else ""
        return current or None

    def blob_at(self, tree: str, path: str) -> str | None:
        parent, _, name = path.rpartition("/")
        sub = self.subtree(tree, parent)
        raw = encode_path(name)
        found = (
            [s for m, n, s in self.entries(sub) if n == raw and m in REGULAR_FILE_MODES]
            if sub
            else []
        )
        return found[0] if found else None

    def flatten(self, tree: str) -> dict[str, str]:
        """``{path: blob}`` of the regular files below ``tree``."""
        cached = self._flat.get(tree)
        if cached is not None:
            return cached
        entries = self.entries(tree)
        self.prefetch([sha for mode, _, sha in entries if mode == TREE_MODE])
        flat: dict[str, str] = {}
        for mode, name, sha in entries:
            path = decode_path(name)
            if mode == TREE_MODE:
                flat.update({f"{path}/{sub}": blob for sub, blob in self.flatten(sha).items()})
            elif mode in REGULAR_FILE_MODES:
                flat[path] = sha
        self._flat[tree] = flat
        return flat

    def changed(self, a: str, b: str, prefix: str = "") -> set[str]:
        """Paths whose entry differs between trees ``a`` and ``b`` (``""``: the empty tree),
        walked one directory level at a time with each level's trees read together."""
        changed: set[str] = set()
        level = [(a, b, prefix)] if a != b else []
        while level:
            self.prefetch([t for pair in level for t in pair[:2]])
            below: list[tuple[str, str, str]] = []
            for old_tree, new_tree, at in level:
                below += self._diff_level(old_tree, new_tree, at, changed)
            level = below
        return changed

    def _diff_level(
        self, a: str, b: str, prefix: str, changed: set[str]
    ) -> list[tuple[str, str, str]]:
        left = {name: (mode, sha) for mode, name, sha in self.entries(a)} if a else {}
        right = {name: (mode, sha) for mode, name, sha in self.entries(b)} if b else {}
        below = []
        for name in left.keys() | right.keys():
            old, new = left.get(name), right.get(name)
            if old == new:
                continue
            path = prefix + decode_path(name)
            sides = [side for side in (old, new) if side is not None]
            if any(mode == TREE_MODE for mode, _ in sides):
                old_tree = old[1] if old and old[0] == TREE_MODE else ""
                new_tree = new[1] if new and new[0] == TREE_MODE else ""
                below.append((old_tree, new_tree, path + "/"))
            if any(mode != TREE_MODE for mode, _ in sides):
                changed.add(path)
        return below

    def rewrite(self, tree: str, blobs: Mapping[str, str | None]) -> str:
        """``tree`` with each path pointing at a new blob (``None``: removed); only the trees
        above the paths are written, and a directory left empty disappears."""
        entries = {name: (mode, sha) for mode, name, sha in (self.entries(tree) if tree else ())}
        below: dict[bytes, dict[str, str | None]] = {}
        for path, blob in blobs.items():
            first, _, rest = path.partition("/")
            name = encode_path(first)
            if rest:
                below.setdefault(name, {})[rest] = blob
            elif blob is None:
                entries.pop(name, None)
            else:
                mode = entries.get(name, (b"100644", ""))[0]
                entries[name] = (mode if mode in REGULAR_FILE_MODES else b"100644", blob)
        for name, sub_blobs in below.items():
            mode, sha = entries.get(name, (TREE_MODE, ""))
            new_sub = self.rewrite(sha if mode == TREE_MODE else "", sub_blobs)
            if self.entries(new_sub):
                entries[name] = (TREE_MODE, new_sub)
            else:
                entries.pop(name, None)
        return self.write([(m, n, s) for n, (m, s) in entries.items()])
