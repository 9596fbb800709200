"""The process-group usage allowlist of git trees: read, scanned, regenerated and checked
straight from git objects (no checkout), and optionally compared with the repository's own
checker run in a temporary sparse worktree.

Scans go through a cache keyed by blob SHA and scanner version, so the merged tree of an
integration step re-parses only the files the step changed.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from stackbot.adapters.git import GitRepository
from stackbot.adapters.git_objects import blob_sha
from stackbot.adapters.scanner_process import local_scanner, make_scanner
from stackbot.config import DEFAULT_ALLOWLIST_PATH, Settings
from stackbot.domain.allowlist import (
    Allowlist,
    AllowlistCheck,
    AllowlistFormatError,
    EntryTally,
    Generation,
    MemoryScanCache,
    Regeneration,
    ScanCache,
    Scanner,
    TreeScan,
    check,
    choose_comment,
    detect_generation,
    parse_allowlist,
    regenerate,
    render_allowlist,
    scan_tree,
)
from stackbot.domain.integration import AllowlistChange, AllowlistReport
from stackbot.domain.types import Sha, TreeSha
from stackbot.services.allowlist_delta import regenerate_by_file
from stackbot.services.scan_cache import SharedScanCache, scan_cache_file

CHECKER_PATH = "tools/check_process_group_usage.py"
SCAN_ROOT = "megatron/core"
CHECKER_DIRECTORIES = ("megatron/core", "tools")
CHECKER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class AllowlistFile:
    """The allowlist as one tree holds it: absent (``blob`` None), parsed, or broken."""

    blob: Sha | None
    allowlist: Allowlist | None = None
    error: str | None = None


@dataclass(frozen=True)
class TreeRegeneration:
    regeneration: Regeneration
    file: AllowlistFile  # the tree's own file before regeneration


@dataclass(frozen=True)
class MergeRewrite:
    tree: TreeSha
    change: AllowlistChange
    regeneration: Regeneration


@dataclass(frozen=True)
class ScanTools:
    """What every :class:`TreeAllowlist` of a process shares: the data directory's scan cache
    and the scanner (processes under a Python >= 3.12)."""

    cache: SharedScanCache
    scanner: Scanner

    @classmethod
    def from_settings(cls, settings: Settings) -> ScanTools:
        """Raises BadInput naming ``STACKBOT_SCANNER_PYTHON`` when it names no Python >= 3.12."""
        scanner = make_scanner(settings.scanner_python, settings.scanner_processes)
        return cls(SharedScanCache(scan_cache_file(settings.data_dir)), scanner)

    def close(self) -> None:
        self.cache.close()
        close = getattr(self.scanner, "close", None)
        if close is not None:
            close()


def tally_text(tally: EntryTally) -> str:
    """``megatron/core/x.py: Foo.bar:accessor:parallel_state.get_tp_group ×2 (line 6, 9)``: the
    count when above one, where the tree reads it when it does; no KEY when the first
    generation compared without line numbers."""
    entry = (
        f"{tally.key}:{tally.kind}:{tally.detail}" if tally.key else f"{tally.kind}:{tally.detail}"
    )
    times = f" ×{tally.count}" if tally.count > 1 else ""
    where = f" (line {', '.join(map(str, tally.lines))})" if tally.lines else ""
    return f"{tally.file}: {entry}{times}{where}"


class TreeAllowlist:
    """The allowlist of the trees of one repository."""

    def __init__(
        self,
        repo: GitRepository,
        *,
        path: str = DEFAULT_ALLOWLIST_PATH,
        cache: ScanCache | None = None,
        scanner: Scanner | None = None,
        default_generation: Generation = Generation.SCOPE,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """``scanner``: who parses the files (default: this process; the services pass the one
        of :func:`stackbot.adapters.scanner_process.make_scanner`, under Python >= 3.12)."""
        self.repo = repo
        self.path = path
        self.cache: ScanCache = cache if cache is not None else MemoryScanCache()
        # Without one, this process scans, and says so on every file its parser refuses when it
        # is older than the Python Megatron-LM needs.
        self.scanner = scanner if scanner is not None else local_scanner()
        self.default_generation = default_generation
        self.progress = progress
        # Parsed files and their generations by blob: each step of a run reads the file the
        # step before wrote.
        self._files: dict[Sha, AllowlistFile] = {}
        self._generations: dict[Sha, Generation | None] = {}
        self._last_scan: tuple[str, TreeScan] | None = None  # (scan root's tree, its scan)

    def read(self, tree: str) -> AllowlistFile:
        blob = self.repo.blob_at(tree, self.path)
        if blob is None:
            return AllowlistFile(None)
        cached = self._files.get(blob)
        if cached is None:
            try:
                cached = AllowlistFile(blob, parse_allowlist(self.repo.read_blob(blob)))
            except AllowlistFormatError as error:
                cached = AllowlistFile(blob, error=str(error))
            self._files[blob] = cached
        return cached

    def scan(self, tree: str, generation: Generation) -> TreeScan:
        """The tree's reads. After the first scan, only the paths that differ from the last
        scanned tree are looked at (each through the blob cache), so the cost of an integration
        step follows what the step changed, not the size of megatron/core."""
        root = self.repo.subtree(tree, SCAN_ROOT) or ""
        last = self._last_scan
        if last is None or last[1].generation is not generation:
            blobs = self.repo.ls_tree(tree, SCAN_ROOT)
            result = self._scan_blobs(blobs, generation, self.progress)
        else:
            result = self._rescan(last[0], root, last[1])
        self._last_scan = (root, result)
        return result

    def _rescan(self, old_root: str, new_root: str, old: TreeScan) -> TreeScan:
        changed = self.repo.changed_paths(old_root, new_root)
        blobs = {path: self.repo.blob_at(new_root, path) for path in changed}
        present = {f"{SCAN_ROOT}/{p}": sha for p, sha in blobs.items() if sha is not None}
        delta = self._scan_blobs(present, old.generation, None)
        outcomes = dict(old.outcomes)
        for path, sha in blobs.items():
            if sha is None:
                outcomes.pop(f"{SCAN_ROOT}/{path}", None)
        outcomes.update(delta.outcomes)  # an edited file keeps its place
        if len(outcomes) != len(old.outcomes) or any(p not in old.outcomes for p in delta.outcomes):
            outcomes = dict(sorted(outcomes.items()))  # a file came or went: keep path order
        return TreeScan(
            old.generation, outcomes, delta.parsed, len(outcomes) - delta.parsed, delta.parser
        )

    def _scan_blobs(
        self,
        blobs: Mapping[str, str],
        generation: Generation,
        progress: Callable[[int, int], None] | None,
    ) -> TreeScan:
        return scan_tree(
            blobs,
            self.repo.read_blob,
            generation,
            self.cache,
            progress,
            scanner=self.scanner,
            load_blobs=self.repo.read_blobs,
        )

    def generation_of(
        self, *files: AllowlistFile, override: Generation | None = None
    ) -> Generation:
        """The first file's format that tells one (by its KEYs), else ``override``, else the
        default."""
        fallback = override or self.default_generation
        for file in files:
            if file.allowlist is not None and file.allowlist.allowed:
                found = self._generation_of_file(file, fallback)
                if found is not None:
                    return found
        return fallback

    def _generation_of_file(self, file: AllowlistFile, default: Generation) -> Generation | None:
        """The file's generation (``default`` when it lists nothing), None when it mixes both;
        remembered by blob."""
        if file.blob is None or file.allowlist is None:
            return None
        if not file.allowlist.allowed:
            return default
        if file.blob not in self._generations:
            try:
                self._generations[file.blob] = detect_generation(file.allowlist, default)
            except AllowlistFormatError:
                self._generations[file.blob] = None
        return self._generations[file.blob]

    def regenerate_tree(
        self, tree: str, *, generation: Generation | None = None
    ) -> TreeRegeneration:
        """What the tree's checker's ``--update`` would write (new reads are reported, not
        added). A tree whose file is missing or broken gets one from its reads, all new."""
        own = self.read(tree)
        chosen = self.generation_of(own, override=generation)
        scan = self.scan(tree, chosen)
        comment = own.allowlist.comment if own.allowlist else ""
        regeneration = regenerate(
            ours=own.allowlist, theirs=None, tree=scan, generation=chosen, comment=comment
        )
        if own.allowlist is None:
            regeneration = _from_reads(regeneration, scan, comment)
        return TreeRegeneration(regeneration, own)

    def check_tree(
        self, tree: str, *, generation: Generation | None = None
    ) -> tuple[AllowlistFile, AllowlistCheck | None]:
        """The tree's file judged against the tree; no check when the file is absent or broken."""
        own = self.read(tree)
        if own.allowlist is None:
            return own, None
        chosen = self.generation_of(own, override=generation)
        return own, check(own.allowlist, self.scan(tree, chosen), chosen)

    def rewrite_merge(self, merged: TreeSha, ours: TreeSha, theirs: TreeSha) -> MergeRewrite | None:
        """Regenerate the allowlist of a merged tree from both parents' files and the merged
        tree's reads, and write it into the tree. None when the merged tree has no allowlist."""
        if self.repo.blob_at(merged, self.path) is None:
            return None
        ours_file, theirs_file = self.read(ours), self.read(theirs)
        checkers = [self.repo.blob_at(t, CHECKER_PATH) for t in (merged, ours, theirs)]
        theirs_leads = checkers[0] is not None and checkers[0] == checkers[2] != checkers[1]
        lead, other = (theirs_file, ours_file) if theirs_leads else (ours_file, theirs_file)
        generation = self.generation_of(lead, other)
        scan = self.scan(merged, generation)
        comment = choose_comment(
            checkers[0],
            checkers[1],
            checkers[2],
            ours_file.allowlist.comment if ours_file.allowlist else None,
            theirs_file.allowlist.comment if theirs_file.allowlist else None,
        )
        regeneration = self._regenerate_sides(ours_file, theirs_file, scan, generation, comment)
        old_blob = self.repo.blob_at(merged, self.path)
        written = Sha(blob_sha(regeneration.data))
        rewritten = old_blob != written
        tree = (
            self.repo.replace_paths(merged, {self.path: regeneration.data}) if rewritten else merged
        )
        self._files.setdefault(written, AllowlistFile(written, regeneration.allowlist))
        before = ours_file.allowlist or theirs_file.allowlist
        change = AllowlistChange(
            path=self.path,
            total_before=before.total if before else None,
            total_after=regeneration.total_after,
            new_reads=tuple(tally_text(t) for t in regeneration.new_reads),
            stale=tuple(tally_text(t) for t in regeneration.stale),
            unparsed=tuple(f"{p}: {why}" for p, why in sorted(regeneration.unparsed.items())),
            rewritten=rewritten,
        )
        return MergeRewrite(tree, change, regeneration)

    def _regenerate_sides(
        self,
        ours: AllowlistFile,
        theirs: AllowlistFile,
        scan: TreeScan,
        generation: Generation,
        comment: str,
    ) -> Regeneration:
        sides = [ours.allowlist, theirs.allowlist]
        checked = all(
            self._generation_of_file(f, generation) is generation
            for f in (ours, theirs)
            if f.allowlist
        )
        try:
            regeneration = regenerate_by_file(
                ours=sides[0],
                theirs=sides[1],
                tree=scan,
                generation=generation,
                comment=comment,
                sides_checked=checked,
            )
        except AllowlistFormatError:
            # A side mixing both generations' keys can be compared with nothing: leave it out.
            sides = [s if s is None or _one_generation(s) else None for s in sides]
            regeneration = regenerate(
                ours=sides[0], theirs=sides[1], tree=scan, generation=generation, comment=comment
            )
        if sides == [None, None]:
            regeneration = _from_reads(regeneration, scan, comment)
        return regeneration

    def report(self, tree: TreeSha, base_tree: TreeSha) -> AllowlistReport | None:
        """The final check of a run's tree, with the base's total for the delta."""
        own, verdict = self.check_tree(tree)
        if own.blob is None:
            return None
        base = self.read(base_tree).allowlist
        base_total = base.total if base else None
        if own.allowlist is None or verdict is None:
            return AllowlistReport(
                self.path,
                self.default_generation.value,
                0,
                0,
                base_total,
                False,
                unparsed=(f"{self.path}: {own.error}",),
            )
        return AllowlistReport(
            path=self.path,
            format=verdict.generation.value,
            total=own.allowlist.total,
            entries=own.allowlist.entry_count,
            base_total=base_total,
            ok=verdict.ok,
            new_reads=tuple(tally_text(t) for t in verdict.new_reads),
            stale=tuple(tally_text(t) for t in verdict.stale),
            unparsed=tuple(f"{p}: {why}" for p, why in sorted(verdict.unparsed.items())),
        )


