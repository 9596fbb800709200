"""The conflict matrix of a series on real repositories."""

from __future__ import annotations

import json

from stackbot.domain.integration import Conflict
from stackbot.domain.types import PrNumber, Sha
from stackbot.services.conflicts import ConflictCache, conflict_matrix
from tests.integration.conftest import MirrorOf
from tests.integration.megatron import ALLOWLIST
from tests.integration.repo_builder import RepoBuilder


def test_pairs_conflict_ignoring_generated_files(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    builder.commit("base", {"a.txt": "1\n2\n3\n", "b.txt": "b\n", ALLOWLIST: '{"total": 0}\n'})
    builder.pr_branch("p1", {"a.txt": "1\nONE\n3\n", ALLOWLIST: '{"total": 1}\n'})
    builder.pr_branch("p2", {"a.txt": "1\nTWO\n3\n"})
    builder.pr_branch("p3", {"b.txt": "three\n", ALLOWLIST: '{"total": 3}\n'})
    builder.pr_branch("p4", {"new.txt": "4\n"})
    builder.commit("main edits b", {"b.txt": "main\n"})
    mirror = mirror_of(builder)
    base = mirror.rev_parse("main")
    prs = [(PrNumber(n), mirror.rev_parse(f"p{n}")) for n in (1, 2, 3, 4)]
    cache = ConflictCache()
    seen: list[tuple[int, int]] = []
    matrix = conflict_matrix(
        mirror,
        base,
        prs,
        generated=[ALLOWLIST],
        cache=cache,
        progress=lambda d, t: seen.append((d, t)),
    )
    # p1 and p3 meet only in the allowlist, which is regenerated: no conflict.
    assert [(p.a, p.b) for p in matrix.pairs] == [(1, 2)]
    assert matrix.conflict(PrNumber(2), PrNumber(1)) == (Conflict("a.txt", "contents"),)
    assert matrix.conflict(PrNumber(1), PrNumber(3)) == ()
    # p3 does not even merge onto the base (main changed b.txt too).
    assert matrix.with_base == {PrNumber(3): (Conflict("b.txt", "contents"),)}
    assert seen[-1] == (6, 6)
    assert cache.misses == 4 + 6

    # Cached by head SHAs: the same heads cost no merge, a new head only its row.
    again = conflict_matrix(mirror, base, prs, generated=[ALLOWLIST], cache=cache)
    assert again.pairs == matrix.pairs and cache.misses == 10
    builder.checkout("p4")
    builder.commit("p4 touches a", {"a.txt": "1\nFOUR\n3\n"})
    mirror.fetch()
    moved = [*prs[:3], (PrNumber(4), mirror.rev_parse("p4"))]
    restored = ConflictCache.from_json(json.loads(json.dumps(cache.to_json())))
    third = conflict_matrix(mirror, base, moved, generated=[ALLOWLIST], cache=restored)
    assert restored.misses == 1 + 3
    assert {(p.a, p.b) for p in third.pairs} == {(1, 2), (1, 4), (2, 4)}
    document = third.to_json()
    assert document["pairs"][0] == {
        "a": 1,
        "b": 2,
        "conflicts": [{"path": "a.txt", "type": "contents"}],
    }
    assert document["heads"]["4"] == Sha(mirror.rev_parse("p4"))
