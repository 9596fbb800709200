"""The conflict matrix of a series: for every pair of open PRs, whether they conflict when both
are merged on the same base, generated files ignored, with the paths.

Pair (a, b) is ``merge-tree`` of (base + a) and b, where base + a is the merge commit of a onto
the base (one per PR, reused across its pairs). A PR that does not merge onto the base itself
is listed in ``with_base`` with its paths, is paired through its bare head, and those paths are
left out of its pairs (they are the base's conflict, not the pair's). Results are cached by
(base, head a, head b), so a push to one PR recomputes only that PR's row.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackbot.adapters.git import GitRepository
from stackbot.domain.integration import Conflict, split_conflicts
from stackbot.domain.types import PrNumber, Sha

PairKey = tuple[str, str, str]  # (base, head a, head b)


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

    def conflict(self, a: PrNumber, b: PrNumber) -> tuple[Conflict, ...]:
        for pair in self.pairs:
            if {pair.a, pair.b} == {a, b}:
                return pair.conflicts
        return ()

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "heads": {str(pr): sha for pr, sha in self.heads.items()},
            "pairs": [pair.to_json() for pair in self.pairs],
            "with_base": {
                str(pr): [c.to_json() for c in conflicts]
                for pr, conflicts in self.with_base.items()
            },
        }


def conflict_matrix(
    repo: GitRepository,
    base: Sha,
    prs: Sequence[tuple[PrNumber, Sha]],
    *,
    generated: Collection[str],
    cache: ConflictCache | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ConflictMatrix:
    cache = cache if cache is not None else ConflictCache()
    with_base: dict[PrNumber, tuple[Conflict, ...]] = {}
    for number, head in prs:
        found = cache.lookup((base, head, ""))
        if found is None:
            found = cache.store((base, head, ""), repo.merge_tree(base, head).conflicts)
        real = _real(found, generated)
        if real:
            with_base[number] = real

    def sides(a: PrNumber, head_a: Sha, b: PrNumber, head_b: Sha) -> tuple[Sha, Sha]:
        # A PR that does not merge onto the base is merged as its bare head instead.
        if a not in with_base:
            return _merged_onto_base(repo, cache, base, head_a), head_b
        if b not in with_base:
            return _merged_onto_base(repo, cache, base, head_b), head_a
        return head_a, head_b

    total = len(prs) * (len(prs) - 1) // 2
    done = 0
    pairs: list[PairConflict] = []
    for i, (a, head_a) in enumerate(prs):
        for b, head_b in prs[i + 1 :]:
            key = (base, head_a, head_b)
            found = cache.lookup(key)
            if found is None:
                found = cache.store(key, repo.merge_tree(*sides(a, head_a, b, head_b)).conflicts)
            # What a PR already conflicts on with the base is its row in with_base, not the pair's.
            known = {c.path for c in with_base.get(a, ()) + with_base.get(b, ())}
            real = tuple(c for c in _real(found, generated) if c.path not in known)
            if real:
                pairs.append(PairConflict(a, b, real))
            done += 1
            if progress is not None:
                progress(done, total)
    return ConflictMatrix(base, dict(prs), tuple(pairs), with_base)


def _real(conflicts: Sequence[Conflict], generated: Collection[str]) -> tuple[Conflict, ...]:
    return split_conflicts(conflicts, generated)[0]


def _merged_onto_base(repo: GitRepository, cache: ConflictCache, base: Sha, head: Sha) -> Sha:
    commit = cache.onto_base.get((base, head))
    if commit is None:
        merged = repo.merge_tree(base, head)
        commit = repo.commit_tree(
            merged.tree, [base, head], f"conflict matrix: {head} onto {base}\n"
        )
        cache.onto_base[(base, head)] = commit
    return commit