def _one_generation(allowlist: Allowlist) -> bool:
    try:
        detect_generation(allowlist, Generation.SCOPE)
    except AllowlistFormatError:
        return False
    return True


def _from_reads(regeneration: Regeneration, scan: TreeScan, comment: str) -> Regeneration:
    """With no usable allowlist on either side, the file is the tree's reads (what the first
    generation's ``--update`` does), and every read is new: nobody listed it."""
    allowlist = Allowlist.from_reads(comment, scan.reads)
    return Regeneration(
        generation=regeneration.generation,
        allowlist=allowlist,
        data=render_allowlist(allowlist),
        new_reads=regeneration.new_reads,
        stale=regeneration.stale,
        unparsed=regeneration.unparsed,
        ignored_sides=regeneration.ignored_sides,
        total_before=0,
    )


@dataclass(frozen=True)
class CheckerVerdict:
    """What the repository's own checker said about a tree stackbot wrote."""

    returncode: int
    file_unchanged: bool
    output: str

    @property
    def accepts(self) -> bool:
        return self.returncode == 0 and self.file_unchanged

    def agrees_with(self, builtin_ok: bool) -> bool:
        return self.accepts == builtin_ok

    def describe(self, builtin_ok: bool) -> str:
        theirs = (
            "accepts"
            if self.accepts
            else f"rejects (exit {self.returncode}"
            + ("" if self.file_unchanged else ", rewrote the file")
            + ")"
        )
        ours = "accepts" if builtin_ok else "rejects"
        word = "agrees" if self.agrees_with(builtin_ok) else "DISAGREES"
        return f"repository checker {word}: it {theirs} the file, stackbot {ours} it"


