"""The conflict matrix of a series: for every pair of open PRs, whether they conflict when both
are merged on the same base, generated files ignored, with the paths.

Pair (a, b) is ``merge-tree`` of (base + a) and b, where base + a is the merge commit of a onto
the base (one per PR, reused across its pairs). A PR that does not merge onto the base itself
is listed in ``with_base`` with its paths, is paired through its bare head, and those paths are
left out of its pairs (they are the base's conflict, not the pair's). Results are cached by
(base, and the two heads in SHA order), so a push to one PR recomputes only that PR's row, and
a PR moving in the series order recomputes nothing.

Incremental across processes: ``previous`` (the matrix stored on the series, read back with
:meth:`ConflictMatrix.from_json`) answers every pair whose two heads, the base and the
generated-file list are unchanged, without a merge; so a push to one PR of a 50-PR series does
that PR's merge onto the base and its 49 pairs, whichever worker runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackbot.adapters.git import GitRepository
from stackbot.domain.integration import Conflict, split_conflicts
from stackbot.domain.types import PrNumber, Sha, TreeSha

PairKey = tuple[str, str, str]  # (base, head a, head b); a pair's heads in SHA order


@dataclass
class ConflictCache:
    """Merge results by (base, head a, head b); a PR's merge onto the base is (base, head, "")."""

    results: dict[PairKey, tuple[Conflict, ...]] = field(default_factory=dict)
    onto_base: dict[tuple[str, str], Sha] = field(default_factory=dict)  # -> merge commit
    hits: int = 0
    misses: int = 0

    def lookup(self, key: PairKey) -> tuple[Conflict, ...] | None:
        found = self.results.get(key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def store(self, key: PairKey, conflicts: tuple[Conflict, ...]) -> tuple[Conflict, ...]:
        self.results[key] = conflicts
        return conflicts

    def to_json(self) -> dict[str, Any]:
        return {
            "results": [
                {"key": list(key), "conflicts": [c.to_json() for c in conflicts]}
                for key, conflicts in self.results.items()
            ]
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConflictCache:
        results = {
            (item["key"][0], item["key"][1], item["key"][2]): tuple(
                Conflict(c["path"], c["type"]) for c in item["conflicts"]
            )
            for item in data.get("results", [])
        }
        return cls(results=results)


@dataclass(frozen=True)
class PairConflict:
    a: PrNumber
    b: PrNumber
    conflicts: tuple[Conflict, ...]

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "conflicts": [c.to_json() for c in self.conflicts]}


@dataclass(frozen=True)
class ConflictMatrix:
    base: Sha
    heads: dict[PrNumber, Sha]
    pairs: tuple[PairConflict, ...]  # the conflicting pairs only
    with_base: dict[PrNumber, tuple[Conflict, ...]]  # PRs that do not merge onto the base
    generated: tuple[str, ...] | None = None  # the generated files ignored (None: not known)
    # Pairs (and PRs onto the base) this computation merged, not taken from a cache or the
    # previous matrix: what a push cost.
    merged_pairs: int = 0
    merged_onto_base: int = 0
    # Each PR's merge commit onto the base, where one was made (kept in the mirror): a later
    # matrix pairs an unchanged PR with a pushed one without merging it onto the base again.
    onto_base: dict[PrNumber, Sha] = field(default_factory=dict)

    def conflict(self, a: PrNumber, b: PrNumber) -> tuple[Conflict, ...]:
        for pair in self.pairs:
            if {pair.a, pair.b} == {a, b}:
                return pair.conflicts
        return ()

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "base": self.base,
            "heads": {str(pr): sha for pr, sha in self.heads.items()},
            "pairs": [pair.to_json() for pair in self.pairs],
            "with_base": {
                str(pr): [c.to_json() for c in conflicts]
                for pr, conflicts in self.with_base.items()
            },
        }
        if self.generated is not None:
            document["generated"] = list(self.generated)
        if self.onto_base:
            document["onto_base"] = {str(pr): sha for pr, sha in self.onto_base.items()}
        return document

    @classmethod
    def from_json(cls, data: Any) -> ConflictMatrix | None:
        """A stored matrix, or None when ``data`` is not one (an older or damaged document is
        then simply recomputed)."""
        try:
            generated = data.get("generated")
            return cls(
                base=Sha(str(data["base"])),
                heads={PrNumber(int(pr)): Sha(str(sha)) for pr, sha in data["heads"].items()},
                pairs=tuple(
                    PairConflict(
                        PrNumber(int(item["a"])),
                        PrNumber(int(item["b"])),
                        _conflicts(item["conflicts"]),
                    )
                    for item in data["pairs"]
                ),
                with_base={
                    PrNumber(int(pr)): _conflicts(items) for pr, items in data["with_base"].items()
                },
                generated=None if generated is None else tuple(str(path) for path in generated),
                onto_base={
                    PrNumber(int(pr)): Sha(str(sha))
                    for pr, sha in data.get("onto_base", {}).items()
                },
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


def _conflicts(items: Any) -> tuple[Conflict, ...]:
    return tuple(Conflict(str(c["path"]), str(c["type"])) for c in items)


class _Previous:
    """What an earlier matrix says about unchanged heads on the same base and generated files."""

    def __init__(
        self, previous: ConflictMatrix | None, base: Sha, generated: tuple[str, ...]
    ) -> None:
        usable = previous is not None and previous.base == base and previous.generated == generated
        self.heads: dict[PrNumber, Sha] = dict(previous.heads) if previous and usable else {}
        self.pairs: dict[frozenset[PrNumber], tuple[Conflict, ...]] = (
            {frozenset((pair.a, pair.b)): pair.conflicts for pair in previous.pairs}
            if previous and usable
            else {}
        )
        self.with_base = dict(previous.with_base) if previous and usable else {}
        self.commits = dict(previous.onto_base) if previous and usable else {}

    def onto_base_commit(self, number: PrNumber, head: Sha) -> Sha | None:
        return self.commits.get(number) if self.heads.get(number) == head else None

    def onto_base(self, number: PrNumber, head: Sha) -> tuple[Conflict, ...] | None:
        if self.heads.get(number) != head:
            return None
        return self.with_base.get(number, ())

    def pair(
        self, a: PrNumber, head_a: Sha, b: PrNumber, head_b: Sha
    ) -> tuple[Conflict, ...] | None:
        if a == b or self.heads.get(a) != head_a or self.heads.get(b) != head_b:
            return None
        return self.pairs.get(frozenset((a, b)), ())


def conflict_matrix(
    repo: GitRepository,
    base: Sha,
    prs: Sequence[tuple[PrNumber, Sha]],
    *,
    generated: Collection[str],
    cache: ConflictCache | None = None,
    progress: Callable[[int, int], None] | None = None,
    previous: ConflictMatrix | None = None,
) -> ConflictMatrix:
    """The matrix of ``prs`` (in series order) on ``base``; ``previous``: the last matrix of the
    series, whose answers for unchanged heads are taken as they are."""
    cache = cache if cache is not None else ConflictCache()
    kept = _Previous(previous, base, tuple(sorted(generated)))
    with_base: dict[PrNumber, tuple[Conflict, ...]] = {}
    made: dict[PrNumber, Sha] = {}  # merge commits onto the base made or found in the cache
    onto_base_merges = 0
    for number, head in prs:
        real = kept.onto_base(number, head)
        if real is None:
            found = cache.lookup((base, head, ""))
            if found is None:
                onto_base_merges += 1
                merged = repo.merge_tree(base, head)
                found = cache.store((base, head, ""), merged.conflicts)
                # The same merge is the PR's side of its pairs: commit it now, not merge again.
                made[number] = _commit_onto_base(repo, base, head, merged.tree)
                cache.onto_base[(base, head)] = made[number]
            real = _real(found, generated)
        if real:
            with_base[number] = real

    def sides(a: PrNumber, head_a: Sha, b: PrNumber, head_b: Sha) -> tuple[Sha, Sha]:
        # A PR that does not merge onto the base is merged as its bare head instead.
        if a not in with_base:
            return onto_base(a, head_a), head_b
        if b not in with_base:
            return onto_base(b, head_b), head_a
        return head_a, head_b

    def onto_base(number: PrNumber, head: Sha) -> Sha:
        nonlocal onto_base_merges
        key = (base, head)
        if key not in cache.onto_base:
            hint = kept.onto_base_commit(number, head)
            if hint is not None and repo.try_rev_parse(hint) == hint:
                cache.onto_base[key] = hint
            else:
                onto_base_merges += 1
        made[number] = _merged_onto_base(repo, cache, base, head)
        return made[number]

    total = len(prs) * (len(prs) - 1) // 2
    done = merged_pairs = 0
    pairs: list[PairConflict] = []
    for i, (a, head_a) in enumerate(prs):
        for b, head_b in prs[i + 1 :]:
            real = kept.pair(a, head_a, b, head_b)
            if real is None:
                # One computation per pair of heads, whichever order the series lists them in.
                first, second = sorted(((a, head_a), (b, head_b)), key=lambda side: side[1])
                key = (base, first[1], second[1])
                found = cache.lookup(key)
                if found is None:
                    merged_pairs += 1
                    merged = repo.merge_tree(*sides(first[0], first[1], second[0], second[1]))
                    found = cache.store(key, merged.conflicts)
                # What a PR already conflicts on with the base is its row in with_base, not
                # the pair's.
                known = {c.path for c in with_base.get(a, ()) + with_base.get(b, ())}
                real = tuple(c for c in _real(found, generated) if c.path not in known)
            if real:
                pairs.append(PairConflict(a, b, real))
            done += 1
            if progress is not None:
                progress(done, total)
    return ConflictMatrix(
        base,
        dict(prs),
        tuple(pairs),
        with_base,
        generated=tuple(sorted(generated)),
        merged_pairs=merged_pairs,
        merged_onto_base=onto_base_merges,
        onto_base={
            number: commit
            for number, head in prs
            if (commit := made.get(number) or kept.onto_base_commit(number, head)) is not None
        },
    )


def _real(conflicts: Sequence[Conflict], generated: Collection[str]) -> tuple[Conflict, ...]:
    return split_conflicts(conflicts, generated)[0]


def _merged_onto_base(repo: GitRepository, cache: ConflictCache, base: Sha, head: Sha) -> Sha:
    commit = cache.onto_base.get((base, head))
    if commit is None:
        commit = _commit_onto_base(repo, base, head, repo.merge_tree(base, head).tree)
        cache.onto_base[(base, head)] = commit
    return commit


def _commit_onto_base(repo: GitRepository, base: Sha, head: Sha, tree: TreeSha) -> Sha:
    return repo.commit_tree(tree, [base, head], f"conflict matrix: {head} onto {base}\n")