def run_repo_checker(
    repo: GitRepository,
    commit: Sha,
    command: str,
    *,
    path: str = DEFAULT_ALLOWLIST_PATH,
    directories: Sequence[str] = CHECKER_DIRECTORIES,
) -> CheckerVerdict:
    """Run ``command`` (e.g. ``python tools/check_process_group_usage.py``, or its ``--update``)
    at the top of a sparse worktree of ``commit``; an ``--update`` that changes the file counts
    as a rejection of what stackbot wrote."""
    expected = repo.blob_at(repo.tree_of(commit), path)
    with repo.sparse_worktree(commit, directories) as worktree:
        try:
            done = subprocess.run(
                shlex.split(command),
                cwd=worktree,
                capture_output=True,
                text=True,
                timeout=CHECKER_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError as error:
            return CheckerVerdict(127, True, f"cannot run {command!r}: {error}")
        except subprocess.TimeoutExpired:
            return CheckerVerdict(124, True, f"{command!r} ran past {CHECKER_TIMEOUT_S:g}s")
        target = worktree / path
        after = target.read_bytes() if target.is_file() else None
        unchanged = (after is None and expected is None) or (
            after is not None and expected is not None and after == repo.read_blob(expected)
        )
        return CheckerVerdict(done.returncode, unchanged, (done.stdout + done.stderr).strip())
